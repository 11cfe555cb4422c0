#!/usr/bin/env bash
# Builds the release binary the image ships, fully static, and copies it to DEST:
#
# * glibc linked in (`-C target-feature=+crt-static`), for the build machine's own target
#   named with --target, so that it applies to the binary and not to build scripts and proc
#   macros (which cannot be static); glibc's `files` and `dns` name lookups are built into it
#   (glibc 2.34 and later), which is all a container resolves names with;
# * getrandom told to call getrandom(2) itself (`getrandom_backend="linux_getrandom"`): it
#   finds the C library's function with dlsym, which a static binary cannot, and would read
#   /dev/urandom instead.
#
# .cargo/config.toml still applies (the allocator's settings; the link of link/cc.sh on
# x86_64). The Dockerfile runs this; scripts/check-static-binary.sh checks what it builds.
#
# Usage: scripts/build-static.sh DEST   (the target directory is CARGO_TARGET_DIR, or target/)
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:?usage: scripts/build-static.sh DEST}
host=$(rustc -vV | sed -n 's/^host: //p')
cargo build --release --locked --quiet --bin lockgate --target "$host" \
    --config "target.$host.rustflags=[\"-C\", \"target-feature=+crt-static\", \"--cfg\", \"getrandom_backend=\\\"linux_getrandom\\\"\"]"
install -D -m 0755 "${CARGO_TARGET_DIR:-target}/$host/release/lockgate" "$dest"
