#!/usr/bin/env bash
# Builds the real node's NetworkPolicy enforcer once, from its published Go module,
# into a cache outside the repository keyed by its version: kube-network-policies
# (SIG Network's nftables + nfqueue NetworkPolicy agent). Re-running is a no-op on a
# hit; two runs at once are safe (each builds into its own temporary folder).
# Usage: build-netpol.sh            (prints the bin folder on success)
set -euo pipefail

KNP_VERSION=${KNP_VERSION:-v0.8.0}

name=build-netpol
key="netpol-knp-${KNP_VERSION}_$(go env GOOS 2>/dev/null || echo linux)-$(go env GOARCH 2>/dev/null || echo amd64)"
want=(kube-network-policies)
# shellcheck source=build-lib.sh
. "$(dirname "$0")/build-lib.sh"
tmp=$(mktemp -d "$cache_root/$key/build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
out="$tmp/bin"; mkdir -p "$out"

step "kube-network-policies $KNP_VERSION"
mkdir -p "$tmp/knp"
printf 'module statictrain.local/netpoltools\n\ngo 1.24\n' >"$tmp/knp/go.mod"
(cd "$tmp/knp" && run go get "sigs.k8s.io/kube-network-policies@$KNP_VERSION" && \
   run go build -trimpath -ldflags "-s -w" -o "$out/kube-network-policies" sigs.k8s.io/kube-network-policies/cmd)

printf '{"build_seconds": %s, "key": "%s"}\n' "$(( $(date +%s) - started ))" "$key" >"$out/build-time.json"
mv -T "$out" "$bin" 2>/dev/null || true
have_all || die "some binaries are missing from $bin after the build"
echo "$bin"
