"""Profile requests: the request file per the channel contract, bounds, expiry, pruning, safe downloads."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest
from statictrain.channel import PROFILES_DIR, REQUESTS_DIR
from statictrain_sidecar.profiles import ProfileError, ProfileRequests


@pytest.fixture
def wall() -> Any:
    class Wall:
        now = 1_800_000_000.0

        def __call__(self) -> float:
            return self.now

    return Wall()


@pytest.fixture
def profiles(tmp_path: Path, wall: Any) -> Any:
    ids = (f"p{i}" for i in itertools.count(1))
    return ProfileRequests(
        tmp_path, max_steps=20, timeout_s=60, max_bytes=1000, clock=wall, new_id=lambda: next(ids)
    )


def test_request_writes_the_channel_request_file(profiles: Any, tmp_path: Path) -> None:
    t = profiles.request("5")
    assert t.request == tmp_path / REQUESTS_DIR / "profile-p1.json"
    assert json.loads(t.request.read_text()) == {"v": 1, "steps": 5}
    assert t.output == tmp_path / PROFILES_DIR / "p1"
    assert [p.name for p in (tmp_path / REQUESTS_DIR).iterdir()] == ["profile-p1.json"]  # no temp file left
    assert [(p.id, p.state) for p in profiles.listing()] == [("p1", "requested")]


@pytest.mark.parametrize("steps", [None, "", "ten", "0", "-3", "21", "2.5"])
def test_bad_step_counts_are_rejected_with_the_allowed_range(profiles: Any, steps: Any) -> None:
    with pytest.raises(ProfileError, match="1 to 20") as e:
        profiles.request(steps)
    assert e.value.status == 400
    assert profiles.outcomes["rejected"] == 1


def test_one_pending_request_at_a_time(profiles: Any, tmp_path: Path) -> None:
    t = profiles.request("3")
    with pytest.raises(ProfileError, match="p1") as e:
        profiles.request("3")
    assert e.value.status == 409
    t.request.unlink()  # the trainer took it
    assert profiles.request("3").id == "p2"


def test_request_not_taken_in_time_is_withdrawn(profiles: Any, wall: Any) -> None:
    t = profiles.request("3")
    os.utime(t.request, (wall.now, wall.now))
    wall.now += 59
    profiles.housekeep()
    assert t.request.exists()
    wall.now += 2
    profiles.housekeep()
    assert not t.request.exists()
    assert [(p.id, p.state) for p in profiles.listing()] == [("p1", "expired")]
    assert profiles.outcomes["expired"] == 1


def capture(root: Any, pid: str, size: int, mtime: float) -> None:
    d = root / PROFILES_DIR / pid
    d.mkdir(parents=True)
    (d / "trace.json").write_bytes(b"x" * size)
    os.utime(d, (mtime, mtime))


def test_oldest_captures_are_pruned_beyond_the_byte_budget(profiles: Any, tmp_path: Path) -> None:
    capture(tmp_path, "old", 600, 100.0)
    capture(tmp_path, "mid", 300, 200.0)
    capture(tmp_path, "new", 300, 300.0)
    profiles.housekeep()
    listed = {p.id: p for p in profiles.listing()}
    assert set(listed) == {"mid", "new"}
    assert listed["new"].files == ("trace.json",) and listed["new"].bytes == 300
    assert profiles.outcomes["pruned"] == 1


def test_files_are_served_only_from_inside_a_capture(profiles: Any, tmp_path: Path) -> None:
    capture(tmp_path, "p9", 10, 100.0)
    (tmp_path / "secret").write_text("no")
    assert profiles.file("p9", "trace.json").read_bytes() == b"x" * 10
    for pid, name in [
        ("p9", "../../secret"),
        ("..", "secret"),
        ("p9", "missing.json"),
        ("nope", "trace.json"),
    ]:
        with pytest.raises(ProfileError) as e:
            profiles.file(pid, name)
        assert e.value.status == 404


def test_a_capture_in_progress_is_not_yet_captured(profiles: Any, tmp_path: Path) -> None:
    d = tmp_path / PROFILES_DIR / "p5"
    d.mkdir(parents=True)
    (d / ".trace.json.tmp").write_text("{")
    assert [(p.id, p.state, p.files) for p in profiles.listing()] == [("p5", "capturing", ())]
    (d / ".trace.json.tmp").replace(d / "trace.json")
    assert [(p.id, p.state, p.files) for p in profiles.listing()] == [("p5", "captured", ("trace.json",))]
