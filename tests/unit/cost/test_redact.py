"""Credentials never reach messages or logs: safe_url, redact, RedactingFilter, and Prometheus errors."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statictrain.redact import HIDDEN, RedactingFilter, install, redact, safe_url
from statictrain_operator.prom import HttpPrometheus, PrometheusQueryError, PrometheusUnavailableError

SECRETS = ("s3cr3t-pass", "s3cr3t-token", "s3cr3t-frag", "alice")


@pytest.mark.parametrize(
    ("url", "want"),
    [
        (
            "https://alice:s3cr3t-pass@prom.example:9090/api?token=s3cr3t-token#s3cr3t-frag",
            "https://prom.example:9090/api",
        ),
        ("http://prometheus-server:9090", "http://prometheus-server:9090"),
        ("http://alice@[::1]:9090/x/", "http://[::1]:9090/x/"),
        ("HTTP://Host/p?q=1", "http://host/p"),
    ],
)
def test_safe_url_keeps_only_scheme_host_port_and_path(url: str, want: str) -> None:
    assert safe_url(url) == want


@pytest.mark.parametrize(
    "text",
    [
        "GET http://alice:s3cr3t-pass@h:1/x?token=s3cr3t-token failed.",
        "url='https://h/api/v1/query?access_key=s3cr3t-token', status=400",
        "Authorization: Bearer s3cr3t-token",
        "login with password=s3cr3t-pass and api_key: s3cr3t-token",
        'config {"client_secret": "s3cr3t-pass"}',
        "see http://h:notaport@x/",
    ],
)
def test_redact_hides_every_secret_in_free_text(text: str) -> None:
    out = redact(text)
    assert not any(s in out for s in SECRETS), out


def test_redact_leaves_plain_text_and_plain_urls_alone() -> None:
    text = "cannot reach Prometheus at http://prometheus-server:9090/api/v1/query (refused); job a/b, 3 tokens/s."
    assert redact(text) == text
    assert redact("see http://h/x.") == "see http://h/x."


def test_the_logging_filter_redacts_messages_arguments_and_tracebacks() -> None:
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    logger = logging.getLogger("test-redact")
    handler = Keep()
    handler.addFilter(RedactingFilter())
    logger.addHandler(handler)
    try:
        logger.warning("refresh from %s failed", "http://alice:s3cr3t-pass@h/?token=s3cr3t-token")
        try:
            raise RuntimeError("bad url http://h/?token=s3cr3t-token")
        except RuntimeError:
            logger.exception("boom")
    finally:
        logger.removeHandler(handler)
    assert records and not any(s in r for r in records for s in SECRETS), records
    assert "http://h/" in records[0] and "RuntimeError" in records[1]


def test_install_filters_every_handler_once_and_catches_records_of_child_loggers() -> None:
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    parent, handler = logging.getLogger("test-install"), Keep()
    parent.addHandler(handler)
    try:
        install()  # the root logger's handlers (pytest's own, here)
        assert install("test-install") == 1  # only the new handler; the root's have theirs already
        assert install("test-install") == 0
        # a record of a child logger reaches the parent's handler: a logger-level filter would miss it
        logging.getLogger("test-install.child").warning("password=%s", "s3cr3t-pass")
    finally:
        parent.removeHandler(handler)
        for h in logging.getLogger().handlers:
            h.filters[:] = [f for f in h.filters if not isinstance(f, RedactingFilter)]
    assert records == [f"password={HIDDEN}"]


def test_prometheus_errors_never_quote_credentials(echoing_prometheus: int) -> None:
    with pytest.raises(PrometheusQueryError) as rejected:
        HttpPrometheus(f"http://127.0.0.1:{echoing_prometheus}/prom?token=s3cr3t-token").query("up", 0)
    assert "127.0.0.1" in str(rejected.value) and not any(s in str(rejected.value) for s in SECRETS)
    with pytest.raises(PrometheusUnavailableError) as down:
        HttpPrometheus("http://alice:s3cr3t-pass@127.0.0.1:1/?token=s3cr3t-token", timeout_s=5).query("up", 0)
    message = str(down.value)
    assert "cannot reach Prometheus at http://127.0.0.1:1/" in message
    assert not any(s in message for s in SECRETS) and HIDDEN not in message


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "text",
    [
        "a." * 200_000,  # word boundaries everywhere, scheme characters, no "://"
        "a-" * 200_000,
        "http://h/x?token=s3cr3t-token" + ")" * 400_000,  # sentence punctuation after a URL
        "a1+" * 130_000 + "://h/?token=s3cr3t-token",  # an endless "scheme"
    ],
    ids=["dots", "dashes", "trailing-punctuation", "long-scheme"],
)
def test_redact_takes_time_linear_in_its_input(text: str) -> None:
    # #33: 0.38 s on 20 KB of "a." and growing with the square of the length (about 150 s on these
    # 400 KB); linear, each takes well under a second. The limit only catches a return to quadratic.
    out = redact(text)
    assert "s3cr3t-token" not in out


def test_a_url_glued_to_a_word_is_still_redacted() -> None:
    assert "s3cr3t-token" not in redact("see_http://alice:s3cr3t-token@h/")
    assert "s3cr3t-token" not in redact("x" * 100 + "http://alice:s3cr3t-token@h/")


_NOISE = st.text(st.sampled_from("aZ09 .,;:)]}/?#@=&-_+'\"<>\n\t"), max_size=60)


@given(before=_NOISE, after=_NOISE, url=st.sampled_from([
    "http://alice:{s}@h:1/x", "https://h/api?key={s}", "http://h/#{s}", "s3://b/k?X-Amz-Signature={s}",
]), pair=st.sampled_from(["password={s}", "Authorization: Bearer {s}", "api_key: {s}", "token {s}"]))
def test_planted_secrets_never_survive_whatever_surrounds_them(before: str, after: str, url: str, pair: str) -> None:
    secret = "Zq8s3cr3tValue"
    for planted in (url.format(s=secret), pair.format(s=secret)):
        out = redact(f"{before} {planted} {after}")
        assert secret not in out, out
_SCHEME_NOISE = st.text(alphabet="ab-.:/@ ?#=x", max_size=300)


@given(before=_SCHEME_NOISE, after=_SCHEME_NOISE)
def test_a_url_with_credentials_inside_scheme_like_noise_is_redacted(before: str, after: str) -> None:
    """#33: the URL pattern's scheme is bounded (so redact is linear in its input: a long ``a-a-a-...`` took 9 s
    on 80 KB when every word start rescanned the rest); with no word boundary before it, a URL glued to any
    run of scheme-like characters is still found and its credentials hidden."""
    text = f"{before}https://alice:s3cr3t-pass@prom.example:9090/api?token=s3cr3t-token {after}"
    out = redact(text)
    assert "s3cr3t" not in out and "alice" not in out, out
