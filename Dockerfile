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
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

# ---------------------------------------------------------------- build stages
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY core/ core/
RUN python -m venv /opt/venv

FROM build AS build-operator
COPY operator/ operator/
RUN /opt/venv/bin/pip install --no-cache-dir ./core ./operator

FROM build AS build-sidecar
COPY sidecar/ sidecar/
RUN /opt/venv/bin/pip install --no-cache-dir ./core ./sidecar

FROM build AS build-trainer
COPY trainer/ trainer/
RUN /opt/venv/bin/pip install --no-cache-dir ./core ./trainer

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

FROM runtime AS trainer
COPY --from=build-trainer /opt/venv /opt/venv
USER 10001:10001
# The operator runs: torchrun --module statictrain_trainer.main (with PET_* from the pod env).
ENTRYPOINT ["torchrun", "--module", "statictrain_trainer.main"]

FROM runtime AS extender
COPY --from=build-extender /opt/venv /opt/venv
USER 10001:10001
ENTRYPOINT ["statictrain-extender"]
