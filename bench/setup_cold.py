"""Cold first run: `make demo` (or another target) in a fresh clone with every cache empty, the release
binaries served by a loopback release host.

    .venv/bin/python bench/setup_cold.py                      # make demo, downloads on
    .venv/bin/python bench/setup_cold.py --no-downloads       # make demo, everything built from Go modules
    .venv/bin/python bench/setup_cold.py --target cluster-build --warm-go   # small: binaries only, Go caches kept

The release host is a loopback HTTP server with the real hosts' layout (release files and sums files),
packaged from the binaries this machine built (statictrain_localcluster.releasemirror): this machine cannot
reach dl.k8s.io, github.com or get.helm.sh, and a loopback host takes the network out of the figure (the
bytes it served are recorded, to add a network's time). Empty caches: a fresh clone of HEAD (its own .venv),
STATICTRAIN_CACHE (cluster binaries, buildah image store, containerd image store), GOCACHE, GOMODCACHE
(unless --warm-go) and PIP_CACHE_DIR, all in a temporary folder removed afterwards (~20 GB during a demo
run: the images). The Debian packages and Go are taken as installed. Run it on a quiet machine: other
builds share its cores.

Writes demo_cold_with_downloads_minutes (or ..._without_downloads_..., or <target>_cold_..._minutes for
another target) into bench/results/setup_cold.json, keeping the file's other figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from statictrain_localcluster import releasemirror
from statictrain_localcluster.cluster import build_binaries

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "results" / "setup_cold.json"


def git(*args: str, cwd: Path = REPO) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="demo", help="make target to time (default: demo)")
    ap.add_argument("--no-downloads", action="store_true", help="STATICTRAIN_DOWNLOADS=off: build everything")
    ap.add_argument("--warm-go", action="store_true", help="keep this machine's Go build and module caches")
    ap.add_argument("--timeout", type=float, default=4 * 3600, help="seconds before the run is given up")
    args = ap.parse_args()

    sources = [build_binaries(log=sys.stderr), build_binaries(log=sys.stderr, script="build-node.sh")]
    commit = git("rev-parse", "HEAD")
    with tempfile.TemporaryDirectory(prefix="setup-cold-") as tmp_name:
        tmp = Path(tmp_name)
        host = tmp / "release-host"
        for bin_dir in sources:
            releasemirror.package(host, releasemirror.built(bin_dir))
        served_mb = sum(f.stat().st_size for f in host.rglob("*") if f.is_file()) / 2**20
        clone = tmp / "clone"
        git("clone", "--quiet", "--no-checkout", git("rev-parse", "--path-format=absolute", "--git-common-dir"),
            str(clone))
        git("checkout", "--quiet", commit, cwd=clone)
        env = {**os.environ, "STATICTRAIN_CACHE": str(tmp / "cache"), "PIP_CACHE_DIR": str(tmp / "pip")}
        if not args.warm_go:
            env |= {"GOCACHE": str(tmp / "go-build"), "GOMODCACHE": str(tmp / "go-mod")}
        if args.no_downloads:
            env["STATICTRAIN_DOWNLOADS"] = "off"
        log = tmp / "make.log"
        with releasemirror.serve(host) as url, log.open("w") as out:
            env |= releasemirror.hosts(url)
            load_before = os.getloadavg()
            t0 = time.monotonic()
            proc = subprocess.run(["make", args.target], cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=args.timeout, check=False)
            seconds = time.monotonic() - t0
            load_after = os.getloadavg()
        text = log.read_text(errors="replace")
        if proc.returncode != 0:
            sys.exit(f"make {args.target} failed ({proc.returncode}); last lines:\n{text[-4000:]}")
        downloaded = sorted({line.split()[1] for line in text.splitlines()
                             if line.startswith("releases: ") and ": downloaded " in line})
        built = sorted({line.split()[1] for line in text.splitlines()
                        if line.startswith("releases: ") and "building it from Go modules" in line})

    key = f"{args.target}_cold_{'without' if args.no_downloads else 'with'}_downloads_minutes"
    record = json.loads(OUT.read_text()) if OUT.exists() else {}
    record[key] = round(seconds / 60, 1)
    record[key.removesuffix("_minutes") + "_details"] = {
        "command": "python bench/setup_cold.py " + " ".join(sys.argv[1:]),
        "measures": f"wall time of `make {args.target}` in a fresh clone of {commit[:10]} with empty caches "
                    f"(STATICTRAIN_CACHE, PIP_CACHE_DIR{'' if args.warm_go else ', GOCACHE, GOMODCACHE'}); "
                    "Debian packages and Go installed beforehand",
        "downloaded": downloaded,
        "built_from_go_modules": built if not args.no_downloads else "everything (STATICTRAIN_DOWNLOADS=off)",
        "release_host": f"loopback HTTP server with the real layout, {served_mb:.0f} MiB of release files "
                        "packaged from this machine's builds; a network's download time is not included",
        "load_average_before_after": [round(load_before[0], 1), round(load_after[0], 1)],
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                   f"{round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB",
        "go": subprocess.run(["go", "version"], capture_output=True, text=True, check=False).stdout.strip(),
        "started_utc": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(time.time() - seconds)),
    }
    OUT.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps({key: record[key], **record[key.removesuffix("_minutes") + "_details"]}, indent=1))


if __name__ == "__main__":
    main()
