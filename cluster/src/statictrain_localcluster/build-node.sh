#!/usr/bin/env bash
# Builds the real node's Go binaries once, into a cache outside the repository keyed by
# every version (release binaries where their release publishes checksums, releases.py;
# the rest from published Go modules): kubelet (the same Kubernetes module
# and ldflags as the control plane), CoreDNS (cluster DNS) and rancher's
# local-path-provisioner (per-job checkpoint volumes). Re-running is a no-op on a
# hit. Two runs at once are safe: each builds into its own temporary folder and
# renames the binaries into place. containerd, runc and the CNI plugins are Debian packages.
# Usage: build-node.sh            (prints the bin folder on success)
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.34.4}
COREDNS_VERSION=${COREDNS_VERSION:-v1.14.7}
LOCAL_PATH_VERSION=${LOCAL_PATH_VERSION:-v0.0.30}

name=build-node
goos=$(go env GOOS 2>/dev/null || echo linux) goarch=$(go env GOARCH 2>/dev/null || echo amd64)
key="node-k8s-${K8S_VERSION}_coredns-${COREDNS_VERSION}_localpath-${LOCAL_PATH_VERSION}_${goos}-${goarch}"
want=(kubelet coredns local-path-provisioner)
releases=(kubelet="$K8S_VERSION" coredns="$COREDNS_VERSION" local-path-provisioner="$LOCAL_PATH_VERSION")
# shellcheck source=build-lib.sh
. "$(dirname "$0")/build-lib.sh"
begin_build

if ! have kubelet; then
  step "kubelet $K8S_VERSION"
  mkdir -p "$tmp/k8s"
  k8s_tools_module "$tmp/k8s" "$K8S_VERSION"
  (cd "$tmp/k8s" && run go get "k8s.io/kubernetes/cmd/kubelet@$K8S_VERSION" && \
     run go build -trimpath -ldflags "$(k8s_ldflags "$K8S_VERSION")" -o "$out/kubelet" k8s.io/kubernetes/cmd/kubelet)
fi

if ! have coredns; then
  step "coredns $COREDNS_VERSION"
  mkdir -p "$tmp/coredns"
  printf 'module statictrain.local/corednstools\n\ngo 1.25\n' >"$tmp/coredns/go.mod"
  (cd "$tmp/coredns" && run go get "github.com/coredns/coredns@$COREDNS_VERSION" && \
     run go build -trimpath -ldflags "-s -w" -o "$out/coredns" github.com/coredns/coredns)
fi

if ! have local-path-provisioner; then
  step "local-path-provisioner $LOCAL_PATH_VERSION"
  mkdir -p "$tmp/localpath"
  printf 'module statictrain.local/localpathtools\n\ngo 1.24\n' >"$tmp/localpath/go.mod"
  (cd "$tmp/localpath" && run go get "github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION" && \
     run go build -trimpath -ldflags "-s -w -X main.VERSION=$LOCAL_PATH_VERSION" -o "$out/local-path-provisioner" \
       github.com/rancher/local-path-provisioner)
fi

finish_build
