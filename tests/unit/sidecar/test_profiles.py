"""Profile requests: the request file per the channel contract, bounds, expiry, pruning, safe downloads."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
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


@pytest.mark.parametrize(
    "steps", [None, "", "ten", "0", "-3", "21", "2.5", "\u0661\u0662", " 12 ", "+12", "1_2", "\u00b2", "9" * 5000]
)
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


def read(profiles: Any, pid: str, name: str) -> bytes:
    f, size = profiles.open_file(pid, name)
    with f:
        data: bytes = f.read()
    assert len(data) == size
    return data


def refused(profiles: Any, pid: str, name: str) -> None:
    with pytest.raises(ProfileError) as e:
        profiles.open_file(pid, name)
    assert e.value.status == 404


def test_files_are_served_only_from_inside_a_capture(profiles: Any, tmp_path: Path) -> None:
    capture(tmp_path, "p9", 10, 100.0)
    (tmp_path / PROFILES_DIR / "p9" / "sub").mkdir()
    (tmp_path / PROFILES_DIR / "p9" / "sub" / "a.pt.trace.json").write_text("{}")
    (tmp_path / "secret").write_text("no")
    assert read(profiles, "p9", "trace.json") == b"x" * 10
    assert read(profiles, "p9", "sub/a.pt.trace.json") == b"{}"
    for pid, name in [
        ("p9", "../../secret"),
        ("p9", "sub/../../../secret"),
        ("p9", "/etc/hostname"),
        ("p9", "sub//a.pt.trace.json"),
        ("p9", "./trace.json"),
        ("p9", ""),
        ("p9", "sub"),
        ("..", "secret"),
        ("p9", "missing.json"),
        ("nope", "trace.json"),
    ]:
        refused(profiles, pid, name)


def test_symlinks_never_lead_out_of_the_profiles_root(profiles: Any, tmp_path: Path) -> None:
    """The hostile trainer: links planted in the shared channel folder are refused wherever they are."""
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "hostname").write_text("host file")
    root = tmp_path / PROFILES_DIR
    capture(tmp_path, "p1", 10, 100.0)
    (root / "x").symlink_to(outside)  # profiles/x -> a folder outside (the reproduced finding)
    refused(profiles, "x", "hostname")
    (root / "p1" / "link.json").symlink_to(outside / "hostname")  # a file link inside a capture
    refused(profiles, "p1", "link.json")
    (root / "p1" / "dir").symlink_to(outside)  # a folder link inside a capture
    refused(profiles, "p1", "dir/hostname")
    (root / "p1" / "inner.json").symlink_to(root / "p1" / "trace.json")  # even one that stays inside
    refused(profiles, "p1", "inner.json")
    os.mkfifo(root / "p1" / "fifo")  # not a plain file: refused without blocking
    refused(profiles, "p1", "fifo")
    listed = {p.id: p for p in profiles.listing()}
    assert set(listed) == {"p1"} and listed["p1"].files == ("trace.json",)  # links neither listed nor counted
    assert listed["p1"].bytes == 10


def test_a_symlinked_profiles_root_is_refused(tmp_path: Path, wall: Any) -> None:
    outside = tmp_path / "elsewhere"
    (outside / "p1").mkdir(parents=True)
    (outside / "p1" / "trace.json").write_text("{}")
    stats = tmp_path / "stats"
    stats.mkdir()
    (stats / PROFILES_DIR).symlink_to(outside)
    p = ProfileRequests(stats, max_steps=5, timeout_s=60, max_bytes=1000, clock=wall, new_id=lambda: "p2")
    refused(p, "p1", "trace.json")
    assert p.listing() == []


def test_a_capture_in_progress_is_not_yet_captured(profiles: Any, tmp_path: Path) -> None:
    d = tmp_path / PROFILES_DIR / "p5"
    d.mkdir(parents=True)
    (d / ".trace.json.tmp").write_text("{")
    assert [(p.id, p.state, p.files) for p in profiles.listing()] == [("p5", "capturing", ())]
    (d / ".trace.json.tmp").replace(d / "trace.json")
    assert [(p.id, p.state, p.files) for p in profiles.listing()] == [("p5", "captured", ("trace.json",))]


def test_a_symlinked_requests_folder_is_never_written_nor_pruned_through(tmp_path: Path, wall: Any) -> None:
    # #33: requests/ replaced by a link made the sidecar write its request into the link's target
    # and delete old profile-*.json files there
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "profile-keep.json").write_text("theirs")
    os.utime(outside / "profile-keep.json", (0, 0))
    stats = tmp_path / "stats"
    stats.mkdir()
    (stats / REQUESTS_DIR).symlink_to(outside)
    p = ProfileRequests(stats, max_steps=5, timeout_s=60, max_bytes=0, clock=wall, new_id=lambda: "p2")
    with pytest.raises(ProfileError, match="symlink") as e:
        p.request("3")
    assert e.value.status == 503
    p.housekeep()
    assert sorted(f.name for f in outside.iterdir()) == ["profile-keep.json"]
    assert (outside / "profile-keep.json").read_text() == "theirs"


def test_a_capture_nested_deeper_than_the_stack_neither_breaks_listing_nor_housekeeping(
    profiles: Any, tmp_path: Path
) -> None:
    # os.walk recursed once per level: RecursionError out of GET /profiles and every housekeeping round
    capture(tmp_path, "p1", 10, 100.0)
    fd = os.open(tmp_path / PROFILES_DIR / "p1", os.O_RDONLY)
    try:
        for _ in range(1100):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    try:
        listed = {p.id: p for p in profiles.listing()}
        assert listed["p1"].files == ("trace.json",)
        profiles.housekeep()
    finally:  # pytest's own tmp-path cleanup recurses per level too: it failed on this tree and left it behind
        subprocess.run(["rm", "-rf", str(tmp_path / PROFILES_DIR / "p1" / "d")], check=True, timeout=120)


def test_listing_looks_at_a_bounded_number_of_entries_in_all(
    profiles: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a trainer making folder after folder must not make each listing (and housekeeping round) longer
    from statictrain_sidecar import profiles as profiles_module  # noqa: PLC0415

    monkeypatch.setattr(profiles_module, "MAX_ENTRIES", 8)
    for i in range(10):
        capture(tmp_path, f"c{i}", 1, 100.0 + i)
        (tmp_path / PROFILES_DIR / f"c{i}" / "more.json").write_text("{}")
    listed = profiles.listing()
    assert 1 <= len(listed) <= 3  # each capture costs its folder and its two files
    assert all(p.files == ("more.json", "trace.json") for p in listed[:-1])
