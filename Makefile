# statictrain: FinOps-aware torch.compile training on Kubernetes.
# `make help` lists the targets. Everything installs itself on a fresh machine:
# Python packages into .venv (wheels cached by pip outside the repo), the
# control-plane binaries into ~/.cache/statictrain/<versions>/bin (release binaries,
# checksum-verified, where their release publishes sums; built from Go modules otherwise),
# the chart checkers into ~/.cache/statictrain/tools/<tool>-<version>.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
DISTS := core cluster sidecar extender operator cli trainer
STAMP := $(VENV)/.installed-$(shell cat requirements-dev.txt $(addsuffix /pyproject.toml,$(DISTS)) | sha256sum | cut -c1-12)
PYTEST_ARGS ?=

.DEFAULT_GOAL := help

help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}'

# The image builds (mostly download, unpack and disk) run beside the Go builds (CPU).
# Release hosts of the downloaded binaries (defaults in cluster/src/statictrain_localcluster/releases.py):
# STATICTRAIN_RELEASES_K8S, _ETCD, _HELM, _COREDNS, e.g. `make setup STATICTRAIN_RELEASES_K8S=https://mirror/k8s`;
# STATICTRAIN_DOWNLOADS=off builds everything from Go modules.
setup: $(STAMP) system-deps ## Everything a fresh machine needs (venv, Debian packages, cluster binaries, images)
	@$(MAKE) --no-print-directory images & images=$$!; \
	$(MAKE) --no-print-directory cluster-build || { wait $$images; exit 1; }; wait $$images

# Prometheus; the real node's runtime (containerd, runc, CNI plugins, iproute2), image
# builder (buildah, debootstrap for the offline base image), sandbox image (busybox-static)
# nft (probes whether the kernel can run the NetworkPolicy enforcer) and openssl (Kueue's webhook certificate).
DEBIAN_PACKAGES := prometheus containerd runc containernetworking-plugins iproute2 buildah debootstrap busybox-static nftables chromium openssl

system-deps: ## Install the Debian packages that are missing (needs root or sudo)
	@missing=$$(for p in $(DEBIAN_PACKAGES); do dpkg-query -W -f '$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi
	@command -v go >/dev/null || { echo "Go >= 1.25 is required to build the local cluster: https://go.dev/dl" >&2; exit 1; }

$(STAMP): requirements-dev.txt $(addsuffix /pyproject.toml,$(DISTS))
	@command -v $(PY) >/dev/null || { echo "$(PY) not found: install Python 3.11 (or run make PY=python3.X)" >&2; exit 1; }
	[ -x $(BIN)/python ] || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	$(BIN)/pip install -q -r requirements-dev.txt $(addprefix -e ,$(patsubst operator,operator[runtime],$(DISTS)))
	rm -f $(VENV)/.installed-* && touch $@

dev: $(STAMP) ## Create .venv with every distribution installed editable

cluster-build: ## Fetch or build (once, cached) the control plane, kwok, helm, the real node's kubelet, CoreDNS, local-path provisioner, NetworkPolicy enforcer
	@bash cluster/src/statictrain_localcluster/build-binaries.sh >/dev/null
	@bash cluster/src/statictrain_localcluster/build-node.sh >/dev/null
	@bash cluster/src/statictrain_localcluster/build-netpol.sh >/dev/null

# Kueue publishes no manager binary: built from its Go module, for the tests only (make demo does not use it).
kueue-build: ## Build (once, cached) Kueue's manager for the tests that run Kueue
	@bash cluster/src/statictrain_localcluster/build-kueue.sh >/dev/null

images: $(STAMP) system-deps ## Build (cached) the real node's images (Dockerfile trainer, sidecar; busybox) and image store
	$(BIN)/python -m statictrain_localcluster.images

cluster-up: setup ## Start the local cluster (real control plane, kwok GPU nodes, Prometheus)
	$(BIN)/statictrain-cluster start

cluster-down: ## Stop the local cluster and remove its state
	$(BIN)/statictrain-cluster stop

cluster-status: ## Show the local cluster's status
	$(BIN)/statictrain-cluster status

test: setup kueue-build ## Run every test: unit, integration (real local cluster) and e2e
	@rc=0; $(BIN)/pytest $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure here" >&2; fi; exit $$rc

test-unit: $(STAMP) ## Run the unit tests only (no cluster)
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

lint: $(STAMP) ## ruff, mypy, the import-layer contracts, no import cycle, and the chart's checkers (helm lint, kubeconform, checkov)
	$(BIN)/ruff check .
	$(BIN)/mypy core/src cluster/src sidecar/src extender/src operator/src cli/src trainer/src bench
	$(BIN)/lint-imports
	$(BIN)/python -m statictrain_localcluster.importcycles
	$(BIN)/python -m statictrain_localcluster.chartlint

chart-crds: ## Copy crds/ into the chart (charts/statictrain/files/crds/, which its CRD template reads)
	rm -f charts/statictrain/files/crds/*.yaml
	cp crds/*.yaml charts/statictrain/files/crds/

demo: setup ## The whole loop on a local cluster: operator, training, cost report
	$(BIN)/python -m statictrain_localcluster.demo

.PHONY: help setup system-deps dev cluster-build kueue-build images cluster-up cluster-down cluster-status test test-unit lint chart-crds demo
