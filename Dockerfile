# syntax=docker/dockerfile:1
# One target per deployable; each image holds the shared core plus that
# deployable's own distribution and nothing else (the operator has no torch,
# the sidecar has no torch and no prophet).
#
#   docker build --target operator -t statictrain/operator .
#   docker build --target sidecar  -t statictrain/sidecar  .
#   docker build --target trainer  -t statictrain/trainer  .
#   docker build --target extender -t statictrain/extender .
#
# The base is pinned to an exact Python patch release and Debian suite; pin the
# digest too (PYTHON_IMAGE=python:3.11.13-slim-bookworm@sha256:...) in release builds.
# Any Debian-based image with python (3.11), python -m venv, apt-get and
# groupadd/useradd works: the local cluster builds on one it makes offline from
# Debian packages (statictrain_localcluster.images).
#
# The trainer is two layers on the runtime base: `torch` (torch, numpy and a C
# compiler for torch.compile, the same for every commit: built once per
# TORCH_VERSION and cached) and the project's own packages (small, per commit).
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm
ARG TORCH_VERSION=2.15.0

# ---------------------------------------------------------------- build stages
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY core/ core/
RUN python -m venv /opt/venv

FROM build AS build-operator
COPY operator/ operator/
RUN /opt/venv/bin/pip install --no-cache-dir ./core "./operator[runtime]"

FROM build AS build-sidecar
COPY sidecar/ sidecar/
RUN /opt/venv/bin/pip install --no-cache-dir ./core ./sidecar

FROM build AS build-extender
COPY extender/ extender/
RUN /opt/venv/bin/pip install --no-cache-dir ./core ./extender

# ---------------------------------------------------------------- runtime base
FROM ${PYTHON_IMAGE} AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/venv/bin:$PATH
RUN groupadd --gid 10001 statictrain \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin statictrain
WORKDIR /tmp

# ---------------------------------------------------------------- deployables
FROM runtime AS operator
COPY --from=build-operator /opt/venv /opt/venv
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["statictrain-operator"]

FROM runtime AS sidecar
COPY --from=build-sidecar /opt/venv /opt/venv
USER 10001:10001
EXPOSE 9400
ENTRYPOINT ["statictrain-sidecar"]

# torch.compile needs a C/C++ compiler at run time (inductor's CPU kernels, triton's launchers).
FROM runtime AS torch
ARG TORCH_VERSION
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends gcc g++ libc6-dev \
 && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/venv && /opt/venv/bin/pip install "torch==${TORCH_VERSION}" "numpy>=1.24"

FROM torch AS trainer
COPY core/ /src/core/
COPY trainer/ /src/trainer/
RUN /opt/venv/bin/pip install /src/core /src/trainer && rm -rf /src
USER 10001:10001
# The operator runs: statictrain-launch --module statictrain_trainer.main (torchrun's agent,
# flags from PET_* in the pod env; exits with the failing worker's own code).
ENTRYPOINT ["statictrain-launch", "--module", "statictrain_trainer.main"]

FROM runtime AS extender
COPY --from=build-extender /opt/venv /opt/venv
USER 10001:10001
ENTRYPOINT ["statictrain-extender"]
