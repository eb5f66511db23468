"""Property tests of the compile-cache directories (#33): generated hostile contents, then load/save.

Each example builds a real own cache root, a real read-only shared root and a sibling directory, and
fills the roots with hostile entries at the names the cache uses (the root itself, the workload
folder, the artifact, its metadata, the autotune record): links to the sibling, plain files where
folders go, directories and FIFOs where files go, huge sparse files, garbage, and names of any bytes.
The oracle (which artifact is read, whether a save lands) is computed from the scenario. What always
holds: no exception escapes; a load reads the own artifact when its path is plain, else the shared one,
and reports a miss only when neither exists; a save lands exactly when nothing on its path is a link or
non-plain file, and a load afterwards reads it; nothing outside the own root is written (the shared root
and the sibling are unchanged), nor anything in it that the cache did not write.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st
from statictrain_trainer.autotune import Candidate, FailureRecord, Outcome, skip_reason
from statictrain_trainer.compile_cache import MAX_ARTIFACT_BYTES, CompileCache, make_key

KEY = make_key("fingerprint", {"mode": "default"}, "2.11.0", "cpu")
ARTIFACT, META = f"{KEY.environment}.bin", f"{KEY.environment}.json"
PLACES = ["none", "root", "folder", "artifact", "meta", "record"]
DIR_HOSTILE = ["absent", "link_dir", "bytes", "fifo"]
FILE_HOSTILE = ["absent", "bytes", "link_file", "link_dir", "dir", "fifo", "huge"]


@dataclass
class Root:
    at: str
    """where on the cache's paths the hostile entry is (``none``: nowhere)"""
    kind: str
    """what it is (DIR_HOSTILE for the root and the folder, FILE_HOSTILE for the files)"""
    artifact: bool
    """an artifact (garbage) is there when the hostile entry is elsewhere"""
    data: bytes
    extras: list[tuple[bytes, bytes]]
    """names of any bytes in the workload folder, with their contents"""


PLACE = st.sampled_from(PLACES).flatmap(
    lambda at: st.tuples(st.just(at), st.sampled_from(DIR_HOSTILE if at in ("root", "folder") else FILE_HOSTILE))
)
ROOT = st.builds(
    lambda place, artifact, data, extras: Root(place[0], place[1], artifact, data, extras),
    PLACE,
    st.booleans(),
    st.binary(max_size=64),
    st.lists(
        st.tuples(
            st.one_of(
                st.binary(min_size=1, max_size=40).map(lambda b: b"x" + b.replace(b"/", b"_").replace(b"\0", b"_")),
                st.from_regex(r"(\.tmp-)?torch-[^/\x00]{0,12}\.(bin|json)", fullmatch=True).map(os.fsencode),
            ),
            st.binary(max_size=16),
        ),
        max_size=4,
    ),
)
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-(10**400), 10**400), st.floats(), st.text(max_size=8))
RECORD_JSON = st.one_of(
    st.recursive(
        SCALAR,
        lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=12), inner, max_size=3)),
        max_leaves=12,
    ),
    st.fixed_dictionaries(
        {
            "default@8": st.fixed_dictionaries(
                {"error": st.one_of(st.just("timed out after 5 s"), SCALAR), "limit_s": SCALAR}
            )
        }
    ),
)


def _make(path: Path, kind: str, data: bytes, outside: Path) -> None:
    if kind == "bytes":
        path.write_bytes(data)
    elif kind == "huge":
        with open(path, "wb") as f:
            f.truncate(MAX_ARTIFACT_BYTES + 1)  # sparse: no disk used
    elif kind == "link_file":
        path.symlink_to(outside / "victim.bin")
    elif kind == "link_dir":
        path.symlink_to(outside)
    elif kind == "dir":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)


def _build(root: Path, spec: Root, outside: Path, record: object) -> None:
    """The root with its folder, artifact, metadata and record, the hostile entry at ``spec.at``."""

    def place(at: str, path: Path, clean: str) -> bool:
        _make(path, spec.kind if spec.at == at else clean, spec.data, outside)
        return spec.at != at or spec.kind == "dir"

    if not place("root", root, "dir") or not place("folder", root / KEY.workload, "dir"):
        return
    place("artifact", root / KEY.workload / ARTIFACT, "bytes" if spec.artifact else "absent")
    place("meta", root / KEY.workload / META, "bytes")
    if spec.at == "record":
        _make(root / FailureRecord.FILE, spec.kind, spec.data, outside)
    else:
        (root / FailureRecord.FILE).write_text(json.dumps({"k": record}))
    for name, data in spec.extras:
        path = os.path.join(os.fsencode(root / KEY.workload), name)
        if not os.path.lexists(path):
            with open(path, "wb") as f:
                f.write(data)


def _reads(spec: Root) -> str:
    """What a load finds under this root: ``plain`` (an artifact to read), ``refused`` or ``missing``."""
    if spec.at in ("root", "folder"):
        return "missing" if spec.kind == "absent" else "refused"
    if spec.at == "artifact":
        return {"absent": "missing", "bytes": "plain"}.get(spec.kind, "refused")
    return "plain" if spec.artifact else "missing"


def _save_lands(spec: Root) -> bool:
    if spec.at in ("root", "folder"):
        return spec.kind == "absent"
    return spec.at not in ("artifact", "meta") or spec.kind in ("absent", "bytes", "huge")


def _snapshot(root: Path) -> dict[bytes, object]:
    out: dict[bytes, object] = {}
    for dirpath, dirnames, filenames in os.walk(os.fsencode(root)):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                out[p] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[p] = "dir"
            elif os.path.isfile(p):
                size = os.path.getsize(p)
                out[p] = ("file", size if size > (1 << 20) else Path(os.fsdecode(p)).read_bytes())
            else:
                out[p] = "other"
    return out


def _foreign(root: Path, snapshot: dict[bytes, object]) -> dict[bytes, object]:
    """Entries the cache did not write: all but plain files under the names it writes, and its folder."""
    own = {os.fsencode(root / KEY.workload / n) for n in (ARTIFACT, META)} | {os.fsencode(root / FailureRecord.FILE)}
    temp = re.compile(rb"\.tmp-(" + re.escape(os.fsencode(ARTIFACT)) + b"|" + re.escape(os.fsencode(META)) + b"|"
                      + re.escape(FailureRecord.FILE.encode()) + rb")-[0-9a-f]+")  # fmt: skip
    folder = os.fsencode(root / KEY.workload)
    return {
        p: v for p, v in snapshot.items()
        if not ((p in own or temp.fullmatch(os.path.basename(p))) and isinstance(v, tuple) and v[0] == "file")
        and not (p == folder and v == "dir")
    }  # fmt: skip


@pytest.mark.timeout(300)
@given(ROOT, st.one_of(st.none(), ROOT), st.binary(max_size=64), RECORD_JSON)
@example(Root("artifact", "link_file", True, b"", []), None, b"compiled", None)
@example(Root("meta", "link_dir", True, b"", []), None, b"compiled", None)
@example(Root("folder", "link_dir", True, b"", []), None, b"compiled", None)
@example(Root("record", "link_file", True, b"", []), None, b"compiled", None)
@example(Root("root", "absent", True, b"", []), Root("artifact", "link_file", True, b"", []), b"compiled", None)
def test_hostile_cache_directories_are_read_and_written_only_where_they_should(
    own: Root, shared: Root | None, compiled: bytes, record: object
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        outside = base / "outside"
        outside.mkdir()
        (outside / "victim.bin").write_bytes(b"not the cache's")
        own_root, shared_root = base / "cache", base / "shared"
        _build(own_root, own, outside, record)
        if shared is not None:
            _build(shared_root, shared, outside, record)
        untouched = {p: v for p, v in (_snapshot(outside) | _snapshot(shared_root)).items()}
        foreign = _foreign(own_root, _snapshot(own_root))
        cache = CompileCache(own_root, KEY, shared=shared_root if shared is not None else None)

        loaded = cache.load()
        found = _reads(own)
        where = cache.artifact_path
        if found == "missing" and shared is not None:
            found, where = _reads(shared), shared_root / KEY.workload / ARTIFACT
        event(f"load: {found}")
        if found == "missing":
            assert loaded.status in ("miss_empty", "miss_other_environment"), loaded
        else:
            assert str(where) in loaded.reason, loaded
            if found == "plain":  # read (what it holds is garbage or nothing: it may load or not)
                assert loaded.status in ("hit", "load_failed", "no_artifacts") and "is not read" not in loaded.reason
            else:  # refused before reading: a link, a non-plain file or too large
                assert loaded.status == "load_failed" and "is not read" in loaded.reason, loaded

        with mock.patch("torch.compiler.save_cache_artifacts", return_value=(compiled, None)):
            saved = cache.save({"workload": "w"})
        event(f"save lands: {_save_lands(own)}")
        assert (saved is not None) == _save_lands(own)
        if saved is not None:
            assert saved.read_bytes() == compiled
            assert str(saved) in cache.load().reason  # read back from the own root

        records = FailureRecord(own_root, "k")
        reason = skip_reason(records.known(), Candidate("default", 8), 10.0)
        assert reason is None or reason.startswith("skipped: ")
        records.add(Outcome(Candidate("default", 8), ok=False, error="crashed (exit 1)"))

        assert {p: v for p, v in (_snapshot(outside) | _snapshot(shared_root)).items()} == untouched
        assert _foreign(own_root, _snapshot(own_root)) == foreign
