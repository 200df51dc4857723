# expect: oci-labels
# The smallest Dockerfile the policy accepts; each bad_*.Dockerfile breaks one rule of it.
ARG IMAGE=debian:12-slim@sha256:0000000000000000000000000000000000000000000000000000000000000000
FROM ${IMAGE} AS build
RUN echo built > /prog

FROM ${IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
ARG SOURCE_URL=unset
ARG LICENSES=NOASSERTION
LABEL org.opencontainers.image.title="t" \
      org.opencontainers.image.description="d" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /prog /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/prog"]
