#!/usr/bin/env python3
"""How far one kind of lease is smeared across src/: the files outside the kind's own folder
(src/primitive/<kind>/) whose code (comments left out) names something that is that kind's
alone. Issue 50 asks for at most five per kind. The names are the kind's types, variants,
constants and functions as they are today; tokio's `Semaphore` (the WAIT pool's slots) is not
the lease kind and is left out. `LimitDiffers` (the store's and the engine's "held under
another limit") was the semaphore's alone until a limit became a property any kind kept as a
set of grants may have (`GrantSetKind::limited`, which the stores check whatever the kind:
`memory/tests.rs` runs a second limited kind); the problem it becomes, `PermitsMismatch`, is
the semaphore's and is still counted. Likewise a set kept beside the lock, its marker, its
token mark (`BESIDE_MARK`, once `SHARED_MARK`) and a waiting lock's hold-off of it
(`hold_off_beside`, once `hold_off_readers`) are the store's words for any kind with a
`GrantSetKind::marker`, the read/write lock's readers being today's one; the readers' own
names (`READERS`, `SHARED_MARKER`, `Shared`, `LockMode::Shared`) are counted.

Usage: scripts/kind-names.py [-v]   (-v lists the files)
"""

import pathlib
import re
import sys

SRC = pathlib.Path(__file__).resolve().parent.parent / "src"

KINDS = {
    "semaphore": (
        "primitive/semaphore/",
        r"\b(Semaphore\w*|Permits\b|PermitView|Leased::Permit|GrantsOf::Permits"
        r"|PermitsMismatch|acquire_permit|permits_channel|PERMIT_\w+|PERMITS\b|kinds::PERMIT)",
    ),
    "read/write": (
        "primitive/shared/",
        r"\b(Leased::Shared|GrantsOf::Shared|SHARED_MARKER|LockMode::Shared|kinds::SHARED"
        r"|acquire_shared|hold_off_readers|SHARED_\w+|READERS\b|(lock|primitive)::\{?[^;]*\bShared\b)",
    ),
}

TOKIO_SEMAPHORE = re.compile(r"tokio::sync::\{?[^;]*\bSemaphore\b")


def code_lines(text):
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("//"):
            continue
        yield line.split("//", 1)[0] if "://" not in line else line


def files_naming(kind):
    own, pattern = KINDS[kind]
    pattern = re.compile(pattern)
    found = []
    for path in sorted(SRC.rglob("*.rs")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(own):
            continue
        text = path.read_text()
        lines = list(code_lines(text))
        if kind == "semaphore" and TOKIO_SEMAPHORE.search(text):
            lines = [re.sub(r"\bSemaphore(Permit)?\b", "", line) for line in lines]
        if any(pattern.search(line) for line in lines):
            found.append(rel)
    return found


def main():
    verbose = "-v" in sys.argv[1:]
    for kind in KINDS:
        found = files_naming(kind)
        print(f"{kind}: {len(found)} files outside src/{KINDS[kind][0]}")
        if verbose:
            for rel in found:
                print(f"  {rel}")


if __name__ == "__main__":
    main()
