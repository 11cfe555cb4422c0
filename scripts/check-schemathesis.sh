#!/usr/bin/env bash
# Checks that the OpenAPI document says exactly what the server accepts: schemathesis (pinned,
# from PyPI) runs every check over the examples, coverage and fuzzing phases against a gateway
# on a real redis-server, with the document that gateway serves, and must find 0 failures.
# The few rules Open API cannot state are allowed per operation in schemathesis.toml, each
# with its reason, and scripts/schemathesis_hooks.py leaves out bodies over the one limit JSON
# Schema cannot state (metadata's 1024 bytes). The gateway runs with a short --max-wait and --max-hold so that waits and
# hold streams (which otherwise last as long as the client keeps them) end within seconds; and
# since the 503s allowed there must be by design (insufficient-replicas), the gateway must
# report no backend error at the end. Its answers may take up to 10 s before their first byte
# (a `WAIT` of `replica_timeout_ms`, at most 10000, then --max-wait): schemathesis waits 15 s.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS="${LOCKGATE_PACKAGING_TOOLS:-$PWD/target/packaging-tools}"
SCHEMATHESIS=4.32.5
BINARY=target/debug/lockgate

command -v redis-server >/dev/null || { echo "check-schemathesis: redis-server is needed (scripts/test.sh installs it)" >&2; exit 1; }
[[ -x "$BINARY" ]] || cargo build --quiet --locked
if [[ ! -x "$TOOLS/schemathesis-venv/bin/schemathesis" ]]; then
  python3 -m venv "$TOOLS/schemathesis-venv"
  "$TOOLS/schemathesis-venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS"
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
work="$(mktemp -d)"
redis="" gateway=""
cleanup() {
  for pid in $gateway $redis; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
redis=$!
gateway_port=$(free_port)
"$BINARY" --redis-url "redis://127.0.0.1:$redis_port" --listen "127.0.0.1:$gateway_port" \
  --max-wait 1s --max-hold 2s >"$work/gateway.log" 2>&1 &
gateway=$!
base="http://127.0.0.1:$gateway_port"
for _ in $(seq 100); do
  curl -sf "$base/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -sf "$base/openapi.json" >"$work/openapi.json"

PYTHONPATH="$PWD/scripts" SCHEMATHESIS_HOOKS=schemathesis_hooks \
  "$TOOLS/schemathesis-venv/bin/schemathesis" run "$work/openapi.json" --url "$base" \
  --checks all --phases examples,coverage,fuzzing --max-examples 20 --seed 1 \
  --request-timeout 15 --no-color

errors=$(curl -sf "$base/metrics" | awk '/^lockgate_backend_errors_total/ && $NF != 0')
if [[ -n "$errors" ]]; then
  echo "check-schemathesis: the gateway met backend errors during the run:" >&2
  echo "$errors" >&2
  exit 1
fi
echo "check-schemathesis: 0 failures, no backend error"
