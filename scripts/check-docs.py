#!/usr/bin/env python3
"""Runs every shell example of README.md and docs/*.md as written, against `lockgate --dev`.

Each file gets a fresh gateway (an empty in-process store) and one `sh -e` session: its ```sh
blocks run in order, as a reader pasting them one after the other would, so a variable set in
one block (TOKEN=...) is there in the next. The only prelude is what a reader already has:

  * the gateway's address: `localhost:7380` in an example is the port of this check's gateway
    (curl's arguments are rewritten; `lockgate run` gets LOCKGATE_GATEWAY);
  * Ctrl-C: a streaming curl (`-N`) is cut after a few seconds, as a reader would stop it.

What an example must do:

  * every command succeeds (`sh -e`), and every curl answers 2xx, unless the line's trailing
    comment starts with the status it shows: `curl ... # 404 now`, `# 503 on --dev ...`;
  * a sample answer written as a comment under a command (`# {"name":...}`) is checked: every
    field it names ("name":) appears in that command's answer. A sample that is only a sketch
    says so: `# illustrative: {...}` is not checked.

Blocks that cannot run here (they build, install, or start a server against infrastructure
the reader has and CI does not: Docker, Kubernetes, a Sentinel group at s1:26379) are marked
just above the fence, with the reason, and reported as skipped:

  <!-- docs-check: skip (starts a server on your Redis) -->

Usage: scripts/check-docs.py [FILE.md ...]   (default: README.md docs/*.md). Needs curl and a
built `target/debug/lockgate` (the README's test command builds it).
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "debug" / "lockgate"
BLOCK_TIMEOUT_S = 60
STREAM_CUT_S = 3

SKIP = re.compile(r"<!--\s*docs-check:\s*skip\s*\((?P<reason>[^)]*)\)\s*-->")
STATUS_COMMENT = re.compile(r"#\s*(?P<status>[1-5]\d\d)\b")
SAMPLE = re.compile(r"^\s*#\s*(?P<illustrative>illustrative:\s*)?(?P<json>[{\[].*)$")
FIELD = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)"\s*:')

PRELUDE = r"""
LOCKGATE_GATEWAY="http://127.0.0.1:$DOCS_CHECK_PORT"; export LOCKGATE_GATEWAY
PATH="$DOCS_CHECK_DIR/bin:$PATH"
"""

# `curl` as the examples see it: the real one, with the address rewritten, a stream cut after a
# while, and the status (from the response headers, `-D`) and the body kept per example line.
# A script rather than a shell function so that `curl ... &` then `kill $!` stops curl, as in
# a reader's shell: the script passes the signal on.
CURL_SHIM = r"""#!/bin/sh
line=${DOCS_CHECK_LINE:-0}
dir=$DOCS_CHECK_DIR
stream=
n=$#
while [ "$n" -gt 0 ]; do
  arg=$1; shift; n=$((n - 1))
  case $arg in
    -N|-[!-]*N*) stream=1 ;;
    *localhost:7380*) arg=$(printf '%s' "$arg" | sed "s/localhost:7380/127.0.0.1:$DOCS_CHECK_PORT/g") ;;
  esac
  set -- "$@" "$arg"
done
if [ -n "$stream" ]; then set -- --max-time "$DOCS_CHECK_STREAM_CUT" "$@"; fi
pipe="$dir/pipe.$$"
mkfifo "$pipe"
tee -a "$dir/out.$line" < "$pipe" &
tee_pid=$!
"$DOCS_CHECK_CURL" -D "$dir/headers.$line" "$@" > "$pipe" &
curl_pid=$!
trap 'kill "$curl_pid" 2>/dev/null' TERM INT HUP
status=0
wait "$curl_pid" || status=$?
if [ "$status" -gt 128 ]; then wait "$curl_pid" || status=$?; fi
wait "$tee_pid" || true
rm -f "$pipe"
sed -n 's/^HTTP\/[0-9.]* \([0-9][0-9][0-9]\).*/\1/p' "$dir/headers.$line" 2>/dev/null | tail -n 1 > "$dir/status.$line"
if [ -n "$stream" ] && [ "$status" -eq 28 ]; then status=0; fi
exit "$status"
"""


class Block:
    def __init__(self, path, line, lines, skip):
        self.path, self.line, self.lines, self.skip = path, line, lines, skip


def blocks_of(path):
    """The ```sh blocks of a Markdown file, with the line their first command is on."""
    text = path.read_text().splitlines()
    blocks, i, pending_skip = [], 0, None
    while i < len(text):
        line = text[i]
        marker = SKIP.search(line)
        if marker:
            pending_skip = marker.group("reason")
        elif line.startswith("```"):
            fence_info = line[3:].strip()
            body, start = [], i + 2
            i += 1
            while i < len(text) and not text[i].startswith("```"):
                body.append(text[i])
                i += 1
            if fence_info in ("sh", "bash", "shell"):
                blocks.append(Block(path, start, body, pending_skip))
            pending_skip = None
        elif line.strip():
            pending_skip = None
        i += 1
    return blocks


def logical_lines(block):
    """(first line number, text) of each command line, backslash continuations joined."""
    out, current, first = [], [], None
    for offset, line in enumerate(block.lines):
        if first is None:
            first = block.line + offset
        current.append(line)
        if not line.endswith("\\"):
            out.append((first, "\n".join(current)))
            current, first = [], None
    if current:
        out.append((first, "\n".join(current)))
    return out


def expectations(block):
    """Per line number with a curl: the status expected, and the fields a sample shows."""
    expected, samples, last_curl = {}, {}, None
    for number, text in logical_lines(block):
        stripped = text.strip()
        sample = SAMPLE.match(stripped)
        if sample and last_curl is not None:
            if not sample.group("illustrative"):
                samples.setdefault(last_curl, []).extend(FIELD.findall(sample.group("json")))
            continue
        if stripped.startswith("#") or not stripped:
            continue
        if re.search(r"(^|[\s($|&;])curl\s", text):
            comment = text.split(" #", 1)[1] if " #" in text else ""
            status = STATUS_COMMENT.match("#" + comment.lstrip()) if comment else None
            expected[number] = status.group("status") if status else "2xx"
            last_curl = number
        else:
            last_curl = None
    return expected, samples


def script_of(block):
    """The block's text, each curl line preceded by an assignment naming its line."""
    parts = []
    for number, text in logical_lines(block):
        if re.search(r"(^|[\s($|&;])curl\s", text) and not text.strip().startswith("#"):
            parts.append(f"export DOCS_CHECK_LINE={number}")
        parts.append(text)
    return "\n".join(parts) + "\n"


def run_block(script, work, env):
    """Runs one block in a session of its own, and kills whatever it left running."""
    process = subprocess.Popen(
        ["sh", "-e", "-c", script], cwd=work, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=BLOCK_TIMEOUT_S)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_gateway(port, log):
    env = dict(os.environ, RUST_LOG="warn")
    process = subprocess.Popen(
        [str(BINARY), "--dev", "--listen", f"127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT, env=env,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    sys.exit(f"check-docs: lockgate --dev did not listen on {port}")


def check_file(path):
    """Runs the file's blocks; returns (ran, skipped, failures)."""
    blocks = blocks_of(path)
    if not blocks:
        return 0, [], []
    failures, skipped, ran = [], [], 0
    work = Path(tempfile.mkdtemp(prefix="check-docs-"))
    port = free_port()
    log = open(work / "gateway.log", "w")
    gateway = start_gateway(port, log)
    env = dict(
        os.environ,
        PATH=f"{BINARY.parent}:{os.environ['PATH']}",
        DOCS_CHECK_PORT=str(port),
        DOCS_CHECK_DIR=str(work),
        DOCS_CHECK_STREAM_CUT=str(STREAM_CUT_S),
        DOCS_CHECK_CURL=shutil.which("curl"),
    )
    env.pop("LOCKGATE_API_KEY", None)
    # One session per file: the state a reader's shell keeps is carried from block to block.
    (work / "bin").mkdir()
    shim = work / "bin" / "curl"
    shim.write_text(CURL_SHIM)
    shim.chmod(0o755)
    state = work / "state.sh"
    state.write_text("")
    try:
        for block in blocks:
            where = f"{path.relative_to(ROOT)}:{block.line}"
            if block.skip is not None:
                skipped.append(f"{where} ({block.skip})")
                continue
            ran += 1
            expected, samples = expectations(block)
            script = (
                PRELUDE
                + f". '{state}'\n"
                + script_of(block)
                + f"set | grep -E '^[A-Z][A-Z0-9_]*=' | grep -v -E '^(DOCS_CHECK|PATH|PWD|OLDPWD|HOME|IFS|PS[1-4]|PPID|OPTIND|LINENO)' > '{state}.next' || true\n"
            )
            try:
                run = run_block(script, work, env)
            except subprocess.TimeoutExpired:
                failures.append(f"{where}: did not end within {BLOCK_TIMEOUT_S} s")
                continue
            if (work / "state.sh.next").exists():
                shutil.move(work / "state.sh.next", state)
            if run.returncode != 0:
                tail = "\n    ".join(run.stderr.splitlines())
                failures.append(f"{where}: exited {run.returncode}\n    {tail}")
            for number, want in expected.items():
                status = work / f"status.{number}"
                got = status.read_text().strip() if status.exists() else None
                if not got:
                    if run.returncode == 0:
                        failures.append(f"{path.relative_to(ROOT)}:{number}: curl never answered")
                    continue
                ok = got.startswith("2") if want == "2xx" else got == want
                if not ok:
                    body = (work / f"out.{number}").read_text(errors="replace").strip()
                    failures.append(
                        f"{path.relative_to(ROOT)}:{number}: answered {got}, the example shows {want}\n    {body[:400]}"
                    )
            for number, fields in samples.items():
                out = work / f"out.{number}"
                body = out.read_text(errors="replace") if out.exists() else ""
                missing = [f for f in fields if f'"{f}"' not in body]
                if missing:
                    failures.append(
                        f"{path.relative_to(ROOT)}:{number}: the sample answer shows {missing}, the answer has none of them\n    {body.strip()[:400]}"
                    )
    finally:
        gateway.send_signal(signal.SIGTERM)
        try:
            gateway.wait(timeout=10)
        except subprocess.TimeoutExpired:
            gateway.kill()
        log.close()
        shutil.rmtree(work, ignore_errors=True)
    return ran, skipped, failures


def main():
    if shutil.which("curl") is None:
        sys.exit("check-docs: curl is needed (Debian: apt-get install curl)")
    if not BINARY.is_file():
        sys.exit("check-docs: target/debug/lockgate is missing: run `cargo build` first")
    files = [Path(f).resolve() for f in sys.argv[1:]] or [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    total_ran, total_skipped, total_failures = 0, [], []
    for path in files:
        ran, skipped, failures = check_file(path)
        total_ran += ran
        total_skipped += skipped
        total_failures += failures
    for skip in total_skipped:
        print(f"skipped {skip}")
    for failure in total_failures:
        print(f"FAILED {failure}")
    print(
        f"check-docs: {total_ran} example blocks run, {len(total_skipped)} skipped, "
        f"{len(total_failures)} failures"
    )
    sys.exit(1 if total_failures else 0)


if __name__ == "__main__":
    main()
