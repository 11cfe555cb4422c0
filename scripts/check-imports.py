#!/usr/bin/env python3
"""Fails when files under src/ import each other in a circle (directly or around a loop).

A file's imports are the modules its `use` declarations and `crate::`/`super::`/`self::` paths
name, resolved to files (`src/a/b.rs` or `src/a/b/mod.rs`); a path into a module's item
(`crate::lock::LockName`) counts as an import of the module's file (`src/lock/mod.rs`), and a
re-export in a mod.rs is followed like any other import. Tests (`#[cfg(test)] mod tests`) are
left out: a test module may look at anything.

Usage: scripts/check-imports.py [--graph]   (--graph prints every file's imports)
"""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def module_path(path):
    rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
    if rel[-1] == "mod":
        rel = rel[:-1]
    if rel in (["lib"], ["main"]):
        return []
    return rel


FILES = {}
for dirpath, _, names in os.walk(ROOT):
    for name in names:
        if name.endswith(".rs"):
            path = os.path.join(dirpath, name)
            FILES[tuple(module_path(path))] = path


def resolve(segments):
    """The file of the longest module prefix of `segments`."""
    for end in range(len(segments), -1, -1):
        if tuple(segments[:end]) in FILES:
            return FILES[tuple(segments[:end])]
    return None


def without_tests(text):
    match = re.search(r"#\[cfg\(test\)\]\s*mod tests\s*\{", text)
    return text[: match.start()] if match else text


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] (as segment lists)."""
    # `x as y` names the same module as `x`; dropped before the spaces are.
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, text):
        depth, start, parts = 0, 0, []
        for i, ch in enumerate(text):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(text[start:i])
                start = i + 1
        parts.append(text[start:])
        for part in parts:
            if not part:
                continue
            brace = part.find("{")
            if brace >= 0 and part.endswith("}"):
                head = [s for s in part[:brace].split("::") if s]
                walk(prefix + head, part[brace + 1 : -1])
            else:
                out.append(prefix + [s for s in part.split("::") if s])

    walk([], tree)
    return out


def imports(path):
    me = module_path(path)
    text = without_tests(open(path, encoding="utf-8").read())
    text = re.sub(r"//[^\n]*", "", text)
    paths = []
    for use in re.findall(r"\buse\s+([^;]+);", text):
        paths.extend(expand_use(use))
    paths.extend(p.split("::") for p in re.findall(r"\b(?:crate|super|self)(?:::\w+)+", text))
    found = set()
    for segments in paths:
        if not segments:
            continue
        head, rest = segments[0], segments[1:]
        if head == "crate":
            target = rest
        elif head == "super":
            base = me[:-1]
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
            target = base + rest
        elif head == "self":
            target = me + rest
        elif tuple(me + [head]) in FILES:
            target = me + [head] + rest
        else:
            continue
        file = resolve(target) if target else None
        if file and file != path and tuple(module_path(file)):
            found.add(file)
    return found


def is_descendant(parent, child):
    """Whether `child` is a file of the module that the mod.rs (or lib.rs) `parent` declares."""
    if os.path.basename(parent) not in ("mod.rs", "lib.rs", "main.rs"):
        return False
    return os.path.dirname(child).startswith(os.path.dirname(parent))


# A mod.rs declaring, composing or re-exporting its own children is the module tree, not a
# circle: those edges are left out (its children may use what it defines).
GRAPH = {
    path: {target for target in imports(path) if not is_descendant(path, target)}
    for path in FILES.values()
}


def cycles():
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in GRAPH:
        if v not in index:
            visit(v)
    return out


def rel(path):
    return os.path.relpath(path, os.path.join(ROOT, ".."))


if "--graph" in sys.argv:
    for path in sorted(GRAPH):
        print(rel(path), "->", ", ".join(sorted(rel(p) for p in GRAPH[path])))

found = cycles()
for component in found:
    print("import circle:", " <-> ".join(rel(p) for p in component))
if found:
    sys.exit(1)
print(f"no import circles among {len(GRAPH)} files")
