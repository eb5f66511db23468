"""The extender's state from the operator's probes: one transition per change, never one per probe (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from statictrain_operator import settings
from statictrain_operator.extender_health import ExtenderHealth

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def run(health: ExtenderHealth, probes: str) -> list[tuple[int, str, bool | None]]:
    """Feed probes ('+' answered, '-' failed), one every 10 s; (probe index, reason, previous) per transition."""
    out = []
    for i, p in enumerate(probes):
        change = health.observe(p == "+", "HTTP 200" if p == "+" else "ConnectionRefusedError", T0 + timedelta(
            seconds=10 * i))
        if change is not None:
            out.append((i, change.reason, change.previous))
    return out


@pytest.mark.parametrize(
    ("probes", "failures", "want"),
    [
        ("++++", 2, [(0, "ExtenderUp", None)]),
        ("--", 2, [(1, "ExtenderDown", None)]),
        ("+-+-+", 2, [(0, "ExtenderUp", None)]),  # single misses in a row of answers: no change
        ("+--------+++", 2, [(0, "ExtenderUp", None), (2, "ExtenderDown", True), (9, "ExtenderUp", False)]),
        ("+-+", 1, [(0, "ExtenderUp", None), (1, "ExtenderDown", True), (2, "ExtenderUp", False)]),
        ("+---+---", 3, [(0, "ExtenderUp", None), (3, "ExtenderDown", True), (4, "ExtenderUp", False),
                         (7, "ExtenderDown", True)]),
        ("-+", 2, [(1, "ExtenderUp", None)]),
    ],
)
def test_one_transition_per_change(probes: str, failures: int, want: list[tuple[int, str, bool | None]]) -> None:
    assert run(ExtenderHealth(failures), probes) == want


def test_down_time_counts_from_the_first_failed_probe_and_the_first_up_is_no_event() -> None:
    health = ExtenderHealth(2)
    first = health.observe(True, "HTTP 200", T0)
    assert first is not None and first.up and not first.worth_an_event
    assert first.message("http://x:8888/healthz") == "scheduler extender http://x:8888/healthz answers its health check"
    assert health.observe(False, "timed out", T0 + timedelta(seconds=10)) is None
    down = health.observe(False, "timed out", T0 + timedelta(seconds=20))
    assert down is not None and not down.up and down.worth_an_event and down.detail == "timed out"
    assert "does not answer its health check (timed out)" in down.message("http://x:8888/healthz")
    assert "without cost awareness" in down.message("http://x:8888/healthz")
    back = health.observe(True, "HTTP 200", T0 + timedelta(seconds=75))
    assert back is not None and back.up and back.worth_an_event and back.down_s == 65
    assert back.message("http://x:8888/healthz").endswith("again after 65s down: cost-aware placement is back")


def test_first_verdict_down_is_an_event() -> None:
    down = run(ExtenderHealth(1), "-")
    assert down == [(0, "ExtenderDown", None)]
    health = ExtenderHealth(1)
    change = health.observe(False, "x", T0)
    assert change is not None and change.worth_an_event


def test_failures_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ExtenderHealth(0)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"EXTENDER_HEALTH_URL": "statictrain-extender:8888/healthz"}, "must be an http\\(s\\) URL with a host"),
        ({"EXTENDER_HEALTH_URL": "ftp://x/healthz"}, "got ftp scheme"),
        ({"EXTENDER_PROBE_TIMEOUT_S": "20"}, "EXTENDER_PROBE_TIMEOUT_S must be > 0 and at most"),
        ({"EXTENDER_PROBE_TIMEOUT_S": "0"}, "EXTENDER_PROBE_TIMEOUT_S must be > 0"),
        ({"EXTENDER_PROBE_FAILURES": "0"}, "EXTENDER_PROBE_FAILURES must be at least 1"),
    ],
)
def test_bad_probe_settings_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(settings.SettingsError, match=message):
        settings.from_env({f"STATICTRAIN_OPERATOR_{k}": v for k, v in env.items()})


def test_probe_is_off_by_default_and_on_with_a_url() -> None:
    assert settings.from_env({}).extender_health_url == ""
    s = settings.from_env({"STATICTRAIN_OPERATOR_EXTENDER_HEALTH_URL": "https://e.ns.svc:8888/healthz"})
    assert s.extender_health_url == "https://e.ns.svc:8888/healthz"
