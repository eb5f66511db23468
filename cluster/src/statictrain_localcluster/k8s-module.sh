# Sourced by build-binaries.sh and build-node.sh: a Go tools module that requires
# k8s.io/kubernetes and replaces every staging module with its published v0.x twin
# (the same trick scheduler-plugins uses), plus the version ldflags.
# Usage: k8s_tools_module DIR VERSION   (writes DIR/go.mod);  k8s_ldflags VERSION

k8s_tools_module() {
  local d=$1 version=$2 gomod staging
  gomod=$(cd "$d" && go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -f "$gomod" ] || { echo "could not download k8s.io/kubernetes@$version from $GOPROXY" >&2; return 1; }
  staging="v0.${version#v1.}"
  {
    echo "module statictrain.local/k8stools"; echo; echo "go 1.24"; echo
    echo "require k8s.io/kubernetes $version"; echo
    grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging' "$gomod" | awk '{print "replace " $1 " => " $1 " '"$staging"'"}'
  } >"$d/go.mod"
}

k8s_ldflags() {
  local version=$1 minor v=k8s.io/component-base/version
  minor=$(echo "$version" | cut -d. -f2)
  echo "-s -w -X $v.gitVersion=$version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean" \
       "-X $v.buildDate=1970-01-01T00:00:00Z -X k8s.io/client-go/pkg/version.gitVersion=$version" \
       "-X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
}
