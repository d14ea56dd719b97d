# The manager's image, for those with a container engine. `make image`
# builds the same image without one (docs/image.md): both lay out the root
# filesystem with scripts/image-rootfs.sh (the C runtime and CA certificates
# from Debian's packages, /etc/passwd with nonroot 65532, no shell, the
# binary as /capmox-controller) and set the same user, entrypoint and labels.
#
#   docker build --build-arg VERSION=v0.1.0 -t ghcr.io/capmox-rs/capmox-controller:v0.1.0 .
FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p capmox-controller --bin capmox-controller

# Debian bookworm, as the build stage: the binary links against this glibc.
FROM docker.io/library/debian:bookworm-slim AS rootfs
RUN apt-get update
COPY scripts/image-rootfs.sh /image-rootfs.sh
COPY --from=build /src/target/release/capmox-controller /capmox-controller
RUN /image-rootfs.sh /rootfs /capmox-controller

FROM scratch
ARG VERSION=v0.1.0
COPY --from=rootfs /rootfs/ /
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/capmox-controller"]
LABEL org.opencontainers.image.title="capmox-controller" \
      org.opencontainers.image.description="Cluster API infrastructure provider for Proxmox VE, across datacenters" \
      org.opencontainers.image.source="https://github.com/capmox-rs/cluster-api-provider-proxmox" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
