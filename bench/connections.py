#!/usr/bin/env python3
"""How many connections one gateway holds to Redis, in every mode, measured.

For each mode (a single Redis, Sentinel, Cluster, Redlock) this starts private redis-server
processes on free ports and one lockgate, then counts the gateway's connections on every node
with CLIENT LIST (the asking connection left out) in these states:

  idle        after one lock cycle (acquire, release)
  waiting     while one request waits for a held lock (wait_ms)
  lingered    after the wait ended and --pubsub-linger (1 s here) passed
  20 WAITs    while 20 acquires with "replicas": 1 run at once (WAIT on dedicated connections)

Usage: bench/connections.py [path to lockgate, default target/release/lockgate]
Needs: redis-server, redis-cli. Prints a Markdown table (docs/runbook.md quotes it).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

LOCKGATE = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/release/lockgate")
WORK = tempfile.mkdtemp(prefix="lockgate-connections-")
PROCS = []


def free_port():
    # Below 55535: a cluster node also listens on its port + 10000 (the cluster bus).
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 55535:
            return port


def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True,
                          check=True).stdout


def start_redis(*extra):
    port = free_port()
    directory = os.path.join(WORK, str(port))
    os.makedirs(directory)
    PROCS.append(subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", directory, "--repl-diskless-sync-delay", "0", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    until(lambda: subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                                 text=True).stdout.strip() == "PONG", f"redis on {port}")
    return port


def start_sentinel(master):
    port = free_port()
    conf = os.path.join(WORK, f"sentinel-{port}.conf")
    with open(conf, "w") as f:
        f.write(f"port {port}\nbind 127.0.0.1\nsentinel monitor m 127.0.0.1 {master} 1\n")
    PROCS.append(subprocess.Popen(["redis-server", conf, "--sentinel"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL))
    until(lambda: subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                                 text=True).stdout.strip() == "PONG", f"sentinel on {port}")
    return port


def until(check, what, deadline=20):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.05)
    sys.exit(f"error: {what} not within {deadline} s")


def clients(port):
    """The gateway's connections on the node at `port`: every client but this one, and but
    the Sentinel's own (named sentinel-*)."""
    lines = cli(port, "client", "list").splitlines()
    return sum(1 for line in lines if "cmd=client|list" not in line and " name=sentinel-" not in line)


def request(gateway, method, path, body=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{gateway}{path}", data=data, method=method,
                                 headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as err:
        return err.code, None


def measure(mode, args, nodes):
    gateway = free_port()
    log = open(os.path.join(WORK, f"lockgate-{mode}.log"), "w")
    proc = subprocess.Popen([LOCKGATE, *args, "--listen", f"127.0.0.1:{gateway}",
                             "--pubsub-linger", "1s"], stderr=log, stdout=subprocess.DEVNULL)
    PROCS.append(proc)
    until(lambda: request(gateway, "GET", "/readyz")[0] == 200, f"{mode} gateway ready")

    def count():
        return [clients(port) for _, port in nodes]

    def settled(expect=None):
        # Counts move while connections open and close: the same figures twice, 300 ms apart.
        previous = None
        for _ in range(60):
            now = count()
            if now == previous and (expect is None or expect(now)):
                return now
            previous = now
            time.sleep(0.3)
        return now

    status, grant = request(gateway, "POST", "/locks/conn")
    assert status == 201, status
    request(gateway, "DELETE", "/locks/conn", headers={"lock-token": grant["token"]})
    idle = settled()

    status, held = request(gateway, "POST", "/locks/conn", {"ttl_ms": 30000})
    assert status == 201, status
    waiter = threading.Thread(target=request,
                              args=(gateway, "POST", "/locks/conn", {"wait_ms": 20000}))
    waiter.start()
    waiting = settled(lambda now: sum(now) > sum(idle))
    request(gateway, "DELETE", "/locks/conn", headers={"lock-token": held["token"]})
    waiter.join()
    # The waiter's grant is left to expire: nothing waits any more.
    time.sleep(1.5)
    lingered = settled()

    peak = [0] * len(nodes)
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[:] = [max(a, b) for a, b in zip(peak, count())]
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    threads = [threading.Thread(target=request, args=(
        gateway, "POST", f"/locks/wait-{i}",
        {"ttl_ms": 5000, "replicas": 1, "replica_timeout_ms": 300})) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    sampler.join()
    proc.terminate()
    proc.wait()
    for (node, _), i, w, l, p in zip(nodes, idle, waiting, lingered, peak):
        print(f"| {mode} | {node} | {i} | {w} | {l} | {p} |", flush=True)


def main():
    for tool in ("redis-server", "redis-cli"):
        if not shutil.which(tool):
            sys.exit(f"error: {tool} is not installed")
    print("| mode | node | idle | waiting | lingered | 20 WAITs |")
    print("|---|---|---:|---:|---:|---:|")

    single = start_redis()
    measure("redis", ["--redis-url", f"redis://127.0.0.1:{single}"], [("the server", single)])

    master = start_redis()
    sentinel = start_sentinel(master)
    measure("sentinel", ["--sentinel", f"redis://127.0.0.1:{sentinel}", "--sentinel-master", "m"],
            [("master", master), ("sentinel", sentinel)])

    cluster = [start_redis("--cluster-enabled", "yes", "--cluster-config-file",
                           os.path.join(WORK, f"nodes-{i}.conf")) for i in range(3)]
    subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in cluster],
                    "--cluster-yes"], capture_output=True, check=True)
    until(lambda: all("cluster_state:ok" in cli(p, "cluster", "info") for p in cluster),
          "cluster ok")
    measure("cluster", ["--cluster", ",".join(f"redis://127.0.0.1:{p}" for p in cluster)],
            [(f"master {i + 1}", p) for i, p in enumerate(cluster)])

    redlock = [start_redis() for _ in range(3)]
    measure("redlock", ["--redlock", ",".join(f"redis://127.0.0.1:{p}" for p in redlock)],
            [(f"node {i + 1}", p) for i, p in enumerate(redlock)])


try:
    main()
finally:
    for proc in PROCS:
        proc.terminate()
    for proc in PROCS:
        proc.wait()
    shutil.rmtree(WORK, ignore_errors=True)
