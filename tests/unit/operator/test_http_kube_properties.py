"""HttpKube's get and list against an API server that answers with anything: a loopback HTTP server
serving generated statuses and bodies, page by page (the continue token names the page).

What always holds: get gives an object, None (404) or an ApiError; list gives a list of objects or an
ApiError, and ends (a token that repeats, is not text or never stops is an ApiError, not a loop); no
other exception escapes to the operator's handlers, and the next valid answer is still read. (Answers
that break HTTP's framing are transport errors, aiohttp's, like a refused connection: not generated.)"""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statictrain_operator.kube import http as kube_http
from statictrain_operator.kube import port
from statictrain_operator.kube.endpoint import Endpoint
from statictrain_operator.kube.http import HttpKube
from statictrain_operator.kube.port import ApiError

ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
TOKEN = st.one_of(st.sampled_from(["p1", "p2", "p0", "", "x"]), ANY_JSON)
LIST_PAGE = st.builds(
    lambda items, meta: {"items": items, "metadata": meta},
    st.one_of(st.lists(st.one_of(st.fixed_dictionaries({"metadata": ANY_JSON}), ANY_JSON), max_size=3), ANY_JSON),
    st.one_of(st.fixed_dictionaries({"continue": TOKEN}), ANY_JSON),
)
STATUS = st.sampled_from([200, 200, 200, 201, 204, 301, 400, 401, 403, 404, 409, 410, 422, 429, 500, 503])
PAGE = st.tuples(STATUS, st.one_of(LIST_PAGE.map(json.dumps), ANY_JSON.map(json.dumps), st.text(max_size=60)))
VALID = (200, json.dumps({"items": [{"metadata": {"name": "ok"}}], "metadata": {}}))


class _Pages(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        pages: list[tuple[int, str]] = self.server.pages  # type: ignore[attr-defined]
        token = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query).get("continue", ["p0"])[0]
        index = int(token[1:]) if token[:1] == "p" and token[1:].isdigit() else len(pages) - 1
        status, text = pages[min(index, len(pages) - 1)]
        body = b"" if status == 204 else text.encode("utf-8", errors="replace")  # HTTP: a 204 has no body
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Retry-After", "soon")  # 429s say when, in any form: HttpKube does not wait on it
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        for at in range(0, len(body), 1 << 16):  # in pieces, as a large answer arrives
            self.wfile.write(body[at : at + (1 << 16)])
            self.wfile.flush()
            if len(body) > 1 << 20:
                time.sleep(0.001)

    def log_message(self, *_: object) -> None:
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    pages: list[tuple[int, str]]


@pytest.fixture(scope="module")
def api() -> Iterator[tuple[_Server, HttpKube]]:
    httpd = _Server(("127.0.0.1", 0), _Pages)
    httpd.pages = [VALID]
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd, HttpKube(Endpoint(server=f"http://127.0.0.1:{httpd.server_address[1]}"), timeout_s=5.0)
    httpd.shutdown()
    httpd.server_close()


async def _both(kube: HttpKube) -> tuple[Any, Any]:
    out: list[Any] = []
    for call in (kube.get(port.CONFIGMAPS, "ns", "a"), kube.list(port.CONFIGMAPS, "ns")):
        try:
            out.append(await call)
        except ApiError as e:
            out.append(e)
    return out[0], out[1]


@given(pages=st.lists(PAGE, min_size=1, max_size=4))
def test_any_answer_is_an_object_a_list_of_objects_or_an_api_error(
    api: tuple[_Server, HttpKube], pages: list[tuple[int, str]]
) -> None:
    httpd, kube = api
    httpd.pages = pages
    got, listed = asyncio.run(_both(kube))
    assert got is None or isinstance(got, dict | ApiError)
    assert isinstance(listed, ApiError) or (isinstance(listed, list) and all(isinstance(i, dict) for i in listed))
    httpd.pages = [VALID]
    assert [i["metadata"]["name"] for i in asyncio.run(kube.list(port.CONFIGMAPS, "ns"))] == ["ok"]


def test_an_answer_over_the_size_limit_is_an_api_error(
    api: tuple[_Server, HttpKube], monkeypatch: pytest.MonkeyPatch
) -> None:
    httpd, kube = api
    monkeypatch.setattr(kube_http, "MAX_BODY_BYTES", 1000)
    httpd.pages = [(200, json.dumps({"items": [{"metadata": {"name": "x" * 2000}}]}))]
    with pytest.raises(ApiError, match="ResponseTooLarge"):
        asyncio.run(kube.list(port.CONFIGMAPS, "ns"))


def test_a_list_whose_pages_never_end_is_cut_off(
    api: tuple[_Server, HttpKube], monkeypatch: pytest.MonkeyPatch
) -> None:
    httpd, kube = api
    monkeypatch.setattr(kube_http, "MAX_LIST_PAGES", 5)
    httpd.pages = [(200, json.dumps({"items": [], "metadata": {"continue": f"p{i + 1}"}})) for i in range(10)]
    with pytest.raises(ApiError, match="TooManyPages"):
        asyncio.run(kube.list(port.CONFIGMAPS, "ns"))
    httpd.pages = [(200, json.dumps({"items": [], "metadata": {"continue": "p0"}}))]  # points back at itself
    with pytest.raises(ApiError, match="BadContinue"):
        asyncio.run(kube.list(port.CONFIGMAPS, "ns"))


def test_a_large_answer_arriving_in_pieces_is_read_whole(api: tuple[_Server, HttpKube]) -> None:
    httpd, kube = api
    names = [f"cm-{i:05d}-" + "x" * 200 for i in range(10_000)]  # ~2.3 MB, a page of big objects
    httpd.pages = [(200, json.dumps({"items": [{"metadata": {"name": n}} for n in names], "metadata": {}}))]
    assert [i["metadata"]["name"] for i in asyncio.run(kube.list(port.CONFIGMAPS, "ns"))] == names
