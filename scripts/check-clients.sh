#!/usr/bin/env bash
# Checks the committed OpenAPI document the way client generators and linters read it:
#   * redocly lint: 0 errors and 0 warnings;
#   * openapi-python-client generates a client from it, and that client takes, renews,
#     inspects (owner, metadata), lists and releases a lock on a running gateway (with an API key), and reads a hold
#     stream line by line into its HoldEvent model;
#   * openapi-typescript generates types from it, and scripts/clients/check.ts, written
#     against them, compiles with tsc --strict and does the same with fetch under node.
# The tools come from the registries on first use, into target/packaging-tools: @redocly/cli
# from npm, openapi-python-client from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS="${LOCKGATE_PACKAGING_TOOLS:-$PWD/target/packaging-tools}"
REDOCLY=2.77.0
OPENAPI_PYTHON_CLIENT=0.29.1
OPENAPI_TYPESCRIPT=7.13.0
TYPESCRIPT=5.9.3

for tool in npm node python3; do
  command -v "$tool" >/dev/null || { echo "check-clients: $tool is needed (Debian: apt-get install npm python3-venv)" >&2; exit 1; }
done
if [[ ! -x "$TOOLS/node/node_modules/.bin/redocly" || ! -x "$TOOLS/node/node_modules/.bin/openapi-typescript" || ! -x "$TOOLS/node/node_modules/.bin/tsc" ]]; then
  mkdir -p "$TOOLS/node"
  npm install --silent --no-audit --no-fund --prefix "$TOOLS/node" "@redocly/cli@$REDOCLY" \
    "openapi-typescript@$OPENAPI_TYPESCRIPT" "typescript@$TYPESCRIPT" >/dev/null
fi
if [[ ! -x "$TOOLS/client-venv/bin/openapi-python-client" ]]; then
  python3 -m venv "$TOOLS/client-venv"
  "$TOOLS/client-venv/bin/pip" install --quiet --disable-pip-version-check \
    "openapi-python-client==$OPENAPI_PYTHON_CLIENT"
fi
work="$(mktemp -d)"
server=""
cleanup() {
  if [[ -n "$server" ]]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "redocly lint openapi/openapi.json (0 errors, 0 warnings)"
lint="$("$TOOLS/node/node_modules/.bin/redocly" lint openapi/openapi.json 2>&1)" || { echo "$lint" >&2; exit 1; }
if ! grep -q "Your API description is valid" <<<"$lint" || grep -Eqi "[0-9]+ warnings?" <<<"$lint"; then
  echo "$lint" >&2
  exit 1
fi

echo "openapi-python-client generate, then use it against a gateway"
# Its one warning is expected: it has no reader for application/x-ndjson (the hold stream),
# whose lines the test below parses with the generated HoldEvent model.
(cd "$work" && "$TOOLS/client-venv/bin/openapi-python-client" generate \
  --path "$OLDPWD/openapi/openapi.json" --meta none --output-path lockgate_client >"$work/generate.log" 2>&1) \
  || { cat "$work/generate.log" >&2; exit 1; }
if grep -q "Unable to parse" "$work/generate.log"; then
  cat "$work/generate.log" >&2
  exit 1
fi

cargo build --locked --quiet --bin lockgate
# start_gateway LOG [VAR=VALUE...]: a --dev gateway on a free port, with those variables set;
# sets gateway_port and gateway_pid once it is ready.
start_gateway() {
  local log=$1
  shift
  gateway_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  env "$@" target/debug/lockgate --dev --listen "127.0.0.1:$gateway_port" 2>"$log" &
  gateway_pid=$!
  for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$gateway_port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
  done
}
key="client-test-key-0123456789"
start_gateway "$work/lockgate.log" \
  LOCKGATE_API_KEYS="[{\"name\": \"client\", \"key\": \"$key\", \"prefixes\": [\"gen:\"]}]"
port=$gateway_port
server=$gateway_pid

PYTHONPATH="$work" "$TOOLS/client-venv/bin/python" - "http://127.0.0.1:$port" "$key" <<'PY'
import json
import sys

from lockgate_client import AuthenticatedClient, Client
from lockgate_client.api.health import healthz
from lockgate_client.api.locks import acquire_lock, inspect_lock, list_locks, release_lock, renew_lock
from lockgate_client.models import AcquireBody, AcquireBodyMetadata, HoldEvent, LockEventBody, LockGrantBody, LockInfoBody, LockListBody, LockRenewalBody, Problem, RenewBody

base, key = sys.argv[1], sys.argv[2]
# Probes need no key: the plain Client serves them.
assert healthz.sync(client=Client(base_url=base)).status == "ok"
client = AuthenticatedClient(base_url=base, token=key)

metadata = AcquireBodyMetadata.from_dict({"addr": "10.0.0.7:8080"})
grant = acquire_lock.sync("gen:job", client=client, body=AcquireBody(ttl_ms=10_000, owner="worker-1", metadata=metadata))
assert isinstance(grant, LockGrantBody), grant
held = acquire_lock.sync("gen:job", client=client, body=AcquireBody())
assert isinstance(held, Problem) and held.type_.endswith("/lock-held"), held
renewal = renew_lock.sync("gen:job", client=client, body=RenewBody(ttl_ms=20_000), lock_token=grant.token)
assert isinstance(renewal, LockRenewalBody) and renewal.fence == grant.fence, renewal
info = inspect_lock.sync("gen:job", client=client)
assert isinstance(info, LockInfoBody) and info.held and info.fence == grant.fence, info
assert info.owner == "worker-1" and info.metadata.to_dict() == {"addr": "10.0.0.7:8080"}, info
page = list_locks.sync(client=client, prefix="gen:", limit=10)
assert isinstance(page, LockListBody) and [lock.name for lock in page.locks] == ["gen:job"], page
assert page.locks[0].owner == "worker-1", page
released = release_lock.sync_detailed("gen:job", client=client, lock_token=grant.token)
assert released.status_code == 204, released
gone = inspect_lock.sync("gen:job", client=client)
assert isinstance(gone, Problem) and gone.status == 404, gone

# The hold stream: one HoldEvent per line, read as it comes.
with client.get_httpx_client().stream("POST", "/locks/gen:held/hold", json={"ttl_ms": 3000}) as stream:
    assert stream.status_code == 200, stream.status_code
    lines = stream.iter_lines()
    first = HoldEvent.from_dict(json.loads(next(lines)))
    assert first.event == "acquired" and first.token, first
    second = HoldEvent.from_dict(json.loads(next(lines)))
    assert second.event == "renewed" and second.fence == first.fence, second

# The event stream: one LockEventBody per NDJSON line.
with client.get_httpx_client().stream("GET", "/locks/gen:watched/events", headers={"accept": "application/x-ndjson"}) as stream:
    assert stream.status_code == 200, stream.status_code
    lines = stream.iter_lines()
    state = LockEventBody.from_dict(json.loads(next(lines)))
    assert state.event == "state" and state.held is False, state
    taken = acquire_lock.sync("gen:watched", client=client, body=AcquireBody(owner="watched-owner"))
    acquired = LockEventBody.from_dict(json.loads(next(lines)))
    assert acquired.event == "acquired" and acquired.owner == "watched-owner" and acquired.fence == taken.fence, acquired

# A semaphore of two permits.
from lockgate_client.api.semaphores import acquire_permit, inspect_semaphore, release_permit, renew_permit
from lockgate_client.models import SemaphoreAcquireBody, SemaphoreInfoBody
permits = [acquire_permit.sync("gen:pool", client=client, body=SemaphoreAcquireBody(permits=2, owner=f"w{i}")) for i in range(2)]
assert all(isinstance(p, LockGrantBody) for p in permits) and permits[0].fence < permits[1].fence, permits
full = acquire_permit.sync("gen:pool", client=client, body=SemaphoreAcquireBody(permits=2))
assert isinstance(full, Problem) and full.type_.endswith("/lock-held"), full
mismatch = acquire_permit.sync("gen:pool", client=client, body=SemaphoreAcquireBody(permits=3))
assert isinstance(mismatch, Problem) and mismatch.type_.endswith("/permits-mismatch") and mismatch.permits == 2, mismatch
renewed = renew_permit.sync("gen:pool", client=client, body=RenewBody(ttl_ms=20_000), lock_token=permits[0].token)
assert isinstance(renewed, LockRenewalBody) and renewed.fence == permits[0].fence, renewed
seen = inspect_semaphore.sync("gen:pool", client=client)
assert isinstance(seen, SemaphoreInfoBody) and seen.permits == 2 and seen.in_use == 2, seen
assert sorted(h.owner for h in seen.holders) == ["w0", "w1"], seen
for p in permits:
    assert release_permit.sync_detailed("gen:pool", client=client, lock_token=p.token).status_code == 204
assert inspect_semaphore.sync("gen:pool", client=client).in_use == 0

# A read/write lock: two readers share it.
from lockgate_client.models import LockMode
readers = [acquire_lock.sync("gen:doc", client=client, body=AcquireBody(mode=LockMode.SHARED)) for _ in range(2)]
assert all(isinstance(r, LockGrantBody) for r in readers), readers
doc = inspect_lock.sync("gen:doc", client=client)
assert isinstance(doc, LockInfoBody) and doc.mode == LockMode.SHARED and len(doc.shared_holders) == 2, doc
writer = acquire_lock.sync("gen:doc", client=client, body=AcquireBody())
assert isinstance(writer, Problem) and writer.type_.endswith("/lock-held"), writer
for r in readers:
    assert release_lock.sync_detailed("gen:doc", client=client, lock_token=r.token).status_code == 204

# A multi-lock.
from lockgate_client.api.locks import acquire_locks, release_locks
from lockgate_client.models import MultiAcquireBody
both = acquire_locks.sync(client=client, body=MultiAcquireBody(names=["gen:b", "gen:a"]))
assert isinstance(both, LockGrantBody) and both.names == ["gen:a", "gen:b"], both
assert inspect_lock.sync("gen:b", client=client).fence == both.fence
gone = release_locks.sync_detailed(client=client, name=both.names, lock_token=both.token)
assert gone.status_code == 204, gone
print("generated client: acquire with owner, lock-held, renew, inspect, list, release, hold stream, event stream, semaphore, read/write lock, multi-lock: ok")
PY

echo "docs/api.md's Python example, as pasted, against a gateway without keys"
start_gateway "$work/lockgate-open.log"
open_port=$gateway_port
open_server=$gateway_pid
python3 - docs/api.md >"$work/docs_example.py" <<'PY'
import re
import sys

blocks = re.findall(r"```python\n(.*?)```", open(sys.argv[1]).read(), re.S)
examples = [block for block in blocks if "from lockgate_client import" in block]
assert len(examples) == 1, f"expected one generated-client example in docs/api.md, found {len(examples)}"
print(examples[0])
PY
(cd "$work" && env -u LOCKGATE_API_KEY LOCKGATE_GATEWAY="http://127.0.0.1:$open_port" \
  PYTHONPATH="$work" "$TOOLS/client-venv/bin/python" docs_example.py) \
  || { kill "$open_server"; exit 1; }
kill "$open_server"
wait "$open_server" 2>/dev/null || true

echo "openapi-typescript generate, tsc --strict, then use the types against the gateway"
mkdir -p "$work/ts"
"$TOOLS/node/node_modules/.bin/openapi-typescript" openapi/openapi.json -o "$work/ts/lockgate.d.ts" >"$work/ts/generate.log" 2>&1 \
  || { cat "$work/ts/generate.log" >&2; exit 1; }
cp scripts/clients/check.ts "$work/ts/check.ts"
cat >"$work/ts/tsconfig.json" <<'JSON'
{"compilerOptions": {"strict": true, "target": "es2022", "module": "commonjs", "lib": ["es2022", "dom"],
 "types": [], "outDir": "out", "skipLibCheck": true}, "files": ["check.ts"]}
JSON
"$TOOLS/node/node_modules/.bin/tsc" -p "$work/ts"
node "$work/ts/out/check.js" "http://127.0.0.1:$port" "$key"
echo "client checks passed"
