"""Property tests of the checkpoint directory (#33): generated hostile contents, then resume/save cycles.

Each example fills a real checkpoint directory with checkpoints written here from the documented format
(trainer/README.md: ``step-N.pt`` = torch.save of the state with its format and step, ``step-N.json`` =
its size and SHA-256), intact or damaged, checkpoints of another model, checkpoints of format 1, hostile
metadata, garbage, links to a sibling directory, directories, FIFOs, huge sparse files and names of any
bytes. The oracle of which one is resumed from is computed from that scenario, not by the code. What
always holds: no exception escapes but the documented UserError (some verify, none fits); the newest
good checkpoint is the one resumed from, and after each save the one just written; the step never goes
back; nothing outside the directory is written or deleted, and nothing in it that the trainer did not
write is changed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tempfile
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import torch
from hypothesis import event, given
from hypothesis import strategies as st
from statictrain_trainer import checkpoint, resume
from statictrain_trainer.exitcodes import UserError
from torch import nn

STEPS = [1, 2, 3, 5, 8, 13, 99_999_999, 10**12 - 1]
PAYLOADS = ["intact", "truncated", "flipped", "legacy", "other_model", "garbage", "link", "dir", "fifo", "huge"]
METADATA = ["matching", "link", "dir", "fifo"]
KEEP = 2


def _model() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    return model, torch.optim.AdamW(model.parameters())


@cache
def _trained_state(width: int) -> dict[str, object]:
    """model + optimizer state of a Linear(4, width) after one AdamW step (width 2 fits _model)."""
    torch.manual_seed(1)
    model = nn.Linear(4, width)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 4)).sum().backward()
    opt.step()
    return {"model": model.state_dict(), "optimizer": opt.state_dict()}


def _torch_bytes(obj: object) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


@cache
def _payload(step: int, kind: str) -> bytes:
    """The bytes of a payload of the documented format (or a damaged one) for ``step``."""
    if kind == "legacy":
        return _torch_bytes({"format": 1, "step": step, **_trained_state(2)})
    if kind == "other_model":
        return _torch_bytes({"format": 2, "step": step, **_trained_state(3)})
    whole = _torch_bytes({"format": 2, "step": step, **_trained_state(2)})
    if kind == "truncated":
        return whole[: len(whole) // 2]
    if kind == "flipped":
        return whole[:100] + bytes([whole[100] ^ 0x40]) + whole[101:]
    return whole


def _metadata(payload: bytes, step: int) -> bytes:
    return json.dumps(
        {"format": 2, "step": step, "bytes": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}
    ).encode()


HOSTILE_NUMBER = st.one_of(
    st.integers(-(10**40), 10**40), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5), st.none()
)
HOSTILE_METADATA = st.one_of(
    st.binary(max_size=200),
    st.fixed_dictionaries(
        {"format": st.one_of(st.just(2), HOSTILE_NUMBER), "step": HOSTILE_NUMBER, "bytes": HOSTILE_NUMBER,
         "sha256": st.one_of(st.just("0" * 64), st.text(max_size=70))},
    ).map(lambda d: json.dumps(d).encode()),
)  # fmt: skip
NAME = st.one_of(
    st.binary(min_size=1, max_size=40).map(lambda b: b"x" + b.replace(b"/", b"_").replace(b"\0", b"_")),
    st.from_regex(r"\.?(tmp-)?step-[0-9]{7,14}\.(pt|json)(-[0-9a-f]{1,8})?", fullmatch=True).map(str.encode),
    st.sampled_from(
        [b"step-\xd9\xa0\xd9\xa0\xd9\xa0\xd9\xa0\xd9\xa0\xd9\xa0\xd9\xa0\xd9\xa1.pt", b"step-000000010.pt"]
    ),
)
EXTRA = st.tuples(
    NAME, st.sampled_from(["file", "link_file", "link_dir", "dangling", "dir", "fifo"]), st.binary(max_size=64)
)


@dataclass
class Scenario:
    pairs: dict[int, tuple[str | None, str | bytes | None]]
    """step -> (payload kind or None, metadata kind, hostile metadata bytes or None)"""
    extras: list[tuple[bytes, str, bytes]]


SCENARIO = st.builds(
    Scenario,
    pairs=st.dictionaries(
        st.sampled_from(STEPS),
        st.one_of(
            st.sampled_from([("intact", "matching"), ("legacy", None), ("other_model", "matching")]),
            st.tuples(
                st.one_of(st.none(), st.sampled_from(PAYLOADS)),
                st.one_of(st.none(), st.sampled_from(METADATA), HOSTILE_METADATA),
            ),
        ),
        max_size=5,
    ),
    extras=st.lists(EXTRA, max_size=6),
)


def _place(directory: Path, name: str | bytes, kind: str, data: bytes, outside: Path) -> None:
    path = os.path.join(os.fsencode(directory), os.fsencode(name))
    if os.path.lexists(path):
        return  # the first of two generated entries with one name stands
    if kind == "file":
        with open(path, "wb") as f:
            f.write(data)
    elif kind == "huge":
        with open(path, "wb") as f:
            f.truncate(3 << 30)  # sparse: no disk used
    elif kind in ("link", "link_file"):
        os.symlink(outside / "victim.pt", path)
    elif kind == "link_dir":
        os.symlink(outside, path)
    elif kind == "dangling":
        os.symlink(outside / "absent", path)
    elif kind == "dir":
        os.mkdir(path)
    elif kind == "fifo":
        os.mkfifo(path)


def _build(ckpt: Path, outside: Path, scenario: Scenario) -> tuple[int | None, bool]:
    """Fill the directory; return the oracle: the newest good step (None if none) and whether some
    checkpoint that verifies but does not fit the model comes before it (or instead of it)."""
    verdicts: dict[int, str] = {}
    for step, (payload, meta) in scenario.pairs.items():
        pt, js = checkpoint.payload_name(step), checkpoint.metadata_name(step)
        if payload in ("link", "dir", "fifo", "huge"):
            _place(ckpt, pt, payload, b"", outside)
        elif payload is not None:
            _place(ckpt, pt, "file", _payload(step, payload), outside)
        if isinstance(meta, bytes):
            _place(ckpt, js, "file", meta, outside)
        elif meta == "matching" and payload is not None:
            original = "intact" if payload in ("truncated", "flipped", "link", "dir", "fifo", "huge") else payload
            _place(ckpt, js, "file", _metadata(_payload(step, original), step), outside)
        elif meta in ("link", "dir", "fifo"):
            _place(ckpt, js, meta, b"", outside)
        meta_is_file = isinstance(meta, bytes) or (meta == "matching" and payload is not None)
        if (payload == "intact" and meta == "matching") or (payload == "legacy" and not meta_is_file):
            verdicts[step] = "good"
        elif payload == "other_model" and meta == "matching":
            verdicts[step] = "misfit"
    pair_names = {
        os.fsencode(n(s)) for s in scenario.pairs for n in (checkpoint.payload_name, checkpoint.metadata_name)
    }
    for name, kind, data in scenario.extras:
        if name not in pair_names:  # the pairs' names are the oracle's
            _place(ckpt, name, kind, data, outside)
    newest_good = max((s for s, v in verdicts.items() if v == "good"), default=None)
    misfit_first = any(v == "misfit" and (newest_good is None or s > newest_good) for s, v in verdicts.items())
    return newest_good, misfit_first


def _snapshot(root: Path) -> dict[bytes, object]:
    """Every entry under root: bytes of plain files, targets of links, 'dir', 'fifo'."""
    out: dict[bytes, object] = {}
    for dirpath, dirnames, filenames in os.walk(os.fsencode(root)):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st_ = os.lstat(p)
            if os.path.islink(p):
                out[p] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[p] = "dir"
            elif os.path.isfile(p):
                out[p] = (
                    ("file", st_.st_size) if st_.st_size > (1 << 20) else ("file", Path(os.fsdecode(p)).read_bytes())
                )
            else:
                out[p] = "other"
    return out


def _own_name(name: bytes) -> bool:
    """A name the trainer writes (canonical checkpoint names and their temporary names), from the README."""
    text = os.fsdecode(name)
    final = re.fullmatch(r"step-([0-9]{8,12})\.(pt|json)", text, re.ASCII)
    temp = re.fullmatch(r"\.tmp-step-[0-9]{8,12}\.(pt|json)-[0-9a-f]+", text, re.ASCII)
    return bool(temp or (final and text.startswith(f"step-{int(final.group(1)):08d}.")))


def _foreign(snapshot: dict[bytes, object]) -> dict[bytes, object]:
    """The entries the trainer did not write: all but plain files under its own names."""
    return {
        p: v for p, v in snapshot.items()
        if not (_own_name(os.path.basename(p)) and isinstance(v, tuple) and v[0] == "file")
    }  # fmt: skip


def _taken(path: Path) -> bool:
    """Something that is not a plain file holds this name (a link, directory, FIFO)."""
    return os.path.lexists(path) and (path.is_symlink() or not path.is_file())


def _resume(ckpt: Path) -> int | None:
    model, opt = _model()
    found = resume.resume(ckpt, model, opt, None, "cpu")
    return None if found is None else found.step


@pytest.mark.timeout(300)
@given(SCENARIO)
def test_hostile_checkpoint_directories_resume_from_the_newest_good_and_touch_nothing_else(scenario: Scenario) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        ckpt, outside = base / "ckpt", base / "outside"
        ckpt.mkdir()
        outside.mkdir()
        (outside / "victim.pt").write_bytes(_payload(5, "intact"))
        (outside / "victim.json").write_bytes(_metadata(_payload(5, "intact"), 5))
        newest_good, misfit_first = _build(ckpt, outside, scenario)
        outside_before = _snapshot(outside)
        foreign_before = _foreign(_snapshot(ckpt))

        event(f"newest good: {'none' if newest_good is None else 'some'}; a misfit before it: {misfit_first}")
        if misfit_first and newest_good is None:
            with pytest.raises(UserError, match="fits this model"):
                _resume(ckpt)
            return  # the job ends with exit 42; nothing was written
        resumed = _resume(ckpt)
        assert resumed == newest_good
        last_good = resumed
        for k in (1, 2, 3):
            step = (resumed or 0) + k
            model, opt = _model()
            names = (checkpoint.payload_name(step), checkpoint.metadata_name(step))
            blocked = step > checkpoint.MAX_STEP or any(_taken(ckpt / n) for n in names)
            written = checkpoint.save(ckpt, step, {"model": model.state_dict(), "optimizer": opt.state_dict()}, KEEP)
            assert (written is None) == blocked
            event(f"save blocked: {blocked}")
            if written is not None:
                last_good = step
            assert _resume(ckpt) == last_good  # the newest good one, never an older one
        assert _snapshot(outside) == outside_before
        assert _foreign(_snapshot(ckpt)) == foreign_before


def test_files_appearing_and_disappearing_during_saves_and_resumes(tmp_path: Path) -> None:
    """A second thread creates and deletes files with checkpoint names (garbage, below and above the
    trainer's steps, never its own) while the trainer saves and resumes: no exception, always the newest
    it wrote."""
    stop = threading.Event()
    errors: list[OSError] = []

    def churn() -> None:
        i = 0
        while not stop.is_set():
            step = [2, 500, 10**6][i % 3] + i % 7
            for name in (checkpoint.payload_name(step), checkpoint.metadata_name(step)):
                try:
                    (tmp_path / name).write_bytes(b"garbage" * (i % 5))
                    (tmp_path / name).unlink()
                except FileNotFoundError:
                    pass  # pruned by the trainer first
                except OSError as e:
                    errors.append(e)
            i += 1

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        for step in range(100, 130):
            model, opt = _model()
            assert checkpoint.save(tmp_path, step, {"model": model.state_dict(), "optimizer": opt.state_dict()}, KEEP)
            assert _resume(tmp_path) == step
    finally:
        stop.set()
        thread.join()
    assert errors == []
