"""GETs of the API server, read within a size and a time bound: a hostile or broken answer is one error.

The kubernetes client reads an answer whole (and an error answer whole, to put it into ApiException) and
splits a watch into lines without a bound, so a misbehaving server could make the extender read without
end. Here the request goes through the client's own connection pool and credentials, and every answer
is read in pieces of at most one socket read: a body larger than its bound, one that is not JSON of the
expected shape, a Content-Encoding that was not asked for, an error status, a socket read that stalls
longer than its timeout or a whole read that lasts longer than its deadline is an ``AnswerError`` (or
one of urllib3's, an OSError) with a one-line message; nothing is decoded before it is bounded.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlencode

import orjson
import urllib3
from kubernetes import client

__all__ = ["AnswerError", "get", "json_lines", "post", "read_json", "send"]

_PIECE = 1 << 16
_ERROR_TEXT_BYTES = 200
"""At most this much of an error answer's body is read, for its message."""


class AnswerError(ValueError):
    """An answer of the API server that is not what was asked for (one line)."""


def get(
    api: client.ApiClient, path: str, query: Mapping[str, str], connect_s: float, read_s: float
) -> urllib3.BaseHTTPResponse:
    """GET ``path`` with ``query`` as JSON, not yet read (read it with ``read_json`` or ``json_lines``);
    AnswerError for an error status or an encoding not asked for."""
    return send(api, "GET", path, query=query, body=None, connect_s=connect_s, read_s=read_s, ok=(200,))


def post(api: client.ApiClient, path: str, body: object, connect_s: float, read_s: float) -> int:
    """POST ``body`` as JSON to ``path``; its answer's status (2xx), its body left unread; AnswerError
    for an error status."""
    data = orjson.dumps(body)
    with send(api, "POST", path, query={}, body=data, connect_s=connect_s, read_s=read_s, ok=(200, 201, 202)) as resp:
        return resp.status


def send(
    api: client.ApiClient,
    method: str,
    path: str,
    *,
    query: Mapping[str, str],
    body: bytes | None,
    connect_s: float,
    read_s: float,
    ok: tuple[int, ...],
) -> urllib3.BaseHTTPResponse:
    """One request through the client's pool and credentials, its answer not yet read; AnswerError for a
    status not in ``ok`` (at most _ERROR_TEXT_BYTES of its body read) or an encoding not asked for."""
    cfg = api.configuration
    headers = {"Accept": "application/json", "Accept-Encoding": "identity", "User-Agent": api.user_agent}
    if body is not None:
        headers["Content-Type"] = "application/json"
    api.update_params_for_auth(headers, [], ["BearerToken"], path, method, None)
    url = cfg.host.rstrip("/") + path + (f"?{urlencode(query)}" if query else "")
    resp = api.rest_client.pool_manager.request(
        method,
        url,
        body=body,
        headers=headers,
        timeout=urllib3.Timeout(connect=connect_s, read=read_s),
        retries=False,
        redirect=False,
        preload_content=False,
        decode_content=False,
    )
    try:
        encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise AnswerError(f"its answer has Content-Encoding {encoding[:40]!a}, which was not asked for")
        if resp.status not in ok:
            text = resp.read1(_ERROR_TEXT_BYTES) if resp.status >= 400 else b""
            raise AnswerError(f"HTTP {resp.status} ({_shown(text)})")
    except BaseException:
        resp.close()  # its body is not read: the connection is not reused
        raise
    return resp


def _shown(data: bytes) -> str:
    return ascii(data.decode("utf-8", "replace"))[1:-1][:_ERROR_TEXT_BYTES]


def _pieces(resp: urllib3.BaseHTTPResponse, deadline: float) -> Iterator[bytes]:
    """The body in pieces of at most one socket read each, until its end or the deadline."""
    while True:
        piece = resp.read1(_PIECE)
        if not piece:
            return
        yield piece
        if time.monotonic() > deadline:
            raise AnswerError("its answer went on past its deadline")


def read_json(resp: urllib3.BaseHTTPResponse, limit: int, deadline: float) -> Any:
    """The whole body as JSON, at most ``limit`` bytes, read by ``deadline`` (time.monotonic)."""
    with resp:
        data = bytearray()
        for piece in _pieces(resp, deadline):
            data += piece
            if len(data) > limit:
                raise AnswerError(f"its answer is over {limit} bytes")
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise AnswerError(f"its answer is not JSON ({e})") from None


def json_lines(resp: urllib3.BaseHTTPResponse, limit: int, deadline: float) -> Iterator[Any]:
    """Each line of the body as JSON (a watch's events), each at most ``limit`` bytes; the body ends by
    ``deadline``. A line that is not JSON, or one longer than ``limit``, ends it with AnswerError."""
    with resp:
        line = bytearray()
        for piece in _pieces(resp, deadline):
            start = 0
            while (end := piece.find(b"\n", start)) >= 0:
                line += piece[start:end]
                start = end + 1
                if len(line) > limit:
                    raise AnswerError(f"a line of its answer is over {limit} bytes")
                if line.strip():
                    yield _json_line(line)
                line = bytearray()
            line += piece[start:]
            if len(line) > limit:
                raise AnswerError(f"a line of its answer is over {limit} bytes with no end of line")
        if line.strip():
            yield _json_line(line)


def _json_line(line: bytearray) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise AnswerError(f"a line of its answer is not JSON ({e})") from None
