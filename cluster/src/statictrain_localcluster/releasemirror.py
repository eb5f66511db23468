"""A loopback release host: the release files and sums files of the downloaded binaries (releases.py), in the
real hosts' layout, made by packaging binaries built here, and served over HTTP on 127.0.0.1.

The tests of the download path and the cold-setup bench point STATICTRAIN_RELEASES_* at it (``hosts()``): this
machine cannot reach dl.k8s.io, github.com or get.helm.sh, and a benchmark should not measure someone's network.
"""

from __future__ import annotations

import hashlib
import http.server
import shutil
import tarfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from statictrain_localcluster import releases

__all__ = ["built", "hosts", "package", "serve"]

BARE_SUMS = {"kubernetes"}
"""Projects whose sums file holds the digest alone (dl.k8s.io's .sha256); the others write sha256sum's lines."""


KEY_NAMES = {"kubernetes": "k8s", "etcd": "etcd", "helm": "helm", "coredns": "coredns"}
"""How the build scripts name each project in their cache keys (k8s-v1.34.4_etcd-v3.6.16_..._linux-amd64)."""


def built(bin_dir: Path) -> dict[str, tuple[str, Path]]:
    """The binaries of a build script's bin folder that have a release: name -> (version, path), the versions
    read from the folder's cache key."""
    key = bin_dir.parent.name.removeprefix("node-")
    versions = dict(part.split("-", 1) for part in key.split("_") if "-" in part)
    return {name: (versions[KEY_NAMES[r.project]], bin_dir / name) for name, r in releases.RELEASES.items()
            if (bin_dir / name).is_file() and KEY_NAMES[r.project] in versions}


def package(root: Path, binaries: dict[str, tuple[str, Path]], os_: str = "linux", arch: str = "amd64") -> None:
    """Lay out under `root` (one folder per project) the release files of `binaries` (name -> (version, the
    built binary)): the asset (the binary, or a .tar.gz holding it where its release has one) and the sums
    file listing it."""
    for name, (version, binary) in binaries.items():
        r = releases.RELEASES[name]
        asset = root / r.project / releases.fill(r.asset, name, version, os_, arch)
        asset.parent.mkdir(parents=True, exist_ok=True)
        if r.member:
            with tarfile.open(asset, "w:gz", compresslevel=1) as tar:
                tar.add(binary, arcname=releases.fill(r.member, name, version, os_, arch))
        else:
            shutil.copyfile(binary, asset)
        digest = hashlib.sha256(asset.read_bytes()).hexdigest()
        sums = root / r.project / releases.fill(r.sums, name, version, os_, arch)
        sums.parent.mkdir(parents=True, exist_ok=True)
        if r.project in BARE_SUMS:
            sums.write_text(digest + "\n")
        else:
            with sums.open("a") as f:
                f.write(f"{digest}  {asset.name}\n")


def hosts(base_url: str) -> dict[str, str]:
    """The STATICTRAIN_RELEASES_* environment that points every project at `base_url`/<project>."""
    return {env: f"{base_url}/{project}" for project, (env, _) in releases.HOSTS.items()}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve `root` on 127.0.0.1 (a free port) while in the block; yields the base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()

