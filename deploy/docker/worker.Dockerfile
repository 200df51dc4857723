# syntax=docker/dockerfile:1
# baton-worker (CPU): the worker daemon, baton-trainer (which it launches per rank, from the
# same directory), the baton CLI and make_mnist, on Debian 12 slim with Debian's LibTorch
# (libtorch1.13) and Python torch (python3-torch) for torchrun-style jobs.
#   docker build -f deploy/docker/worker.Dockerfile -t baton-worker .
# Runs as 65532:65532 with a read-only root file system: the worker writes only under
# --work_dir (a volume at /var/lib/baton-worker; the default, ./baton-worker, is relative
# to this WORKDIR) and training processes under the job's paths and /tmp (an emptyDir).
#
# The base image is pinned by digest (deploy/docker/README.md: how to refresh it).
ARG DEBIAN_IMAGE=debian:12-slim@sha256:abd67ffcfa541b485a3dff59865ab629aa048a6c613e639d36e7456b0b229241

FROM ${DEBIAN_IMAGE} AS build
WORKDIR /src
COPY deploy/docker/build_stage.sh deploy/docker/build_stage.sh
RUN deploy/docker/build_stage.sh deps cpu \
 && rm -rf /var/lib/apt/lists/*
COPY . .
RUN deploy/docker/build_stage.sh build /out baton-worker baton-trainer baton make_mnist

FROM ${DEBIAN_IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
ARG SOURCE_URL=unset
ARG LICENSES=NOASSERTION
LABEL org.opencontainers.image.title="baton-worker" \
      org.opencontainers.image.description="Baton worker (CPU): runs baton-trainer and torchrun-style training processes for the coordinator" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.licenses="${LICENSES}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
# libopenblas0-pthread: LibTorch's BLAS through Debian's alternatives (the reference BLAS
# is much slower); python3-torch: torchrun-style jobs.
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      tini ca-certificates \
      libabsl20220623 libc-ares2 libgrpc++1.51 libgrpc29 libprotobuf32 libre2-9 libssl3 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libyaml-cpp0.7 \
      libtorch1.13 libopenblas0-pthread python3 python3-torch \
 && rm -rf /var/lib/apt/lists/* \
 && install -d -o 65532 -g 65532 /var/lib/baton-worker
COPY --from=build /out/baton-worker /out/baton-trainer /out/baton /out/make_mnist /usr/local/bin/
WORKDIR /var/lib/baton-worker
ENV HOME=/tmp
USER 65532:65532
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/baton-worker"]
