#!/usr/bin/env python3
"""Writes link/hot-functions.txt: the functions a release build of lockgate runs to start,
serve a lock cycle, a blocking wait, an inspect, the probes and a metrics scrape, in the
order it first runs them, named as they demangle without hashes. link/cc.sh lays them out
first in the release binary (why: there, and bench/README.md, "What the speed work buys").

Run it again when a change moves what the gateway runs at start or per request (a new
dependency, a reworked request path); a stale list costs idle RSS, never correctness.

Usage: scripts/hot-functions.py          (needs valgrind, redis-server, c++filt, nm, readelf)
"""

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from bisect import bisect_right
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIST = ROOT / "link" / "hot-functions.txt"
TARGET = ROOT / "target" / "hot-functions"
BINARY = TARGET / "release" / "lockgate"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port: int, method: str, path: str, body: bytes = b"", headers=None):
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=body or None, method=method, headers=headers or {}
    )
    if body:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def exercise(port: int) -> None:
    """Start-up, then what a client of the sidecar, its probes and its scraper do most."""
    deadline = time.monotonic() + 120
    while True:
        try:
            if request(port, "GET", "/readyz")[0] == 200:
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            sys.exit("error: the gateway did not become ready under valgrind")
        time.sleep(0.5)
    import json

    status, body = request(port, "POST", "/locks/hot", b'{"ttl_ms": 60000}')
    assert status == 201, (status, body)
    token = json.loads(body)["token"]
    assert request(port, "PATCH", "/locks/hot", b"{}", {"Lock-Token": token})[0] == 200
    assert request(port, "GET", "/locks/hot")[0] == 200
    # A blocking acquire, woken by the release.
    import threading

    waited = {}
    waiter = threading.Thread(
        target=lambda: waited.update(
            answer=request(port, "POST", "/locks/hot", b'{"wait_ms": 60000}')
        )
    )
    waiter.start()
    time.sleep(2)
    assert request(port, "DELETE", "/locks/hot", headers={"Lock-Token": token})[0] == 204
    waiter.join()
    status, body = waited["answer"]
    assert status == 201, (status, body)
    token = json.loads(body)["token"]
    assert request(port, "DELETE", "/locks/hot", headers={"Lock-Token": token})[0] == 204
    # As curl users take a lock most often: no body at all.
    status, body = request(port, "POST", "/locks/curl")
    assert status == 201, (status, body)
    token = json.loads(body)["token"]
    assert request(port, "DELETE", "/locks/curl", headers={"Lock-Token": token})[0] == 204
    # What the kubelet and Prometheus ask every few seconds.
    assert request(port, "GET", "/healthz")[0] == 200
    assert request(port, "GET", "/metrics")[0] == 200


def run(*args: str, **kwargs) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, **kwargs).stdout


def key(name: str) -> str:
    """As link/cc.sh keys a symbol: demangled, without crate hashes, legacy hashes and the
    suffixes LTO adds."""
    name = re.sub(r"\.llvm\.[0-9]+$", "", name)
    name = re.sub(r" \[clone \.llvm\.[0-9]+\]$", "", name)
    name = re.sub(r"\[[0-9a-f]+\]", "", name)
    return re.sub(r"::h[0-9a-f]{16}$", "", name)


def main() -> None:
    for tool in ("valgrind", "redis-server", "c++filt", "nm", "readelf"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode:
            sys.exit(f"error: {tool} is not installed")
    # Symbols kept (the release profile strips them); the list is keyed without hashes, so the
    # profile difference does not matter.
    env = dict(os.environ, CARGO_PROFILE_RELEASE_STRIP="none", CARGO_TARGET_DIR=str(TARGET))
    subprocess.run(
        ["cargo", "build", "--release", "--locked", "--bin", "lockgate"], cwd=ROOT, env=env, check=True
    )

    with tempfile.TemporaryDirectory() as work:
        redis_port, port = free_port(), free_port()
        redis = subprocess.Popen(
            ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", work],
            stdout=subprocess.DEVNULL,
        )
        log = Path(work) / "lackey.log"
        gateway = subprocess.Popen(
            ["valgrind", "--tool=lackey", "--trace-superblocks=yes", f"--log-file={log}",
             str(BINARY), "--redis-url", f"redis://127.0.0.1:{redis_port}",
             "--listen", f"127.0.0.1:{port}"],
            stderr=subprocess.DEVNULL,
        )
        try:
            exercise(port)
        finally:
            gateway.send_signal(signal.SIGTERM)
            gateway.wait(timeout=120)
            redis.terminate()
            redis.wait()
        blocks = [int(line.split()[1], 16) for line in log.open() if line.startswith("SB ")]

    entry = int(re.search(r"Entry point address:\s+(0x[0-9a-f]+)", run("readelf", "-h", str(BINARY))).group(1), 16)
    code = next(
        (int(f[2], 16), int(f[2], 16) + int(f[5], 16))
        for f in (line.split() for line in run("readelf", "-lW", str(BINARY)).splitlines())
        if f and f[0] == "LOAD" and "E" in f[6:-1]
    )
    # Where valgrind loaded the binary: of the offsets that put a block it ran at the entry
    # point, the one under which most blocks fall in the binary's code.
    ran = sorted(set(blocks))
    base = max(
        {a - entry for a in ran if a >= entry and (a - entry) % 4096 == 0},
        key=lambda b: bisect_right(ran, b + code[1]) - bisect_right(ran, b + code[0]),
    )
    symbols = sorted(
        (int(f[0], 16), int(f[1], 16), f[3])
        for f in (line.split(" ", 3) for line in run("nm", "--defined-only", "-S", str(BINARY)).splitlines())
        if len(f) == 4 and f[2] in "tTwW"
    )
    starts = [s[0] for s in symbols]
    order, seen = [], set()
    for block in blocks:
        address = block - base
        if not code[0] <= address < code[1]:
            continue
        i = bisect_right(starts, address) - 1
        if i >= 0 and address < symbols[i][0] + max(symbols[i][1], 1) and symbols[i][2] not in seen:
            seen.add(symbols[i][2])
            order.append(symbols[i][2])
    demangled = run("c++filt", input="\n".join(order) + "\n").splitlines()
    keys = list(dict.fromkeys(key(name) for name in demangled))
    LIST.write_text(
        "# Written by scripts/hot-functions.py; read by link/cc.sh. One function a line, in the\n"
        "# order the gateway first runs it, demangled without hashes.\n" + "\n".join(keys) + "\n"
    )
    size = sum(s[1] for s in symbols if s[2] in seen)
    print(f"{LIST.relative_to(ROOT)}: {len(keys)} functions, {size // 1024} KiB of code")


if __name__ == "__main__":
    main()
