# syntax=docker/dockerfile:1
# baton-coordinator: the coordinator daemon alone on Debian 12 slim, with only the shared
# libraries it links (no LibTorch, no Python; //deploy:docker_runtime_libs_test checks the
# package list below against the binary's DT_NEEDED entries).
#   docker build -f deploy/docker/coordinator.Dockerfile -t baton-coordinator .
# Runs as 65532:65532 with a read-only root file system: its only writes go to --state_dir
# (a volume at /var/lib/baton; the default, ./baton-state, is relative to this WORKDIR).
#
# The base image is pinned by digest (deploy/docker/README.md: how to refresh it).
ARG DEBIAN_IMAGE=debian:12-slim@sha256:abd67ffcfa541b485a3dff59865ab629aa048a6c613e639d36e7456b0b229241

FROM ${DEBIAN_IMAGE} AS build
WORKDIR /src
COPY deploy/docker/build_stage.sh deploy/docker/build_stage.sh
RUN deploy/docker/build_stage.sh deps base \
 && rm -rf /var/lib/apt/lists/*
COPY . .
RUN deploy/docker/build_stage.sh build /out baton-coordinator

FROM ${DEBIAN_IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
ARG SOURCE_URL=unset
ARG LICENSES=NOASSERTION
LABEL org.opencontainers.image.title="baton-coordinator" \
      org.opencontainers.image.description="Baton coordinator: jobs, workers, scheduling and rendezvous for elastic LibTorch training" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.licenses="${LICENSES}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      tini ca-certificates \
      libabsl20220623 libc-ares2 libgrpc++1.51 libgrpc29 libprotobuf32 libre2-9 libssl3 \
      libsqlite3-0 libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libyaml-cpp0.7 \
 && rm -rf /var/lib/apt/lists/* \
 && install -d -o 65532 -g 65532 /var/lib/baton
COPY --from=build /out/baton-coordinator /usr/local/bin/
WORKDIR /var/lib/baton
ENV HOME=/tmp
USER 65532:65532
# gRPC, metrics, health-only (plaintext, for probes).
EXPOSE 7070 7071 7073
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/baton-coordinator"]
