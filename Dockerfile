# Static image of capmox-controller. Built with `make image` (needs a Docker
# engine, which the project's CI machines do not have; the release pipeline
# builds it).
FROM docker.io/library/rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
RUN cargo build --release --locked --target x86_64-unknown-linux-musl -p capmox-controller --bin capmox-controller

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/target/x86_64-unknown-linux-musl/release/capmox-controller /capmox-controller
USER 65532:65532
ENTRYPOINT ["/capmox-controller"]
