#!/usr/bin/env bash
# Builds Kueue's manager once, from its published Go module (sigs.k8s.io/kueue), into a
# cache outside the repository keyed by its version, and copies the module's CRDs
# (config/components/crd/bases) and webhook configurations (config/components/webhook)
# beside it, into config/ (statictrain_localcluster.kueue installs them). Re-running is a no-op on a hit; two runs at
# once are safe (each builds into its own temporary folder).
# Usage: build-kueue.sh            (prints the bin folder on success)
set -euo pipefail

KUEUE_VERSION=${KUEUE_VERSION:-v0.17.0}

name=build-kueue
goos=$(go env GOOS 2>/dev/null || echo linux) goarch=$(go env GOARCH 2>/dev/null || echo amd64)
key="kueue-${KUEUE_VERSION}_${goos}-${goarch}"
releases=()  # no release binary with published checksums
want=(kueue config)
# shellcheck source=build-lib.sh
. "$(dirname "$0")/build-lib.sh"
begin_build

step "kueue $KUEUE_VERSION"
mkdir -p "$tmp/kueue"
printf 'module statictrain.local/kueuetools\n\ngo 1.25.0\n' >"$tmp/kueue/go.mod"
(cd "$tmp/kueue" && run go get "sigs.k8s.io/kueue@$KUEUE_VERSION" && \
   run go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
     -o "$out/kueue" sigs.k8s.io/kueue/cmd/kueue)
src=$(cd "$tmp/kueue" && go list -m -f '{{.Dir}}' "sigs.k8s.io/kueue")
mkdir -p "$out/config/crd" "$out/config/webhook"
cp "$src"/config/components/crd/bases/*.yaml "$out/config/crd/"
cp "$src"/config/components/webhook/manifests.yaml "$out/config/webhook/"
chmod -R u+w "$out/config"

finish_build
