"""Release binaries of the local cluster's parts: fetched from their release host and checked against the SHA-256
sums that release publishes, before anything is built from Go modules.

The build scripts (build-lib.sh) run this file with any python3 (standard library only, no package import)::

    python3 releases.py BIN_DIR OS ARCH NAME=VERSION...

Each NAME with a known release is fetched, with its sums file from the same release host; a binary whose
digest matches is put into BIN_DIR (atomically, executable). Anything else - no release of that binary, a
host that does not answer, stalls or lacks the file, a digest that does not match - leaves the binary out
with one line saying why, and the build script builds it from Go modules as before. The exit status is 0
unless the arguments are wrong: a failed download is never fatal.

Release hosts (the real ones by default) are environment variables, e.g. for a mirror or the tests'
loopback server: STATICTRAIN_RELEASES_K8S (dl.k8s.io), _ETCD, _HELM, _COREDNS (see HOSTS).
STATICTRAIN_DOWNLOADS=off builds everything; STATICTRAIN_DOWNLOAD_STALL_S (default 30) is how long a host
may send nothing before it is given up.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["HOSTS", "RELEASES", "DownloadError", "Release", "asset_url", "fetch", "fill", "main", "parse_sums",
           "sums_url"]

HOSTS = {
    "kubernetes": ("STATICTRAIN_RELEASES_K8S", "https://dl.k8s.io/release"),
    "etcd": ("STATICTRAIN_RELEASES_ETCD", "https://github.com/etcd-io/etcd/releases/download"),
    "helm": ("STATICTRAIN_RELEASES_HELM", "https://get.helm.sh"),
    "coredns": ("STATICTRAIN_RELEASES_COREDNS", "https://github.com/coredns/coredns/releases/download"),
}
"""Each project's release host: (environment variable, default). kwok, Kueue, local-path-provisioner and
kube-network-policies publish no binary with a sums file (images only, or no checksums): they are built."""

SUMS_LIMIT = 1 << 20
"""Largest sums file read (bytes): a sums file is a few lines."""


@dataclass(frozen=True)
class Release:
    """Where one binary's release lives, as paths under its project's host. Placeholders: {name}, {version},
    {bare} (the version without its leading v), {os}, {arch}."""

    project: str
    asset: str
    """The file to fetch: the binary itself, or a .tar.gz holding it at `member`."""
    sums: str
    """The sums file that lists the asset's SHA-256 (one bare digest, or `digest  filename` lines)."""
    member: str = ""


def _k8s(name: str) -> Release:
    return Release("kubernetes", "{version}/bin/{os}/{arch}/{name}", "{version}/bin/{os}/{arch}/{name}.sha256")


RELEASES = {
    **{n: _k8s(n) for n in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kubelet")},
    "etcd": Release("etcd", "{version}/etcd-{version}-{os}-{arch}.tar.gz", "{version}/SHA256SUMS",
                    "etcd-{version}-{os}-{arch}/etcd"),
    "helm": Release("helm", "helm-{version}-{os}-{arch}.tar.gz", "helm-{version}-{os}-{arch}.tar.gz.sha256sum",
                    "{os}-{arch}/helm"),
    "coredns": Release("coredns", "{version}/coredns_{bare}_{os}_{arch}.tgz",
                       "{version}/coredns_{bare}_{os}_{arch}.tgz.sha256", "coredns"),
}


class DownloadError(Exception):
    """A release file could not be used; the message says why."""


def fill(template: str, name: str, version: str, os_: str, arch: str) -> str:
    return template.format(name=name, version=version, bare=version.removeprefix("v"), os=os_, arch=arch)


def _host(project: str) -> str:
    env, default = HOSTS[project]
    return (os.environ.get(env) or default).rstrip("/")


def asset_url(name: str, version: str, os_: str, arch: str) -> str:
    r = RELEASES[name]
    return f"{_host(r.project)}/{fill(r.asset, name, version, os_, arch)}"


def sums_url(name: str, version: str, os_: str, arch: str) -> str:
    r = RELEASES[name]
    return f"{_host(r.project)}/{fill(r.sums, name, version, os_, arch)}"


_DIGEST = re.compile(r"^[0-9a-f]{64}$")


def parse_sums(text: str, filename: str) -> str:
    """The SHA-256 a sums file gives for `filename`: a file holding one bare digest (dl.k8s.io's .sha256), or
    `digest  filename` lines (sha256sum's format, `*filename` in binary mode)."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if len(lines) == 1 and len(lines[0]) == 1 and _DIGEST.match(lines[0][0].lower()):
        return lines[0][0].lower()
    for parts in lines:
        if len(parts) == 2 and parts[1].lstrip("*") == filename and _DIGEST.match(parts[0].lower()):
            return parts[0].lower()
    raise DownloadError(f"the sums file lists no SHA-256 for {filename}")


def _stall_s() -> float:
    return float(os.environ.get("STATICTRAIN_DOWNLOAD_STALL_S") or 30)


def _open(url: str) -> Any:
    try:
        return urllib.request.urlopen(url, timeout=_stall_s())
    except urllib.error.HTTPError as e:
        raise DownloadError(f"HTTP {e.code} for {url}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise DownloadError(f"{url} did not answer ({reason})") from None


def _read_sums(url: str) -> str:
    with _open(url) as r:
        try:
            body: bytes = r.read(SUMS_LIMIT + 1)
        except (OSError, http.client.HTTPException) as e:  # a socket timeout (the host stalled), a cut body
            raise DownloadError(f"{url} stalled or broke off ({e!r})") from None
    if len(body) > SUMS_LIMIT:
        raise DownloadError(f"{url} is larger than a sums file ({SUMS_LIMIT} bytes)")
    return body.decode("utf-8", "replace")


def _download(url: str, dest: Path) -> str:
    """Stream `url` into `dest`; return its SHA-256."""
    digest, size = hashlib.sha256(), 0
    with _open(url) as r, dest.open("wb") as out:
        length = r.headers.get("Content-Length")
        while True:
            try:
                chunk = r.read(1 << 20)
            except (OSError, http.client.HTTPException) as e:  # a socket timeout (the host stalled), a cut body
                raise DownloadError(f"{url} stalled or broke off ({e!r})") from None
            if not chunk:
                break
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    if length is not None and size != int(length):
        raise DownloadError(f"{url} stalled or broke off after {size} of {length} bytes")
    return digest.hexdigest()


def fetch(name: str, version: str, os_: str, arch: str, bin_dir: Path) -> str:
    """Put the release binary `name` into `bin_dir` once its digest matches the release's sums; return the URL."""
    r = RELEASES[name]
    url, sums = asset_url(name, version, os_, arch), sums_url(name, version, os_, arch)
    want = parse_sums(_read_sums(sums), url.rsplit("/", 1)[-1])
    with tempfile.TemporaryDirectory(dir=bin_dir, prefix=f".{name}.download-") as tmp:
        asset = Path(tmp) / "asset"
        got = _download(url, asset)
        if got != want:
            raise DownloadError(f"SHA-256 of {url} is {got}, the release's sums ({sums}) say {want}: refused")
        binary = asset
        if r.member:
            binary = Path(tmp) / name
            member = fill(r.member, name, version, os_, arch)
            try:
                with tarfile.open(asset, "r:gz") as tar:
                    info = tar.getmember(member)
                    source = tar.extractfile(info) if info.isfile() else None
                    if source is None:
                        raise DownloadError(f"{member} in {url} is not a file")
                    with source, binary.open("wb") as out:
                        shutil.copyfileobj(source, out)
            except (KeyError, tarfile.TarError, EOFError) as e:
                raise DownloadError(f"{url} holds no {member} ({e})") from None
        binary.chmod(0o755)
        binary.replace(bin_dir / name)
    return url


def _one(spec: str, bin_dir: Path, os_: str, arch: str) -> str:
    name, version = spec.split("=", 1)
    if (bin_dir / name).is_file():
        return f"{name} {version}: already in {bin_dir}"
    if name not in RELEASES:
        return f"{name} {version}: no release with published sums; building it from Go modules"
    try:
        url = fetch(name, version, os_, arch, bin_dir)
    except DownloadError as e:
        return f"{name} {version}: not downloaded ({e}); building it from Go modules"
    return f"{name} {version}: downloaded {url} (SHA-256 matches the release's sums)"


def main(argv: list[str]) -> int:
    if len(argv) < 4 or not all("=" in a for a in argv[3:]):
        print("usage: releases.py BIN_DIR OS ARCH NAME=VERSION...", file=sys.stderr)
        return 2
    bin_dir, os_, arch, specs = Path(argv[0]), argv[1], argv[2], argv[3:]
    if os.environ.get("STATICTRAIN_DOWNLOADS", "on") == "off":
        print("releases: STATICTRAIN_DOWNLOADS=off: building from Go modules", file=sys.stderr)
        return 0
    bin_dir.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=4) as pool:
        for line in pool.map(lambda s: _one(s, bin_dir, os_, arch), specs):
            print(f"releases: {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
