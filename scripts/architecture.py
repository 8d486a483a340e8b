#!/usr/bin/env python3
"""The workspace's shape, checked from its source: no import circle between a crate's
modules, and no source file over 800 lines outside tests (docs/design.md).

A module's imports are the `crate::NAME` paths in its files (a directory module and its
children count as one module; `#[cfg(test)] mod tests` blocks are left out, since
tests may reach anywhere). A circle is a strongly connected set of two or more of a
crate's top-level modules: each reaches the others, so none can be read, tested or
moved without the rest.

    python3 scripts/architecture.py            # check the workspace; exit 1 on a breach
    python3 scripts/architecture.py --graph    # print each crate's module graph
    python3 scripts/architecture.py --self-test
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

MAX_LINES = 800


def strip_tests(text: str) -> str:
    i = text.find("#[cfg(test)]\nmod tests")
    return text if i < 0 else text[:i]


def module_graph(src: Path) -> dict[str, set[str]]:
    files: dict[str, list[Path]] = {}
    for f in sorted(src.rglob("*.rs")):
        top = f.relative_to(src).with_suffix("").parts[0]
        if top not in ("lib", "main"):
            files.setdefault(top, []).append(f)
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, paths in files.items():
        for f in paths:
            text = re.sub(r"//[^\n]*", "", strip_tests(f.read_text()))
            names = re.findall(r"\bcrate::(\w+)", text)
            for group in re.findall(r"\bcrate::\{([^}]*)\}", text):
                names += re.findall(r"(?:^|,)\s*(\w+)", group)
            graph[module] |= {n for n in names if n in graph and n != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of two or more modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def long_files(root: Path) -> list[tuple[Path, int]]:
    out = []
    for f in sorted(root.glob("crates/*/src/**/*.rs")):
        n = len(f.read_text().splitlines())
        if n > MAX_LINES:
            out.append((f.relative_to(root), n))
    return out


def check(root: Path) -> list[str]:
    problems = []
    for src in sorted(root.glob("crates/*/src")):
        for component in circles(module_graph(src)):
            problems.append(f"{src.parent.name}: import circle among {', '.join(component)}")
    for path, n in long_files(root):
        problems.append(f"{path}: {n} lines (at most {MAX_LINES} outside tests)")
    return problems


def self_test() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        src = root / "crates" / "demo" / "src"
        (src / "b").mkdir(parents=True)
        (src / "lib.rs").write_text("mod a;\nmod b;\nmod c;\n")
        (src / "a.rs").write_text("use crate::b::B;\n")
        (src / "b" / "mod.rs").write_text("mod inner;\n")
        (src / "b" / "inner.rs").write_text("use crate::{c, a};\n")
        (src / "c.rs").write_text("// crate::a in a comment is no import\n"
                                  "#[cfg(test)]\nmod tests {\n    use crate::a;\n}\n")
        problems = check(root)
        assert problems == ["demo: import circle among a, b"], problems
        (src / "a.rs").write_text("pub struct A;\n" + "// line\n" * MAX_LINES)
        problems = check(root)
        assert problems == [f"crates/demo/src/a.rs: {MAX_LINES + 1} lines (at most {MAX_LINES} outside tests)"], problems
    print("architecture self-test: ok")


def main() -> int:
    if "--self-test" in sys.argv:
        self_test()
        return 0
    root = Path(__file__).resolve().parent.parent
    if "--graph" in sys.argv:
        for src in sorted(root.glob("crates/*/src")):
            print(src.parent.name)
            for module, deps in sorted(module_graph(src).items()):
                print(f"  {module} -> {', '.join(sorted(deps)) or '(nothing)'}")
        return 0
    problems = check(root)
    for p in problems:
        print(p)
    if not problems:
        print("architecture: no import circle; no source file over 800 lines")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
