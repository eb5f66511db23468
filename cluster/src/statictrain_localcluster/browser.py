"""Open a page in real headless Chromium (Debian's ``chromium``) and say what it drew.

Talks the DevTools protocol over ``--remote-debugging-pipe`` (file descriptors 3
and 4, NUL-terminated JSON), so it needs nothing beyond the standard library.
One call loads the page, collects its console errors (console.error, uncaught
exceptions, failed loads: everything DevTools lists as an error), counts the
drawn data marks of every chart (``svg.chart`` elements' ``.mark`` children
with a non-empty box) and writes a full-page PNG screenshot.

    python -m statictrain_localcluster.browser REPORT.html [--screenshot OUT.png]
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = ["BrowserError", "PageCheck", "check_page", "find_chromium"]

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
INSTALL_HINT = "install Debian's chromium package (make system-deps, or apt-get install chromium)"

CHART_MARKS_JS = """
Array.from(document.querySelectorAll('svg.chart')).map(svg => {
  const marks = Array.from(svg.querySelectorAll('.mark')).filter(el => {
    const b = el.getBBox();
    return el.tagName === 'rect' ? b.width > 0 && b.height > 0 : b.width > 0 || b.height > 0;
  });
  const r = svg.getBoundingClientRect();
  return {name: svg.dataset.chart || '', drawn: marks.length, width: r.width, height: r.height};
})
"""


class BrowserError(RuntimeError):
    """Chromium is missing, did not start, or did not answer."""


@dataclass
class PageCheck:
    errors: list[str] = field(default_factory=list)
    """Console errors, uncaught exceptions and failed loads, as DevTools reports them."""
    charts: dict[str, int] = field(default_factory=dict)
    """Chart name -> data marks drawn with a non-empty box (an empty chart has 0)."""
    screenshot: Path | None = None

    @property
    def problems(self) -> list[str]:
        out = [f"console error: {e}" for e in self.errors]
        out += [f"chart {name!r} drew nothing" for name, n in self.charts.items() if n == 0]
        if not self.charts:
            out.append("the page has no charts")
        return out


def find_chromium() -> str:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    raise BrowserError(f"no Chromium found ({', '.join(CANDIDATES)}): {INSTALL_HINT}")


class _Pipe:
    """DevTools protocol over Chromium's debugging pipe."""

    def __init__(self, to_browser: IO[bytes], from_browser: IO[bytes], deadline: float) -> None:
        self.w, self.r, self.deadline = to_browser, from_browser, deadline
        self.next_id = 0
        self.buf = b""
        self.events: list[dict[str, Any]] = []

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self.buf:
            if time.monotonic() > self.deadline:
                raise BrowserError("Chromium did not answer in time")
            chunk = os.read(self.r.fileno(), 65536)
            if not chunk:
                raise BrowserError("Chromium closed the debugging pipe")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        msg: dict[str, Any] = json.loads(raw)
        return msg

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.w.write(json.dumps(msg).encode() + b"\0")
        self.w.flush()
        while True:
            got = self._read()
            if got.get("id") == self.next_id:
                if "error" in got:
                    raise BrowserError(f"{method}: {got['error'].get('message')}")
                result: dict[str, Any] = got.get("result") or {}
                return result
            self.events.append(got)

    def wait_event(self, method: str) -> dict[str, Any]:
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        while True:
            got = self._read()
            if got.get("method") == method:
                return got
            self.events.append(got)


def _errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in events:
        p = e.get("params") or {}
        if e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif e.get("method") == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails") or {}
            out.append(str((d.get("exception") or {}).get("description") or d.get("text", "exception")))
        elif e.get("method") == "Log.entryAdded" and (p.get("entry") or {}).get("level") == "error":
            entry = p["entry"]
            out.append(f"{entry.get('text', '')} {entry.get('url', '')}".strip())
    return out


def _high(fd: int) -> int:
    """``fd`` moved to a number of at least 10 (clear of 3 and 4, where Chromium wants its pipe)."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


def check_page(
    page: Path, *, screenshot: Path | None = None, width: int = 1000, timeout_s: float = 60.0
) -> PageCheck:
    """Load ``page`` (a local file) in headless Chromium and report what it drew (see the module docstring)."""
    exe = find_chromium()
    url = page.resolve().as_uri()
    to_r, to_w = (_high(fd) for fd in os.pipe())
    from_r, from_w = (_high(fd) for fd in os.pipe())
    profile = tempfile.mkdtemp(prefix="statictrain-chromium-")
    args = [exe, "--headless", "--remote-debugging-pipe", "--no-first-run", "--no-default-browser-check",
            "--disable-gpu", "--disable-extensions", "--disable-background-networking", "--mute-audio",
            f"--user-data-dir={profile}", f"--window-size={width},800"]  # fmt: skip
    if os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium refuses to run its sandbox as root
    # Chromium reads commands on fd 3 and writes answers on fd 4: bash puts the pipes there
    redirect = f'exec "$@" 3<&{to_r} 4>&{from_w} {to_r}<&- {from_w}>&-'
    proc = subprocess.Popen(
        ["bash", "-c", redirect, "bash", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(to_r, from_w),
    )
    os.close(to_r)
    os.close(from_w)
    out = PageCheck()
    try:
        with os.fdopen(to_w, "wb") as w, os.fdopen(from_r, "rb") as r:
            cdp = _Pipe(w, r, time.monotonic() + timeout_s)
            target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Runtime", "Log", "Page"):
                cdp.call(f"{domain}.enable", session=session)
            cdp.call("Page.navigate", {"url": url}, session=session)
            cdp.wait_event("Page.loadEventFired")
            value = cdp.call(
                "Runtime.evaluate", {"expression": CHART_MARKS_JS, "returnByValue": True}, session=session
            )["result"].get("value") or []
            for i, chart in enumerate(value):
                out.charts[chart.get("name") or f"chart {i + 1}"] = int(chart.get("drawn", 0))
            if screenshot is not None:
                size = cdp.call("Page.getLayoutMetrics", session=session)["cssContentSize"]
                shot = cdp.call(
                    "Page.captureScreenshot",
                    {"format": "png", "captureBeyondViewport": True,
                     "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}},
                    session=session,
                )  # fmt: skip
                screenshot.write_bytes(base64.b64decode(shot["data"]))
                out.screenshot = screenshot
            out.errors = _errors(cdp.events)
            cdp.call("Browser.close")
    finally:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="statictrain-browser-check", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("page", type=Path)
    ap.add_argument("--screenshot", type=Path)
    a = ap.parse_args(argv)
    try:
        check = check_page(a.page, screenshot=a.screenshot)
    except BrowserError as e:
        print(f"browser check: {e}", file=sys.stderr)
        return 2
    for name, n in check.charts.items():
        print(f"chart {name!r}: {n} marks drawn")
    for p in check.problems:
        print(p, file=sys.stderr)
    return 1 if check.problems else 0


if __name__ == "__main__":
    sys.exit(main())
