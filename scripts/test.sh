#!/usr/bin/env bash
# Runs lockgate's whole test suite (unit, in-process API, end-to-end against real Redis).
#
# The end-to-end tests start their own redis-server processes on free ports, so Redis must be
# installed but need not run. When redis-server is missing this script installs it with
# apt-get (as root or with passwordless sudo); where it cannot, it stops with one line saying
# what to install. Extra arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."

install_redis() {
    local sudo=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo="sudo -n"
        else
            echo "error: redis-server is missing and installing it needs root: run 'sudo apt-get install redis-server', then this script again" >&2
            exit 1
        fi
    fi
    echo "redis-server is missing; installing it with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! $sudo apt-get install -y -qq redis-server >/dev/null 2>&1; then
        $sudo apt-get update -qq >/dev/null
        $sudo apt-get install -y -qq redis-server >/dev/null
    fi
}

if ! command -v redis-server >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        install_redis
    elif command -v brew >/dev/null 2>&1; then
        brew install redis >/dev/null
    else
        echo "error: redis-server is not installed and this machine has neither apt-get nor brew: install Redis 7 or later, then run this script again" >&2
        exit 1
    fi
fi

exec cargo test --locked "$@"
