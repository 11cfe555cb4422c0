# syntax=docker/dockerfile:1
# lockgate: build with the Rust toolchain, run the binary alone on distroless static (a fully
# static binary: glibc linked in, no shell, no shared library).
#   docker build -t lockgate .
#   (the commit and date for `lockgate --version` and the image's labels, as the source here
#   has no .git: --build-arg LOCKGATE_BUILD_REVISION="$(git rev-parse --short=12 HEAD)"
#   --build-arg LOCKGATE_BUILD_CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)")
#   docker run --rm -p 7380:7380 -e LOCKGATE_LISTEN=0.0.0.0:7380 -e LOCKGATE_ALLOW_UNAUTHENTICATED=true lockgate --dev

FROM rust:1.95-bookworm AS build
# build.rs reads it (src/build_info.rs): `lockgate --version`, `lockgate_build_info`.
ARG LOCKGATE_BUILD_REVISION=unknown
WORKDIR /src
# Cargo needs every target the manifest names (the integration tests, the examples) and the
# workspace's other member (the simulated Redis of the tests, sim/redis).
COPY Cargo.toml Cargo.lock build.rs ./
# The allocator's settings and the release binary's link (.cargo/config.toml, link/cc.sh).
COPY .cargo ./.cargo
COPY link ./link
COPY src ./src
COPY tests ./tests
COPY examples ./examples
COPY sim ./sim
COPY scripts/build-static.sh ./scripts/
# jemalloc builds from C source with the image's cc and make; link/cc.sh uses its nm and c++filt.
# A fully static binary (glibc linked in): scripts/build-static.sh says how, and
# scripts/check-static-binary.sh runs what it builds in an empty root, with Redis found through
# /etc/hosts and through DNS (docs/operations.md, "The image").
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    scripts/build-static.sh /out/lockgate

FROM gcr.io/distroless/static-debian12:nonroot
ARG LOCKGATE_BUILD_REVISION=unknown
ARG LOCKGATE_BUILD_CREATED=unknown
LABEL org.opencontainers.image.title="lockgate" \
      org.opencontainers.image.description="An HTTP gateway to distributed locks kept in Redis" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.revision="${LOCKGATE_BUILD_REVISION}" \
      org.opencontainers.image.created="${LOCKGATE_BUILD_CREATED}"
COPY --from=build /out/lockgate /usr/local/bin/lockgate
# The distroless "nonroot" user (65532). The root filesystem can be mounted read-only:
# lockgate writes nothing to disk.
USER 65532:65532
EXPOSE 7380
# No curl in the image: the binary checks itself (LOCKGATE_GATEWAY if not the default address).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/lockgate", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/lockgate"]
