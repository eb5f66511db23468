#!/usr/bin/env bash
# Builds the real node's NetworkPolicy enforcer once, from its published Go module,
# into a cache outside the repository keyed by its version: kube-network-policies
# (SIG Network's nftables + nfqueue NetworkPolicy agent). Re-running is a no-op on a
# hit; two runs at once are safe (each builds into its own temporary folder).
# It needs a kernel that puts packets on a netfilter queue: through nftables `queue`
# rules (its own) or, where CONFIG_NFT_QUEUE is unset, an iptables NFQUEUE rule that
# statictrain_localcluster.netpol installs instead. Where neither works (probed in a
# throwaway network namespace) the build is skipped, saying why, and the script exits 0
# printing nothing (STATICTRAIN_NETPOL_BUILD=always builds anyway).
# Usage: build-netpol.sh            (prints the bin folder on success)
set -euo pipefail

# queue_problem: empty when this kernel takes an nftables queue rule or an iptables NFQUEUE rule.
queue_problem() {
  command -v unshare >/dev/null || { echo "no unshare command (util-linux)"; return; }
  local nft ipt
  nft=$(command -v nft >/dev/null && unshare --net nft -f - 2>&1 <<'RULES'
table inet statictrain_probe {
  chain c { type filter hook postrouting priority 0; ip daddr 192.0.2.1 queue num 100 bypass; }
}
RULES
) && return
  ipt=$(command -v iptables >/dev/null && \
        unshare --net iptables -A FORWARD -d 192.0.2.1 -j NFQUEUE --queue-num 100 --queue-bypass 2>&1) && return
  echo "nftables queue rules refused (${nft//$'\n'/ }) and iptables NFQUEUE refused (${ipt//$'\n'/ })"
}
if [ "${STATICTRAIN_NETPOL_BUILD:-auto}" != always ]; then
  problem=$(queue_problem)
  if [ -n "$problem" ]; then
    echo "build-netpol: skipped, kube-network-policies cannot enforce on this machine: $problem" >&2
    exit 0
  fi
fi

KNP_VERSION=${KNP_VERSION:-v0.8.0}

name=build-netpol
goos=$(go env GOOS 2>/dev/null || echo linux) goarch=$(go env GOARCH 2>/dev/null || echo amd64)
key="netpol-knp-${KNP_VERSION}_${goos}-${goarch}"
releases=()  # no release binary with published checksums
want=(kube-network-policies)
# shellcheck source=build-lib.sh
. "$(dirname "$0")/build-lib.sh"
begin_build

step "kube-network-policies $KNP_VERSION"
mkdir -p "$tmp/knp"
printf 'module statictrain.local/netpoltools\n\ngo 1.24\n' >"$tmp/knp/go.mod"
(cd "$tmp/knp" && run go get "sigs.k8s.io/kube-network-policies@$KNP_VERSION" && \
   run go build -trimpath -ldflags "-s -w" -o "$out/kube-network-policies" sigs.k8s.io/kube-network-policies/cmd)

finish_build
