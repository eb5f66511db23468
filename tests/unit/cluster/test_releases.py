"""Release downloads (statictrain_localcluster.releases): the real hosts' URLs, and reading their sums files."""

from __future__ import annotations

import pytest
from statictrain_localcluster import releases
from statictrain_localcluster.releases import DownloadError, asset_url, parse_sums, sums_url

DIGEST = "0123456789abcdef" * 4

# Where each project publishes the release and its SHA-256, as its install documentation gives them
# (kubernetes.io "Install kubectl on Linux", etcd's and CoreDNS's GitHub release assets, helm.sh's get-helm-3).
REAL = {
    "kube-apiserver": ("v1.34.4", "https://dl.k8s.io/release/v1.34.4/bin/linux/amd64/kube-apiserver",
                       "https://dl.k8s.io/release/v1.34.4/bin/linux/amd64/kube-apiserver.sha256"),
    "kubectl": ("v1.34.4", "https://dl.k8s.io/release/v1.34.4/bin/linux/amd64/kubectl",
                "https://dl.k8s.io/release/v1.34.4/bin/linux/amd64/kubectl.sha256"),
    "kubelet": ("v1.34.4", "https://dl.k8s.io/release/v1.34.4/bin/linux/amd64/kubelet",
                "https://dl.k8s.io/release/v1.34.4/bin/linux/amd64/kubelet.sha256"),
    "etcd": ("v3.6.16", "https://github.com/etcd-io/etcd/releases/download/v3.6.16/etcd-v3.6.16-linux-amd64.tar.gz",
             "https://github.com/etcd-io/etcd/releases/download/v3.6.16/SHA256SUMS"),
    "helm": ("v3.19.5", "https://get.helm.sh/helm-v3.19.5-linux-amd64.tar.gz",
             "https://get.helm.sh/helm-v3.19.5-linux-amd64.tar.gz.sha256sum"),
    "coredns": ("v1.14.7", "https://github.com/coredns/coredns/releases/download/v1.14.7/coredns_1.14.7_linux_amd64.tgz",
                "https://github.com/coredns/coredns/releases/download/v1.14.7/coredns_1.14.7_linux_amd64.tgz.sha256"),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_each_binary_comes_from_its_real_release_host(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for env, _ in releases.HOSTS.values():
        monkeypatch.delenv(env, raising=False)
    version, asset, sums = REAL[name]
    assert (asset_url(name, version, "linux", "amd64"), sums_url(name, version, "linux", "amd64")) == (asset, sums)


def test_a_release_host_can_be_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATICTRAIN_RELEASES_K8S", "http://127.0.0.1:9/k8s/")
    assert asset_url("kubectl", "v1.34.4", "linux", "arm64") == "http://127.0.0.1:9/k8s/v1.34.4/bin/linux/arm64/kubectl"
    assert sums_url("etcd", "v3.6.16", "linux", "amd64").startswith("https://github.com/etcd-io/")  # others kept


def test_binaries_without_published_sums_are_not_downloaded() -> None:
    # kwok's releases have no checksums file; Kueue, local-path-provisioner and kube-network-policies
    # publish images only: the build scripts build them.
    assert not {"kwok", "kwokctl", "kueue", "local-path-provisioner", "kube-network-policies"} & set(releases.RELEASES)


def test_sums_files_in_each_published_format() -> None:
    assert parse_sums(f"{DIGEST}\n", "kubectl") == DIGEST  # dl.k8s.io: the digest alone
    assert parse_sums(f"{DIGEST.upper()}  helm.tar.gz\n", "helm.tar.gz") == DIGEST  # sha256sum
    listing = f"{'f' * 64}  etcd-v3.6.16-darwin-arm64.zip\n{DIGEST}  etcd-v3.6.16-linux-amd64.tar.gz\n"
    assert parse_sums(listing, "etcd-v3.6.16-linux-amd64.tar.gz") == DIGEST  # SHA256SUMS: pick the asset's line
    assert parse_sums(f"{DIGEST} *coredns.tgz\n", "coredns.tgz") == DIGEST  # sha256sum --binary


@pytest.mark.parametrize("text", [
    "",  # empty
    "<html>Not Found</html>\n",  # an error page served with 200
    f"{DIGEST}  other-file.tar.gz\n",  # lists other assets only
    f"{DIGEST[:-1]}  etcd.tar.gz\n",  # not a SHA-256
    f"{DIGEST}\n{DIGEST}\n",  # several bare digests: which one?
])
def test_a_sums_file_that_does_not_name_the_asset_is_refused(text: str) -> None:
    with pytest.raises(DownloadError, match=r"lists no SHA-256 for etcd\.tar\.gz"):
        parse_sums(text, "etcd.tar.gz")
