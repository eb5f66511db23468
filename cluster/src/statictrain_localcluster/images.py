"""Container images for the real node, built daemonless with buildah; no registry.

- a Debian + Python base made offline from Debian packages (debootstrap, this
  machine's own Debian release and mirror), passed to the Dockerfile as
  ``PYTHON_IMAGE`` - the same Dockerfile builds FROM a public Python image elsewhere;
- a busybox image (Debian's busybox-static) that serves as the pod sandbox
  ("pause") and as the volume provisioner's helper;
- the Dockerfile's targets (trainer, sidecar, ...), tagged by a hash of what they
  are built from, so an unchanged tree is never rebuilt.

buildah keeps its images and layer cache outside the repository (``<cache>/buildah``):
the trainer's torch layer is built once per torch version and reused. Images
go to a node's containerd through a pipe (buildah push | ctr import).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statictrain_localcluster import realnode
from statictrain_localcluster.paths import REPO_FILES, cache_root

__all__ = ["Build", "ImageError", "base_image", "build_target", "busybox_image", "ensure_base", "ensure_busybox",
           "image_mb", "load", "node_images", "store_key"]

REGISTRY = "statictrain.local"
BASE_PACKAGES = ("python3", "python3-venv", "python3-dev", "ca-certificates", "passwd")
"""Debian packages of the base image (python3-dev: headers for triton and inductor's C++ builds)."""
_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
HOST_BUILD_FILES = ("/etc/pip.conf", "/etc/ssl/certs/ca-certificates.crt")
KEEP_BUILDS = 3
"""Builds of one target kept (several worktrees may build different sources at once)."""


class ImageError(RuntimeError):
    """An image could not be built or loaded; the message says why."""


@dataclass(frozen=True)
class Build:
    """One image and how long making it took (0 when it was already there)."""

    image: str
    seconds: float
    built: bool


def _storage() -> list[str]:
    """buildah's store: ``$STATICTRAIN_BUILDAH_ROOT`` (benchmarks build cold there) or ``<cache>/buildah``."""
    root = Path(os.environ.get("STATICTRAIN_BUILDAH_ROOT") or cache_root() / "buildah")
    return ["--root", str(root / "storage"), "--runroot", str(root / "run"), "--storage-driver", "overlay"]


def buildah(*args: str, log: Any = None, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["buildah", *_storage(), *args], stdout=subprocess.PIPE,
                          stderr=log if log is not None else subprocess.PIPE, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        detail = (proc.stderr or "").strip()[-2000:]
        raise ImageError(f"buildah {' '.join(args[:3])} ... failed ({proc.returncode}): {detail}")
    return proc


def exists(image: str) -> bool:
    proc = subprocess.run(["buildah", *_storage(), "inspect", "--type", "image", image], capture_output=True,
                          check=False)
    return proc.returncode == 0


def _debian() -> tuple[str, str]:
    """(release codename, mirror URI) of this machine's Debian, from its apt sources."""
    release = ""
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            release = line.split("=", 1)[1].strip('"')
    mirror = ""
    if _SOURCES.exists():
        m = re.search(r"^URIs:\s*(\S+)", _SOURCES.read_text(), re.M)
        mirror = m.group(1) if m else ""
    legacy = Path("/etc/apt/sources.list")
    if not mirror and legacy.exists():
        m = re.search(r"^deb\s+(\S+)\s+\S+\s+main", legacy.read_text(), re.M)
        mirror = m.group(1) if m else ""
    if not release or not mirror:
        raise ImageError("cannot tell this machine's Debian release and mirror from /etc/os-release and apt's sources")
    return release, mirror


def base_image() -> str:
    release, _ = _debian()
    digest = hashlib.sha256(" ".join(BASE_PACKAGES).encode()).hexdigest()[:8]
    return f"{REGISTRY}/debian-python:{release}-{digest}"


def busybox_image() -> str:
    version = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "busybox-static"], capture_output=True,
                             text=True, check=False).stdout.strip()
    return f"{REGISTRY}/busybox:{re.sub(r'[^A-Za-z0-9_.-]', '_', version) or 'local'}"


def ensure_base(log: Any = None) -> Build:
    """Debian (minbase) with Python from Debian packages, made with debootstrap; once per package list."""
    image = base_image()
    if exists(image):
        return Build(image, 0.0, False)
    t0 = time.monotonic()
    release, mirror = _debian()
    with tempfile.TemporaryDirectory(dir=cache_root()) as tmp:
        rootfs = Path(tmp, "rootfs")
        proc = subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}",
                               release, str(rootfs), mirror], stdout=log, stderr=log, check=False)
        if proc.returncode != 0:
            raise ImageError(f"debootstrap {release} from {mirror} failed ({proc.returncode})")
        shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
        (rootfs / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
        (rootfs / "usr/local/bin/python").symlink_to("/usr/bin/python3")
        tar = Path(tmp, "rootfs.tar")
        subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(tar), "."], check=True)
        _commit_rootfs(tar, image, ["--env", "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
                                    "--env", "LANG=C.UTF-8", "--cmd", "python3"])
    return Build(image, time.monotonic() - t0, True)


def ensure_busybox() -> Build:
    """busybox-static as /bin/busybox with applet links; its entrypoint sleeps forever (the pod sandbox)."""
    image = busybox_image()
    if exists(image):
        return Build(image, 0.0, False)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(dir=cache_root()) as tmp:
        root = Path(tmp, "rootfs")
        (root / "bin").mkdir(parents=True)
        (root / "tmp").mkdir(mode=0o1777)
        shutil.copy2("/bin/busybox", root / "bin/busybox")
        for applet in ("sh", "sleep", "mkdir", "rm", "ls", "cat", "echo", "chmod"):
            (root / "bin" / applet).symlink_to("busybox")
        tar = Path(tmp, "rootfs.tar")
        subprocess.run(["tar", "-C", str(root), "--numeric-owner", "--owner=0", "--group=0", "-cf", str(tar), "."],
                       check=True)
        _commit_rootfs(tar, image, ["--entrypoint", '["/bin/sleep","2147483647"]'])
    return Build(image, time.monotonic() - t0, True)


def _commit_rootfs(tar: Path, image: str, config: list[str]) -> None:
    ctr = buildah("from", "scratch").stdout.strip()
    try:
        buildah("add", ctr, str(tar), "/")
        buildah("config", *config, ctr)
        buildah("commit", "--rm", ctr, image)
    except BaseException:
        subprocess.run(["buildah", *_storage(), "rm", ctr], capture_output=True, check=False)
        raise


def context_hash(target: str, repo: Path = REPO_FILES) -> str:
    """A hash of everything the target is built from: the Dockerfile and the sources it copies."""
    h = hashlib.sha256()
    for name in ("Dockerfile", ".dockerignore"):
        h.update((repo / name).read_bytes())
    for path in sorted(_files(repo, ("core", target))):
        h.update(str(path.relative_to(repo)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def _files(repo: Path, folders: Iterable[str]) -> Iterable[Path]:
    skip = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "build", "dist"}
    for folder in folders:
        for path in (repo / folder).rglob("*"):
            rel = path.relative_to(repo).parts
            if path.is_file() and not any(p in skip or p.endswith(".egg-info") for p in rel):
                yield path


def build_target(target: str, base: str, log: Any = None, repo: Path = REPO_FILES) -> Build:
    """One target of the repository's Dockerfile on ``base``; skipped when the same sources were built."""
    image = f"{REGISTRY}/{target}:{context_hash(target, repo)}"
    if exists(image):
        return Build(image, 0.0, False)
    t0 = time.monotonic()
    # RUN steps reach PyPI the way this machine does: its pip configuration and CA bundle
    # (mounted for the build only, never part of an image).
    host = [f"--volume={p}:{p}:ro" for p in HOST_BUILD_FILES if Path(p).exists()]
    buildah("bud", "--layers", "--network", "host", *host, "--target", target,
            "--build-arg", f"PYTHON_IMAGE={base}", "-t", image, "-f", str(repo / "Dockerfile"), str(repo), log=log)
    seconds = time.monotonic() - t0
    _prune(f"{REGISTRY}/{target}:")
    return Build(image, seconds, True)


def _prune(prefix: str, keep: int = KEEP_BUILDS) -> None:
    """Remove all but the newest ``keep`` images named ``prefix...`` (shared layers stay)."""
    found = [(i["created"], n) for i in json.loads(buildah("images", "--json").stdout or "[]")
             for n in i.get("names") or [] if n.startswith(prefix)]
    for _, name in sorted(found)[:-keep]:
        subprocess.run(["buildah", *_storage(), "rmi", name], capture_output=True, check=False)


NODE_TARGETS = ("trainer", "sidecar")


def node_images(log: Any = None) -> dict[str, str]:
    """Everything a real node starts with, built or found: busybox and the Dockerfile's
    trainer and sidecar on the offline base."""
    base = ensure_base(log).image
    out = {"busybox": ensure_busybox().image}
    for target in NODE_TARGETS:
        out[target] = build_target(target, base, log).image
    return out


def image_id(image: str) -> str:
    return buildah("inspect", "--type", "image", "--format", "{{.FromImageID}}", image).stdout.strip()


def store_key(built: dict[str, str]) -> str:
    """Key of the containerd image store holding exactly these images."""
    ids = sorted(f"{name}={image_id(name)}" for name in built.values())
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]


def image_mb(image: str) -> float:
    """Size of the image, uncompressed, in MB (10^6 bytes), as buildah reports it (3 significant digits)."""
    size = json.loads(buildah("images", "--json", image).stdout)[0]["size"]  # e.g. "6.36 GB"
    number, unit = size.split()
    return round(float(number) * {"B": 1e-6, "kB": 1e-3, "KB": 1e-3, "MB": 1.0, "GB": 1e3, "TB": 1e6}[unit], 1)


def load(ctr: Any, image: str) -> float:
    """Import ``image`` into a node's containerd unless it is there; seconds it took (0 when present).

    Streamed: buildah writes a docker-archive into a pipe that ``ctr images import``
    reads, so no multi-GB archive is kept on disk (the trainer's torch layer is ~5 GB)."""
    if image in ctr("images", "ls", "-q", check=False).stdout.split():
        return 0.0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(dir=cache_root()) as tmp:
        fifo = Path(tmp, "image.tar")
        os.mkfifo(fifo)
        push = subprocess.Popen(["buildah", *_storage(), "push", "--quiet", image, f"docker-archive:{fifo}:{image}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "TMPDIR": tmp})
        try:
            ctr("images", "import", str(fifo))
        finally:
            _, err = push.communicate(timeout=600)
        if push.returncode != 0:
            raise ImageError(f"buildah push {image} failed: {err.strip()[-2000:]}")
    if image not in ctr("images", "ls", "-q", check=False).stdout.split():
        raise ImageError(f"{image} was imported but the node's containerd does not list it")
    return time.monotonic() - t0

def main(argv: list[str] | None = None) -> int:
    """``python -m statictrain_localcluster.images``: build (cached) what a real node starts with
    (busybox, base, trainer, sidecar) and its containerd image store; print each image."""
    del argv
    problems = realnode.missing_prerequisites()
    if problems:  # the cluster starts kwok-only here and says the same
        print(f"images: no real node on this machine, so no images: {'; '.join(problems)}", file=sys.stderr)
        return 0
    try:
        built = node_images(sys.stderr)
        for image in built.values():
            print(image, flush=True)
        t0 = time.monotonic()
        store = realnode.image_store(store_key(built), cache_root() / "containerd-images",
                                     lambda ctr: [load(ctr, i) for i in built.values()])
        print(f"containerd image store {store} ({time.monotonic() - t0:.0f} s)")
    except (ImageError, RuntimeError, OSError) as e:
        print(f"images: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
