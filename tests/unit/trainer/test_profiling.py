from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from statictrain import channel
from statictrain_trainer.profiling import ProfileService, parse_request


@pytest.mark.parametrize(
    ("text", "error"),
    [
        pytest.param('{"v": 1, "steps": 3}', None, id="ok"),
        pytest.param('{"steps": 0}', "steps must be an integer from 1 to", id="zero"),
        pytest.param('{"v": 2, "steps": 3}', "unsupported request version", id="version"),
        pytest.param("[1]", "must be a JSON object", id="not-object"),
        pytest.param('{"steps": true}', "steps must be an integer", id="bool"),
    ],
)
def test_parse_request(text: str, error: str | None) -> None:
    if error is None:
        assert parse_request(text) == 3
    else:
        with pytest.raises(ValueError, match=error):
            parse_request(text)


def test_request_is_claimed_and_trace_written(tmp_path: Path) -> None:
    service = ProfileService(tmp_path, torch.device("cpu"))
    requests = tmp_path / channel.REQUESTS_DIR
    (requests / "profile-abc.json").write_text(json.dumps({"v": 1, "steps": 2}))
    (requests / "profile-bad.json").write_text("{}")
    x = torch.randn(64, 64)
    for _ in range(4):
        service.before_step()
        (x @ x).sum()
        service.after_step()
    out = tmp_path / channel.PROFILES_DIR
    assert not list(requests.iterdir())
    assert json.loads((out / "abc" / "trace.json").read_text())["traceEvents"]
    assert "aten::mm" in (out / "abc" / "top.txt").read_text()
    assert "bad profile request" in (out / "bad" / "error.txt").read_text()
