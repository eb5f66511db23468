"""PromQL selector building: hostile label values must stay literal strings."""

from __future__ import annotations

import re

import pytest
from statictrain.promql import Matcher, escape_label_value, escape_regex_value, range_duration, selector


def _unquote_promql(body: str) -> str:
    """Decode one double-quoted PromQL string body the way Prometheus' lexer does (Go rules)."""
    out: list[str] = []
    i = 0
    simple = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"'}
    while i < len(body):
        ch = body[i]
        if ch == '"':
            raise AssertionError(f"unescaped quote at {i} in {body!r}")
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in simple:
            out.append(simple[nxt])
            i += 2
        elif nxt == "x":
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        else:
            raise AssertionError(f"unknown escape \\{nxt} in {body!r}")
    return "".join(out)


def _parse_selector(text: str) -> tuple[str, list[tuple[str, str, str]]]:
    m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}", text, flags=re.S)
    assert m, text
    body = m.group(2)
    parts = []
    pos = 0
    pat = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)(=~|!~|!=|=)"((?:[^"\\]|\\.)*)"(,|$)', flags=re.S)
    while pos < len(body):
        mm = pat.match(body, pos)
        assert mm, f"cannot parse at {pos}: {body[pos:]!r}"
        parts.append((mm.group(1), mm.group(2), _unquote_promql(mm.group(3))))
        pos = mm.end()
    return m.group(1), parts


HOSTILE = {
    "injection": 'x"}[5m]) or vector(1) #',
    "backslashes": "a\\b\\\\c\\",
    "newline": "line1\nline2\r\n",
    "tab_and_nul": "a\tb\x00c\x7f",
    "quote_only": '"',
    "trailing_backslash_quote": '\\"',
    "unicode": "équipe-ünïcødé-日本",
    "empty": "",
    "braces_commas": 'a},b="c",{',
}


@pytest.mark.parametrize("value", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_value_round_trips_as_one_literal(value: str) -> None:
    q = selector("statictrain_job_cost_usd_total", {"job_name": value, "namespace": "ns"})
    metric, parts = _parse_selector(q)
    assert metric == "statictrain_job_cost_usd_total"
    assert parts == [("job_name", "=", value), ("namespace", "=", "ns")]
    assert "\n" not in q and "\r" not in q


def test_injection_cannot_close_the_selector() -> None:
    q = selector("m", {"team": HOSTILE["injection"]})
    assert q == 'm{team="x\\"}[5m]) or vector(1) #"}'


@pytest.mark.parametrize("value", ["a.b", "x|y", "(.*)", "a\\d+", "[z]{2}$^", 'q"}'])
def test_any_of_matches_values_literally(value: str) -> None:
    q = selector("m", any_of={"commit": [value, "plain"]})
    _, parts = _parse_selector(q)
    ((name, op, regex),) = parts
    assert (name, op) == ("commit", "=~")
    rx = re.compile(regex)  # RE2 and Python agree on these escapes
    assert rx.fullmatch(value) and rx.fullmatch("plain")
    assert not rx.fullmatch(value + "x") and not rx.fullmatch("xplain")


def test_labels_sorted_and_stable() -> None:
    a = selector("m", {"b": "2", "a": "1"}, matchers=[Matcher("c", "!=", "")])
    assert a == 'm{a="1",b="2",c!=""}'
    assert selector("m") == "m"


@pytest.mark.parametrize(
    ("metric", "labels"),
    [("bad metric", {}), ("m{x}", {}), ("m", {"bad-label": "v"}), ("m", {"1abc": "v"}), ("m", {'a"': "v"})],
    ids=["space-in-metric", "brace-in-metric", "dash-label", "digit-label", "quote-label"],
)
def test_bad_names_are_rejected(metric: str, labels: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="invalid Prometheus"):
        selector(metric, labels)


def test_any_of_rejects_empty_and_bare_string() -> None:
    with pytest.raises(ValueError, match="empty"):
        selector("m", any_of={"a": []})
    with pytest.raises(TypeError):
        selector("m", any_of={"a": "abc"})


def test_escape_helpers() -> None:
    assert escape_label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert escape_regex_value("a.b*") == "a\\.b\\*"
    assert range_duration(1.5) == "1500ms"
    with pytest.raises(ValueError):
        range_duration(0)
