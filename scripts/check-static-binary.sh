#!/usr/bin/env bash
# Checks the binary the image ships (Dockerfile): statically linked glibc, run where nothing
# but that binary and the files of a distroless `static` image exist (a chroot), finds Redis
# by a name in /etc/hosts and by a name only DNS knows, serves a lock, and checks itself.
#
# A static glibc binary looks names up with the `files` and `dns` sources built into it
# (glibc 2.34 and later); what it cannot do without the shared libraries of its glibc is load
# other NSS modules (mdns, ldap, systemd's resolve), which no container image configures. This
# script shows the two sources working in an empty root, the way a pod's are: its
# /etc/resolv.conf pointing at a DNS server (here scripts/dns-stub.py on 127.0.0.1:53), its
# /etc/hosts.
#
# Builds the binary as the Dockerfile does (scripts/build-static.sh; its own target
# directory: about 6 minutes cold).
# The run from an empty root needs root (chroot, port 53), redis-server, curl, python3;
# without them it says what is missing and checks only the linking. scripts/check-packaging.sh
# (CI) runs it.
#
# Usage: scripts/check-static-binary.sh
set -euo pipefail
cd "$(dirname "$0")/.."

binary=${CARGO_TARGET_DIR:-target}/static-check/lockgate
scripts/build-static.sh "$binary"

fail() { echo "check-static-binary: FAILED: $*" >&2; exit 1; }
if readelf -l "$binary" | grep -q INTERP || readelf -d "$binary" | grep -q NEEDED; then
    fail "$binary is dynamically linked: $(readelf -d "$binary" | grep NEEDED | tr -s ' ')"
fi
echo "check-static-binary: $binary is statically linked"

skip() { echo "check-static-binary: not run from an empty root: $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root (chroot, a DNS server on port 53)"
for tool in redis-server curl python3 chroot mknod; do
    command -v "$tool" >/dev/null || skip "$tool is not installed"
done

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# The root: the binary, and what distroless/static-debian12 has in /etc but its CA bundle, as a
# pod sees it (Kubernetes writes resolv.conf and hosts into every container).
root=$work/root
mkdir -p "$root/etc" "$root/tmp" "$root/dev"
# The devices every container runtime makes (OCI runtime spec, "Default Devices").
mknod -m 666 "$root/dev/null" c 1 3
mknod -m 666 "$root/dev/zero" c 1 5
mknod -m 666 "$root/dev/random" c 1 8
mknod -m 666 "$root/dev/urandom" c 1 9
cp "$binary" "$root/lockgate"
echo "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin" >"$root/etc/passwd"
echo "hosts: files dns" >"$root/etc/nsswitch.conf"
echo "nameserver 127.0.0.1" >"$root/etc/resolv.conf"
printf '127.0.0.1 localhost\n127.0.0.1 redis-by-hosts.lockgate.test\n' >"$root/etc/hosts"
# No CA bundle (distroless `static` has one, `scratch` has none): Redis over plain TCP and
# `lockgate healthcheck` of a plain-HTTP gateway need none.

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$work" --logfile "$work/redis.log" &
pids+=($!)
python3 scripts/dns-stub.py 127.0.0.1 53 redis-by-dns.lockgate.test \
    >"$work/dns.out" 2>"$work/dns.log" &
pids+=($!)
for _ in $(seq 100); do
    grep -q ready "$work/dns.out" 2>/dev/null && break
    sleep 0.05
done
grep -q ready "$work/dns.out" || fail "the DNS stub did not start: $(cat "$work/dns.log")"

# Serves a lock through a gateway in the root whose Redis is `host`; its log in $work.
serve_through() {
    local host=$1 port
    port=$(free_port)
    chroot "$root" /lockgate --redis-url "redis://$host:$redis_port" \
        --listen "127.0.0.1:$port" >"$work/$host.log" 2>&1 &
    pids+=($!)
    local ready=false
    for _ in $(seq 100); do
        curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && { ready=true; break; }
        sleep 0.1
    done
    "$ready" || fail "the gateway with Redis at $host did not become ready; log: $(cat "$work/$host.log")"
    local status
    status=$(curl -s -o "$work/$host.json" -w '%{http_code}' -X POST \
        "http://127.0.0.1:$port/locks/static-check:$host" -d '{"ttl_ms": 5000}' || true)
    [ "$status" = 201 ] || fail "acquire through $host answered $status: $(cat "$work/$host.json"); log: $(cat "$work/$host.log")"
    chroot "$root" /lockgate healthcheck --gateway "http://127.0.0.1:$port" >/dev/null \
        || fail "lockgate healthcheck in the root failed for the gateway on $host"
    echo "check-static-binary: a lock served with Redis at $host (from an empty root)"
}

serve_through redis-by-hosts.lockgate.test
serve_through redis-by-dns.lockgate.test
grep -q "answered" "$work/dns.log" || fail "redis-by-dns.lockgate.test was not looked up through DNS"
echo "check-static-binary: /etc/hosts and DNS lookups work without glibc's shared libraries"
