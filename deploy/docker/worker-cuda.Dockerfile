# syntax=docker/dockerfile:1
# baton-worker-cuda: baton-worker, baton-trainer (built against pytorch.org's CUDA LibTorch
# through the Bazel path: --repo_env=LIBTORCH_HOME, --repo_env=CUDA_HOME), the baton CLI and
# make_mnist.
#   docker build -f deploy/docker/worker-cuda.Dockerfile -t baton-worker-cuda .
# Needs the NVIDIA driver on the node and the NVIDIA container toolkit (or the Kubernetes
# device plugin), which mount the driver's libraries into the container.
#
# Why Debian 12 with NVIDIA's Debian 12 CUDA repository, not an nvidia/cuda base image:
# the programs link Debian 12's Abseil (20220623), gRPC (1.51), protobuf (3.21), re2 and
# glibc 2.36 -- the only versions Baton builds with offline (Debian's bazel-bootstrap and
# Debian-packaged Bazel rules). nvidia/cuda's runtime images are Ubuntu (22.04: glibc 2.35,
# Abseil 20210324, gRPC 1.30) or RHEL, where no package set satisfies those binaries, and
# no Debian-based nvidia/cuda image is published. An nvidia/cuda runtime image is Ubuntu
# plus packages from NVIDIA's apt repository; this image is Debian 12 plus the same
# packages from the same vendor's Debian 12 repository (its key checked by fingerprint in
# build_stage.sh), so the build stage and the runtime share one ABI.
#
# LibTorch's CUDA zip bundles its own CUDA libraries (cuBLAS, cuDNN, ...); Baton's own
# CUDA code (device_cuda.cc, nccl_communicator.cc) links libcudart and libnccl, hence
# cuda-cudart and libnccl2 in the runtime. Keep CUDA_VERSION, NCCL_VERSION, the LibTorch
# zip's CUDA build (cuXY in the URL) and its checksum in step (README.md: version matrix).
#
# The base image is pinned by digest (deploy/docker/README.md: how to refresh it).
ARG DEBIAN_IMAGE=debian:12-slim@sha256:abd67ffcfa541b485a3dff59865ab629aa048a6c613e639d36e7456b0b229241
ARG CUDA_VERSION=12.4
ARG NCCL_VERSION=2.21.5-1

FROM ${DEBIAN_IMAGE} AS build
ARG CUDA_VERSION
ARG NCCL_VERSION
ARG LIBTORCH_URL=https://download.pytorch.org/libtorch/cu124/libtorch-cxx11-abi-shared-with-deps-2.4.1%2Bcu124.zip
ARG LIBTORCH_SHA256=ebedc318756dd12229644bf24a76434e1a20f7491be34df0a689f151440f0a0a
WORKDIR /src
COPY deploy/docker/build_stage.sh deploy/docker/build_stage.sh
RUN deploy/docker/build_stage.sh deps cuda \
 && deploy/docker/build_stage.sh cuda-repo "${CUDA_VERSION}" "${NCCL_VERSION}" \
 && deploy/docker/build_stage.sh libtorch "${LIBTORCH_URL}" "${LIBTORCH_SHA256}" /opt/libtorch \
 && rm -rf /var/lib/apt/lists/*
COPY . .
RUN BATON_BAZEL_FLAGS="--repo_env=LIBTORCH_HOME=/opt/libtorch --repo_env=CUDA_HOME=/usr/local/cuda-${CUDA_VERSION}" \
      deploy/docker/build_stage.sh build /out baton-worker baton-trainer baton make_mnist \
 && mkdir -p /out/libtorch \
 && cp -a /opt/libtorch/lib/*.so* /out/libtorch/

FROM ${DEBIAN_IMAGE}
ARG CUDA_VERSION
ARG NCCL_VERSION
ARG VERSION=dev
ARG REVISION=unknown
ARG SOURCE_URL=unset
ARG LICENSES=NOASSERTION
LABEL org.opencontainers.image.title="baton-worker-cuda" \
      org.opencontainers.image.description="Baton worker (CUDA): runs baton-trainer on NVIDIA GPUs with NCCL for the coordinator" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.licenses="${LICENSES}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /usr/share/keyrings/nvidia-cuda.gpg /usr/share/keyrings/nvidia-cuda.gpg
COPY --from=build /etc/apt/sources.list.d/nvidia-cuda.list /etc/apt/nvidia-cuda.list
# NVIDIA's repository is served over HTTPS: ca-certificates first, then the repository.
RUN cudart="cuda-cudart-$(echo "${CUDA_VERSION}" | tr . -)" \
 && nccl="libnccl2=${NCCL_VERSION}+cuda${CUDA_VERSION}" \
 && apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      tini ca-certificates \
      libabsl20220623 libc-ares2 libgrpc++1.51 libgrpc29 libprotobuf32 libre2-9 libssl3 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libyaml-cpp0.7 \
 && mv /etc/apt/nvidia-cuda.list /etc/apt/sources.list.d/ \
 && apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      "$cudart" "$nccl" \
 && rm -rf /var/lib/apt/lists/* \
 && install -d -o 65532 -g 65532 /var/lib/baton-worker
# The programs' RUNPATH holds /opt/libtorch/lib (third_party/torch.bzl).
COPY --from=build /out/libtorch/ /opt/libtorch/lib/
COPY --from=build /out/baton-worker /out/baton-trainer /out/baton /out/make_mnist /usr/local/bin/
WORKDIR /var/lib/baton-worker
# What the NVIDIA container toolkit reads to mount the driver (as nvidia/cuda images set).
ENV HOME=/tmp \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
USER 65532:65532
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/baton-worker"]
