"""make setup's release downloads against a loopback release host serving the real layout (release files and
sums files made by packaging the binaries built here): what matches is used, what does not (a wrong checksum, a
missing file, a host that stalls or breaks off) is refused, said so, and built from Go modules instead."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from importlib import resources
from pathlib import Path

import pytest
from statictrain_localcluster import releasemirror, releases
from statictrain_localcluster.cluster import build_binaries

SCRIPTS = resources.files("statictrain_localcluster")


@pytest.fixture(scope="module")
def control_plane() -> Path:
    """The bin folder of the control plane built here (the source of the release files)."""
    return build_binaries()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_build(control_plane: Path, cache: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """build-binaries.sh into an empty cache; kwok and kwokctl (no release with sums) are put there first, as a
    Go build would, so that only the release downloads (and the fallback builds they need) run."""
    target = cache / control_plane.parent.name / "bin"
    target.mkdir(parents=True)
    for name in ("kwok", "kwokctl"):
        shutil.copy2(control_plane / name, target / name)
    return subprocess.run(["bash", str(SCRIPTS / "build-binaries.sh")], capture_output=True, text=True, check=False,
                          env={**os.environ, "STATICTRAIN_CACHE": str(cache), **env}, timeout=1800)


def test_setup_takes_the_control_plane_from_the_release_host(control_plane: Path, tmp_path: Path) -> None:
    binaries = releasemirror.built(control_plane)
    assert set(binaries) == {"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd", "helm"}
    releasemirror.package(tmp_path / "host", binaries)
    with releasemirror.serve(tmp_path / "host") as url:
        proc = run_build(control_plane, tmp_path / "cache", releasemirror.hosts(url))
    assert proc.returncode == 0, proc.stderr
    bin_dir = Path(proc.stdout.strip())
    assert bin_dir == tmp_path / "cache" / control_plane.parent.name / "bin"
    for name, (version, source) in binaries.items():
        assert sha256(bin_dir / name) == sha256(source), name  # the very binary that was packaged
        assert f"{name} {version}: downloaded {url}/" in proc.stderr
    assert not (bin_dir.parent / "build.log").exists()  # no Go build started
    version = json.loads(subprocess.run([str(bin_dir / "kubectl"), "version", "--client", "-o", "json"],
                                        capture_output=True, text=True, check=True).stdout)
    assert version["clientVersion"]["gitVersion"] == binaries["kubectl"][0]
    assert not list(bin_dir.glob(".*download*"))  # no temporary files left


@pytest.mark.slow
def test_a_wrong_checksum_is_refused_and_that_binary_is_built(control_plane: Path, tmp_path: Path) -> None:
    binaries = releasemirror.built(control_plane)
    releasemirror.package(tmp_path / "host", binaries)
    etcd_version = binaries["etcd"][0]
    tarball = tmp_path / "host" / "etcd" / etcd_version / f"etcd-{etcd_version}-linux-amd64.tar.gz"
    with tarball.open("ab") as f:
        f.write(b"tampered")  # the published SHA256SUMS no longer matches
    with releasemirror.serve(tmp_path / "host") as url:
        proc = run_build(control_plane, tmp_path / "cache", releasemirror.hosts(url))
    assert proc.returncode == 0, proc.stderr
    bin_dir = Path(proc.stdout.strip())
    assert f"etcd {etcd_version}: not downloaded (SHA-256 of {url}/etcd/" in proc.stderr
    assert ": refused); building it from Go modules" in proc.stderr
    assert f"build-binaries: etcd {etcd_version}" in proc.stderr  # the Go build step ran
    out = subprocess.run([str(bin_dir / "etcd"), "--version"], capture_output=True, text=True, check=True).stdout
    assert etcd_version.removeprefix("v") in out
    for name in binaries.keys() - {"etcd"}:
        assert sha256(bin_dir / name) == sha256(binaries[name][1]), name


@dataclass
class Faults:
    """Paths the loopback host answers badly: `hang` with nothing at all, `stall` with the headers and half the
    body and then nothing, `cut` with half the body and a closed connection. Nothing waits past `release`."""

    hang: set[str] = field(default_factory=set)
    stall: set[str] = field(default_factory=set)
    cut: set[str] = field(default_factory=set)
    release: threading.Event = field(default_factory=threading.Event)


def faulty_handler(faults: Faults) -> type[http.server.SimpleHTTPRequestHandler]:
    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path in faults.hang:
                faults.release.wait(30)
                return
            if self.path not in faults.stall | faults.cut:
                super().do_GET()
                return
            body = (Path(self.directory) / self.path.lstrip("/")).read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            if self.path in faults.stall:
                faults.release.wait(30)
            self.close_connection = True

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@dataclass
class Host:
    url: str
    root: Path
    faults: Faults
    versions: dict[str, str]


@pytest.fixture
def host(control_plane: Path, tmp_path: Path) -> Iterator[Host]:
    """kubectl's and helm's release files on a loopback host that can misbehave."""
    root = tmp_path / "host"
    binaries = {k: v for k, v in releasemirror.built(control_plane).items() if k in ("kubectl", "helm")}
    releasemirror.package(root, binaries)
    faults = Faults()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(faulty_handler(faults), directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield Host(f"http://127.0.0.1:{server.server_address[1]}", root, faults, {k: v for k, (v, _) in binaries.items()})
    faults.release.set()
    server.shutdown()
    server.server_close()


def fetch(host: Host, bin_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    """releases.py's main for kubectl and helm from `host`, a host that sends nothing for 1 s given up; its report."""
    for env, value in releasemirror.hosts(host.url).items():
        monkeypatch.setenv(env, value)
    monkeypatch.setenv("STATICTRAIN_DOWNLOAD_STALL_S", "1")
    specs = [f"{name}={version}" for name, version in host.versions.items()]
    assert releases.main([str(bin_dir), "linux", "amd64", *specs]) == 0
    return capsys.readouterr().err


def test_a_missing_file_is_reported_and_left_to_the_build(
    host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    helm = host.versions["helm"]
    (host.root / "helm" / f"helm-{helm}-linux-amd64.tar.gz").unlink()
    next((host.root / "kubernetes").rglob("kubectl.sha256")).unlink()
    err = fetch(host, tmp_path / "bin", monkeypatch, capsys)
    assert f"helm {helm}: not downloaded (HTTP 404 for {host.url}/helm/helm-{helm}-linux-amd64.tar.gz)" in err
    assert "kubectl.sha256); building it from Go modules" in err
    assert list((tmp_path / "bin").iterdir()) == []  # nothing unverified was kept


@pytest.mark.parametrize("fault", ["hang", "stall", "cut"])
def test_a_host_that_stalls_or_breaks_off_is_given_up(
    fault: str, host: Host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl = host.versions["kubectl"]
    getattr(host.faults, fault).add(f"/kubernetes/{kubectl}/bin/linux/amd64/kubectl")
    err = fetch(host, tmp_path / "bin", monkeypatch, capsys)
    line = next(line for line in err.splitlines() if f"kubectl {kubectl}" in line)
    expected = {"hang": "did not answer", "stall": "stalled or broke off", "cut": "stalled or broke off"}[fault]
    assert expected in line and line.endswith("building it from Go modules"), line
    assert f"helm {host.versions['helm']}: downloaded" in err  # the other binary is unaffected
    assert sorted(p.name for p in (tmp_path / "bin").iterdir()) == ["helm"]  # no half file, no temporary folder
