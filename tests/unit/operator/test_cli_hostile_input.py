"""#33: the ``statictrain`` command line itself as an input surface: hostile options and input files.

The real commands run in-process through ``statictrain_cli.main.main`` with generated option values
(durations, times, timeouts, bucket counts, URLs) and generated input files (the gate's report JSON, the
estimate's spec and node list, advise's throughput table, standard input, a FIFO): real files on disk, a
Prometheus URL on a closed loopback port and no kubectl on PATH, so nothing outside answers.

What always holds: the exit status is one of ``CliExit``'s and never 70 (an internal error: a bug); a bad
option or file is exit 2 with one line on stderr naming it; no traceback; the gate never passes unless
both commits' figures are finite.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statictrain.exitcodes import CliExit
from statictrain_cli.files import InputError, write_output
from statictrain_cli.main import main

EXAMPLES = Path(__file__).resolve().parents[3] / "deploy" / "examples"
CODES = {int(c) for c in CliExit}


@pytest.fixture(scope="module", autouse=True)
def nothing_outside_answers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Prometheus URL whose port nobody listens on, and a PATH without kubectl."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    empty = tmp_path_factory.mktemp("no-kubectl")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STATICTRAIN_PROMETHEUS_URL", url)
        mp.setenv("PATH", str(empty))
        yield url


def run(argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    finally:
        sys.stdin = old_stdin
    return rc, out.getvalue(), err.getvalue()


def holds(rc: int, out: str, err: str) -> None:
    assert rc in CODES and rc != CliExit.INTERNAL, (rc, err)
    assert "Traceback" not in err and err.count("\n") <= 1, err


# ---------------------------------------------------------------------------------------------- options

_NUMBERISH = st.sampled_from(
    ["0", "-1", "nan", "inf", "-inf", "1e400", "1e-400", "0x10", "1_0", "\u0661", "", " 1", "3600.0001", "1" * 400]
)
_DURATION = _NUMBERISH | st.sampled_from(["0s", "1h", "99999999999d", "1h\n", "1\u0661h", "1.5h", "h", "7d"])
_TIME = st.sampled_from(
    [
        "2026-13-01T00:00:00Z",
        "9999-12-31T23:59:59Z",
        "0001-01-01T00:00:00+23:59",
        "2026-03-01",
        "Z",
        "2026-03-01T00:00:00Z",
    ]
) | st.text(max_size=30)
_URL = st.sampled_from(
    [
        "ftp://x",
        "http://",
        "http://[::1",
        "http://h:99999",
        "http://h:x",
        "http://u:s3cr3t@127.0.0.1:1/?token=s3cr3t",
        "\x00",
    ]
) | st.text(max_size=30)
_VALUES = {
    "--last": _DURATION,
    "--history": _DURATION,
    "--from": _TIME,
    "--to": _TIME,
    "--timeout": _NUMBERISH,
    "--buckets": _NUMBERISH | st.sampled_from(["100001", "1000000000", "24"]),
    "--prometheus-url": _URL,
    "--max-regression": _NUMBERISH | st.sampled_from(["5%", "-5%", "nan%", "inf%", "100000%", "5%%"]),
    "--format": st.sampled_from(["json", "html", "csv", "table", "xml"]),
    "--by": st.sampled_from(["commit", "x"]),
}
_COMMANDS = {
    "report": ["--last", "--from", "--to", "--timeout", "--buckets", "--prometheus-url", "--format", "--by"],
    "gate": ["--last", "--to", "--timeout", "--prometheus-url", "--max-regression"],
    "estimate": ["--history", "--timeout", "--prometheus-url"],
}


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(sorted(_COMMANDS)))
    argv = [command]
    if command == "gate":
        argv += ["--commit", draw(st.text(max_size=10)), "--baseline", "b"]
    if command == "estimate":
        argv += ["-f", str(EXAMPLES / "one-gpu.yaml"), "--offline", "--catalog"]
    for name in draw(st.lists(st.sampled_from(_COMMANDS[command]), max_size=4, unique=True)):
        argv += [name, draw(_VALUES[name])]
    if command == "report":
        argv.append("--no-progress")
    return argv


@given(argv=command_lines())
def test_any_command_line_gets_an_exit_status_of_the_table_and_at_most_one_line(argv: list[str]) -> None:
    rc, out, err = run(argv)
    holds(rc, out, err)
    assert "s3cr3t" not in err + out
    if rc == CliExit.USAGE:
        assert err.strip(), argv


# ---------------------------------------------------------------------------------------------- input files

_JSON_LEAF = st.none() | st.booleans() | st.floats() | st.integers(-(10**400), 10**400) | st.text(max_size=12)
_JSON = st.recursive(
    _JSON_LEAF,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=16,
)
_FIGURE = st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1", "1e308", '"nan"', '"1e308"', "null", '"x"'])
_ROW = st.fixed_dictionaries(
    {"commit": st.sampled_from(['"a"', '"b"', "1", "null", '"\\u0000"'])},
    optional={"usd": _FIGURE | st.floats(0, 1e6).map(repr), "tokens": _FIGURE | st.floats(0, 1e12).map(repr)},
)


def _report_text(rows: list[dict[str, str]], group_by: str) -> str:
    body = ", ".join("{" + ", ".join(f'"{k}": {v}' for k, v in r.items()) + "}" for r in rows)
    return f'{{"group_by": "{group_by}", "rows": [{body}]}}'


_REPORT = st.one_of(
    st.builds(_report_text, st.lists(_ROW, max_size=5), st.sampled_from(["commit", "commit", "job"])),
    _JSON.map(json.dumps),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    st.integers(1, 5000).map(lambda n: "[" * n),
)
_YAML = st.one_of(
    _JSON.map(json.dumps),
    st.sampled_from(
        [
            "a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
            "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
            "!!python/object/apply:os.system ['true']\n",
            "--- 1\n--- 2\n",
            "H100: nan\n",
            "H100: -1\nA100: 1e999\n",
            "items: [{metadata: {name: n, labels: 1}}]\n",
            "kind: StaticTrainingJob\n",
            "\t: :\n",
        ]
    ),
    st.text(max_size=200),
    st.integers(1, 3000).map(lambda n: "[" * n),
)


@given(doc=_REPORT)
def test_the_gate_on_any_report_file_fails_closed(tmp_path_factory: pytest.TempPathFactory, doc: str) -> None:
    path = tmp_path_factory.mktemp("gate") / "report.json"
    path.write_text(doc, encoding="utf-8", errors="surrogateescape")
    rc, out, err = run(["gate", "--commit", "a", "--baseline", "b", "--max-regression", "5%", "--report", str(path)])
    holds(rc, out, err)
    if rc == CliExit.OK:
        assert "PASS" in out and not any(w in out.lower() for w in ("nan", "inf")), out


@given(text=_YAML, where=st.sampled_from(["-f", "--nodes", "--throughput", "stdin"]))
def test_estimate_and_advise_on_any_input_file(tmp_path_factory: pytest.TempPathFactory, text: str, where: str) -> None:
    path = tmp_path_factory.mktemp("input") / "in.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    spec = str(EXAMPLES / "one-gpu.yaml")
    argv = {
        "-f": ["estimate", "-f", str(path), "--offline", "--catalog", "--no-history"],
        "stdin": ["estimate", "-f", "-", "--offline", "--catalog", "--no-history"],
        "--nodes": ["estimate", "-f", spec, "--offline", "--nodes", str(path), "--no-history"],
        "--throughput": ["advise", "flavors", "--cluster-queue", "q", "--throughput", str(path)],
    }[where]
    rc, out, err = run(argv, stdin=text)
    holds(rc, out, err)


@pytest.mark.parametrize("kind", ["fifo", "folder", "missing", "too large"])
def test_an_input_that_is_not_a_readable_regular_file_is_exit_2_without_blocking(tmp_path: Path, kind: str) -> None:
    """A FIFO nobody writes to would block a plain open() for ever; a folder or a missing file is named."""
    path = tmp_path / "in.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "too large":
        with path.open("wb") as f:
            f.truncate(64 * 1024 * 1024 + 1)  # sparse: no disk used
    rc, out, err = run(["gate", "--commit", "a", "--baseline", "b", "--max-regression", "5%", "--report", str(path)])
    holds(rc, out, err)
    assert rc == CliExit.USAGE and str(path) in err, err


@pytest.mark.parametrize("kind", ["symlink", "fifo", "folder", "no folder"])
def test_an_output_path_that_is_not_a_regular_file_is_refused_and_nothing_is_written(tmp_path: Path, kind: str) -> None:
    """``report -o`` writes through statictrain_cli.files.write_output: a symlink is not followed, a FIFO not opened."""
    target, victim = tmp_path / "out.html", tmp_path / "victim"
    victim.write_text("keep", encoding="utf-8")
    if kind == "symlink":
        target.symlink_to(victim)
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    else:
        target = tmp_path / "missing" / "out.html"
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(InputError, match="cannot write"):
        write_output(str(target), "<html></html>")
    assert victim.read_text(encoding="utf-8") == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == before
