#!/usr/bin/env bash
# Builds the local control plane once, into a cache outside the repository keyed by every
# version: release binaries where their release publishes checksums (releases.py), the rest
# from published Go modules. Re-running is a no-op on a hit.
# Usage: cluster/build-binaries.sh            (prints the bin folder on success)
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.34.4}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
KWOK_VERSION=${KWOK_VERSION:-v0.7.0}
HELM_VERSION=${HELM_VERSION:-v3.19.5}

name=build-binaries
goos=$(go env GOOS 2>/dev/null || echo linux) goarch=$(go env GOARCH 2>/dev/null || echo amd64)
key="k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_helm-${HELM_VERSION}_${goos}-${goarch}"
want=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok kwokctl helm)
releases=(kube-apiserver="$K8S_VERSION" kube-controller-manager="$K8S_VERSION" kube-scheduler="$K8S_VERSION"
          kubectl="$K8S_VERSION" etcd="$ETCD_VERSION" kwok="$KWOK_VERSION" kwokctl="$KWOK_VERSION" helm="$HELM_VERSION")
# shellcheck source=build-lib.sh
. "$(dirname "$0")/build-lib.sh"
work="$cache_root/$key/src"
mkdir -p "$bin" "$work"

# --- kubernetes: a tools module that requires k8s.io/kubernetes and replaces every
# staging module with its published v0.x twin (the same trick scheduler-plugins uses).
if [ ! -x "$bin/kubectl" ] || [ ! -x "$bin/kube-apiserver" ] || [ ! -x "$bin/kube-scheduler" ] || [ ! -x "$bin/kube-controller-manager" ]; then
  step "kubernetes $K8S_VERSION"
  d="$work/k8s"; rm -rf "$d"; mkdir -p "$d"
  k8s_tools_module "$d" "$K8S_VERSION"
  staging="v0.${K8S_VERSION#v1.}"
  (cd "$d" && run go get "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" \
      "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION" \
      "k8s.io/kubernetes/cmd/kube-scheduler@$K8S_VERSION" "k8s.io/kubectl@$staging" "k8s.io/kubernetes/cmd/kubectl@$K8S_VERSION")
  ld=$(k8s_ldflags "$K8S_VERSION")
  (cd "$d" && run go build -trimpath -ldflags "$ld" -o "$bin/" k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
fi

# --- etcd: the server module's main package, built from a wrapper module.
if [ ! -x "$bin/etcd" ]; then
  step "etcd $ETCD_VERSION"
  d="$work/etcd"; rm -rf "$d"; mkdir -p "$d"
  printf 'module statictrain.local/etcdtools\n\ngo 1.24\n' >"$d/go.mod"
  (cd "$d" && run go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" && \
     run go build -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3)
fi

# --- kwok, kwokctl, helm: plain installs.
gi() { GOBIN="$bin" run go install -trimpath -ldflags "-s -w $2" "$1"; }
if [ ! -x "$bin/kwok" ] || [ ! -x "$bin/kwokctl" ]; then
  step "kwok $KWOK_VERSION"
  kv="-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$K8S_VERSION"
  gi "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "$kv"
  gi "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION" "$kv"
fi
if [ ! -x "$bin/helm" ]; then
  step "helm $HELM_VERSION"
  gi "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
fi

have_all || die "some binaries are missing from $bin after the build"
# Recorded for bench/cluster.py (cold_build_s).
printf '{"build_seconds": %s, "key": "%s"}\n' "$(( $(date +%s) - started ))" "$key" >"$cache_root/$key/build-time.json"
echo "$bin"
