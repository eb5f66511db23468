#!/usr/bin/env bash
# Builds the real node's Go binaries once, from published Go modules, into a cache
# outside the repository keyed by every version: kubelet (the same Kubernetes module
# and ldflags as the control plane), CoreDNS (cluster DNS) and rancher's
# local-path-provisioner (per-job checkpoint volumes). Re-running is a no-op on a
# hit. Two runs at once are safe: each builds into its own temporary folder and
# renames it into place. containerd, runc and the CNI plugins are Debian packages.
# Usage: build-node.sh            (prints the bin folder on success)
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.34.4}
COREDNS_VERSION=${COREDNS_VERSION:-v1.14.7}
LOCAL_PATH_VERSION=${LOCAL_PATH_VERSION:-v0.0.30}

cache_root=${STATICTRAIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/statictrain}
key="node-k8s-${K8S_VERSION}_coredns-${COREDNS_VERSION}_localpath-${LOCAL_PATH_VERSION}_$(go env GOOS 2>/dev/null || echo linux)-$(go env GOARCH 2>/dev/null || echo amd64)"
bin="$cache_root/$key/bin"
want=(kubelet coredns local-path-provisioner)

die() { echo "build-node: $*" >&2; exit 1; }
have_all() { for b in "${want[@]}"; do [ -x "$bin/$b" ] || return 1; done; }

if have_all; then echo "$bin"; exit 0; fi
command -v go >/dev/null || die "no Go toolchain on PATH: install Go >= 1.25 (https://go.dev/dl) and re-run"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
export GOPROXY=${STATICTRAIN_GOPROXY:-https://proxy.golang.org}   # no 'direct': a missing module fails fast
mkdir -p "$cache_root/$key"
tmp=$(mktemp -d "$cache_root/$key/build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
out="$tmp/bin"; mkdir -p "$out"
log="$cache_root/$key/build.log"
: >"$log"
started=$(date +%s)
# shellcheck source=k8s-module.sh
. "$(dirname "$0")/k8s-module.sh"
step() { echo "build-node: $1 (log: $log)" >&2; }
run() { "$@" >>"$log" 2>&1 || { tail -n 30 "$log" >&2; die "failed: $* (full log: $log)"; }; }

step "kubelet $K8S_VERSION"
mkdir -p "$tmp/k8s"
k8s_tools_module "$tmp/k8s" "$K8S_VERSION" || die "could not write the Kubernetes tools module"
(cd "$tmp/k8s" && run go get "k8s.io/kubernetes/cmd/kubelet@$K8S_VERSION" && \
   run go build -trimpath -ldflags "$(k8s_ldflags "$K8S_VERSION")" -o "$out/kubelet" k8s.io/kubernetes/cmd/kubelet)

step "coredns $COREDNS_VERSION"
mkdir -p "$tmp/coredns"
printf 'module statictrain.local/corednstools\n\ngo 1.25\n' >"$tmp/coredns/go.mod"
(cd "$tmp/coredns" && run go get "github.com/coredns/coredns@$COREDNS_VERSION" && \
   run go build -trimpath -ldflags "-s -w" -o "$out/coredns" github.com/coredns/coredns)

step "local-path-provisioner $LOCAL_PATH_VERSION"
mkdir -p "$tmp/localpath"
printf 'module statictrain.local/localpathtools\n\ngo 1.24\n' >"$tmp/localpath/go.mod"
(cd "$tmp/localpath" && run go get "github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION" && \
   run go build -trimpath -ldflags "-s -w -X main.VERSION=$LOCAL_PATH_VERSION" -o "$out/local-path-provisioner" \
     github.com/rancher/local-path-provisioner)

printf '{"build_seconds": %s, "key": "%s"}\n' "$(( $(date +%s) - started ))" "$key" >"$out/build-time.json"
# Into place in one rename; a concurrent run that finished first wins and this copy is dropped.
mv -T "$out" "$bin" 2>/dev/null || true
have_all || die "some binaries are missing from $bin after the build"
echo "$bin"
