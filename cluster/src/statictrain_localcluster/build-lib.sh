# Sourced by the build-*.sh scripts after they set name, key, want=(...) and releases=(NAME=VERSION...):
# the cache folder keyed by versions, an early exit (printing the bin folder) when every
# wanted binary is there, release downloads (releases.py: checksum-verified release binaries,
# before any Go build), the Go settings, logging helpers, and the Kubernetes tools module.

cache_root=${STATICTRAIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/statictrain}
bin="$cache_root/$key/bin"
die() { echo "$name: $*" >&2; exit 1; }
have_all() { for b in "${want[@]}"; do [ -x "$bin/$b" ] || return 1; done; }
have() { [ -x "$bin/$1" ]; }

if have_all; then echo "$bin"; exit 0; fi
# Go is needed either way: every script wants a binary that has no release with published sums.
command -v go >/dev/null || die "no Go toolchain on PATH: install Go >= 1.25 (https://go.dev/dl) and re-run"
# Release binaries first; what they do not cover (or what fails its checksum) is built below.
if [ ${#releases[@]} -gt 0 ]; then
  if command -v "${STATICTRAIN_PYTHON:-python3}" >/dev/null; then
    "${STATICTRAIN_PYTHON:-python3}" "$(dirname "${BASH_SOURCE[0]}")/releases.py" "$bin" "$goos" "$goarch" "${releases[@]}" \
      || echo "$name: release downloads failed; building from Go modules" >&2
  else
    echo "$name: no python3 to fetch release binaries with; building from Go modules" >&2
  fi
  if have_all; then echo "$bin"; exit 0; fi
fi

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
export GOPROXY=${STATICTRAIN_GOPROXY:-https://proxy.golang.org}   # no 'direct': a missing module fails fast
mkdir -p "$cache_root/$key"
log="$cache_root/$key/build.log"
: >"$log"
started=$(date +%s)
step() { echo "$name: $1 (log: $log)" >&2; }
run() { "$@" >>"$log" 2>&1 || { tail -n 30 "$log" >&2; die "failed: $* (full log: $log)"; }; }

# k8s_tools_module DIR VERSION: DIR/go.mod requiring k8s.io/kubernetes with every staging
# module replaced by its published v0.x twin (the same trick scheduler-plugins uses).
k8s_tools_module() {
  local d=$1 version=$2 gomod staging
  gomod=$(cd "$d" && go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -f "$gomod" ] || die "could not download k8s.io/kubernetes@$version from $GOPROXY"
  staging="v0.${version#v1.}"
  {
    echo "module statictrain.local/k8stools"; echo; echo "go 1.24"; echo
    echo "require k8s.io/kubernetes $version"; echo
    grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging' "$gomod" | awk '{print "replace " $1 " => " $1 " '"$staging"'"}'
  } >"$d/go.mod"
}

# k8s_ldflags VERSION: version stamps, or the binaries report v0.0.0.
k8s_ldflags() {
  local version=$1 minor v=k8s.io/component-base/version
  minor=$(echo "$version" | cut -d. -f2)
  echo "-s -w -X $v.gitVersion=$version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean" \
       "-X $v.buildDate=1970-01-01T00:00:00Z -X k8s.io/client-go/pkg/version.gitVersion=$version" \
       "-X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
}

# begin_build: a private temporary folder ($tmp, removed on exit) with $out=$tmp/bin, so two
# runs at once never see each other's half-built binaries. finish_build: the build time, then
# each built file renamed into $bin in one step (beside the downloaded ones; of two concurrent
# runs the last rename wins, and both built the same).
begin_build() {
  tmp=$(mktemp -d "$cache_root/$key/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  out="$tmp/bin"; mkdir -p "$out"
}
finish_build() {
  printf '{"build_seconds": %s, "key": "%s"}\n' "$(( $(date +%s) - started ))" "$key" >"$out/build-time.json"
  mkdir -p "$bin"
  for f in "$out"/*; do mv -T "$f" "$bin/${f##*/}" 2>/dev/null || true; done
  have_all || die "some binaries are missing from $bin after the build"
  echo "$bin"
}
