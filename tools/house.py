"""The house's figures: what `docs/architecture.md` promises, measured.

`python -m tools.house` prints modules over 300 lines, the count of `dict[str, Any]` in `app/`,
the largest functions, and every import circle between modules of one package (a module that
imports, directly or not, a module that imports it back). `tests/test_house.py` holds the
circle count at zero.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app"
LONG_MODULE = 300
LOOSE_DICT = re.compile(r"dict\[str, Any\]")


@dataclass(frozen=True)
class Figures:
    """One reading of the house."""

    long_modules: list[tuple[str, int]]
    loose_dicts: int
    largest_functions: list[tuple[str, int]]
    circles: list[tuple[str, str]]


def _modules() -> list[Path]:
    return sorted(APP.rglob("*.py"))


def _name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def long_modules() -> list[tuple[str, int]]:
    """(module, lines) of every module over `LONG_MODULE` lines, longest first."""
    counted = [(_name(p), len(p.read_text().splitlines())) for p in _modules()]
    return sorted(((n, c) for n, c in counted if c > LONG_MODULE), key=lambda x: -x[1])


def loose_dicts() -> int:
    """How often `dict[str, Any]` is written in `app/`."""
    return sum(len(LOOSE_DICT.findall(p.read_text())) for p in _modules())


def largest_functions(top: int = 5) -> list[tuple[str, int]]:
    """The `top` longest functions of `app/` as (module:qualified name, lines)."""
    found: list[tuple[str, int]] = []
    for path in _modules():
        tree = ast.parse(path.read_text())
        stack: list[tuple[ast.AST, str]] = [(tree, "")]
        while stack:
            node, prefix = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    qual = f"{prefix}{child.name}"
                    if not isinstance(child, ast.ClassDef):
                        size = (child.end_lineno or child.lineno) - child.lineno + 1
                        found.append((f"{_name(path)}:{qual}", size))
                    stack.append((child, qual + "."))
    return sorted(found, key=lambda x: -x[1])[:top]


def circles() -> list[tuple[str, str]]:
    """Pairs of sibling modules or packages that import each other, directly or not.

    Within every package, its direct children are compared: a child that reaches a sibling
    which reaches it back is a circle. Imports made only for type checking count too: a
    circle is a circle for the reader, whatever the interpreter does with it.
    """
    graph = grimp.build_graph("app", include_external_packages=False)
    pairs: set[tuple[str, str]] = set()
    packages = {m for m in graph.modules if graph.find_children(m)}
    for package in packages:
        children = sorted(graph.find_children(package))
        for i, a in enumerate(children):
            for b in children[i + 1 :]:
                there = graph.chain_exists(importer=a, imported=b, as_packages=True)
                if there and graph.chain_exists(importer=b, imported=a, as_packages=True):
                    pairs.add((a, b))
    return sorted(pairs)


def read() -> Figures:
    """Measure every figure once."""
    return Figures(long_modules(), loose_dicts(), largest_functions(), circles())


def main() -> None:
    figures = read()
    print(f"modules over {LONG_MODULE} lines: {len(figures.long_modules)}")
    for name, lines in figures.long_modules:
        print(f"  {lines:5d}  {name}")
    print(f"dict[str, Any] in app/: {figures.loose_dicts}")
    print("largest functions:")
    for name, lines in figures.largest_functions:
        print(f"  {lines:5d}  {name}")
    print(f"import circles: {len(figures.circles)}")
    for a, b in figures.circles:
        print(f"  {a} <-> {b}")


if __name__ == "__main__":
    main()
