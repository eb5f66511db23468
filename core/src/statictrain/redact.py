"""Keep credentials out of messages, events, status and logs.

``safe_url`` is what a message may say about a configured URL: scheme, host, port and
path; never the user and password, the query string or the fragment (tokens travel
there). ``redact`` applies the same to every URL in a free text (an exception's message
often quotes the URL it failed on) and hides bearer tokens and ``password=``-like
pairs. ``RedactingFilter`` runs ``redact`` over every log record of a handler;
``install`` puts one on every handler of the named loggers (a process's log setup).
"""

from __future__ import annotations

import logging
import re
from urllib.parse import urlsplit, urlunsplit

__all__ = ["HIDDEN", "RedactingFilter", "install", "redact", "safe_url"]

HIDDEN = "***"

_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]{0,31}://[^\s'\"<>]+")
"""A URL in free text. The scheme is bounded (32 characters, RFC 3986 sets none; real ones are short) so the
search is linear: an unbounded one rescanned the rest of a long ``a-a-a-...`` at every word start (9 s on 80 KB).
No word boundary before it: in ``xxxx...http://user:pw@host`` the last 32 characters before ``://`` still match."""
_BEARER = re.compile(r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{6,}")
_PAIR = re.compile(
    r"(?i)\b(password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|client[_-]?secret|authorization)"
    r"([\"']?\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;&)}\]]+)"
)


def safe_url(url: str) -> str:
    """``url`` without userinfo, query string and fragment; a text that is no URL comes back redacted."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return redact(url)
    if not parts.scheme or not host:
        return redact(url)
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def redact(text: str) -> str:
    """``text`` with every URL made safe, bearer/basic tokens and secret-looking key=value pairs hidden."""
    text = _URL.sub(lambda m: _safe_in_text(m.group(0)), text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{HIDDEN}", text)
    return _PAIR.sub(lambda m: f"{m.group(1)}{m.group(2)}{HIDDEN}", text)


def _safe_in_text(url: str) -> str:
    kept = url.rstrip(".,;:)]}")  # punctuation that ends a sentence, not the URL
    url, trail = kept, url[len(kept) :]
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018  (raises on a malformed port)
    except ValueError:
        return HIDDEN + trail
    marks = ("@" in parts.netloc) or bool(parts.query) or bool(parts.fragment)
    return (safe_url(url) if marks else url) + trail


class RedactingFilter(logging.Filter):
    """A logging filter that redacts the formatted message (and exception text) of every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_info[1] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text = redact(text)
            record.exc_info = None
        return True


def install(*names: str) -> int:
    """Put a ``RedactingFilter`` on every handler of the root logger and of the loggers ``names``.

    On handlers, not loggers: a logger's filters do not see records propagated from its
    children, a handler's do. Call it after the handlers exist (after ``basicConfig``,
    ``kopf.configure``); a handler that has one already is left as it is. Returns the
    number of handlers that got one.
    """
    added = 0
    for name in ("", *names):
        for handler in logging.getLogger(name or None).handlers:
            if not any(isinstance(f, RedactingFilter) for f in handler.filters):
                handler.addFilter(RedactingFilter())
                added += 1
    return added
