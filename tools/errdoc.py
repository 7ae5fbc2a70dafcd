"""Write docs/errors.md, every error code the service answers with, from the error classes.

    python -m tools.errdoc              # rewrite docs/errors.md
    python -m tools.errdoc --check      # exit 1 if docs/errors.md is not what it would write

Every module of `app` is imported, then the subclasses of `app.errors.FoyaError` are walked:
each class holds its code and status as class attributes, its docstring says when it is raised.
A family's base that is never raised itself says so (`abstract = True`) and is left out. The
codes the HTTP layer renders without a route (401 before auth, 404 and 405 of the router, 413 of
the body guard, validation's 400) have classes in `app.errors` too, so the walk finds them.

A code answers with one status, except those in `TWO_STATUSES`, where Foya (whose wire this
service keeps) answers one code with two statuses; a new such pair fails `tests/test_errdoc.py`.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "docs" / "errors.md"
COMMAND = "python -m tools.errdoc"
#: Where the errors of the operator commands live: never answered over HTTP, listed apart.
COMMAND_LINE = "app.ops."

#: Codes Foya answers with two statuses, and why; every other code has one status.
TWO_STATUSES = {
    "project_not_found": "404 when the URL names the project, 400 when a request body does",
    "connection_not_found": "404 when the URL names the connection, 400 when a request body does",
    "plugin_install_failed": "404 for an unknown marketplace or entry, else 400",
    "plugin_marketplace_failed": "404 for an unknown marketplace, else 502",
    "plugin_preview_failed": "404 for an unknown marketplace or entry, else 502",
    "web_search_test_failed": "404 for a provider that is not configured, else 502",
}
#: Answered by the HTTP framework for a status no class names (not expected from any route).
FRAMEWORK_ROW = (
    "http_error",
    "other",
    "the web framework refused the request with a status no other code names",
    "app.http.errors",
)


@dataclass(frozen=True)
class Entry:
    """One error class as the reference lists it."""

    code: str
    status: int
    meaning: str
    source: str  # module.Class


def import_app() -> None:
    """Import every module of `app`, so every error class is defined."""
    import app

    for module in pkgutil.walk_packages(app.__path__, "app."):
        if module.name.rsplit(".", 1)[-1] != "__main__":
            importlib.import_module(module.name)


def entries() -> list[Entry]:
    """Every concrete error class of `app`, by code, status and name."""
    from app.errors import FoyaError

    import_app()
    found: dict[type[FoyaError], None] = {}
    todo = [FoyaError]
    while todo:
        cls = todo.pop()
        if cls not in found:
            found[cls] = None
            todo.extend(cls.__subclasses__())
    out = []
    for cls in found:
        if not cls.__module__.startswith("app.") or cls.__dict__.get("abstract", False):
            continue
        source = f"{cls.__module__}.{cls.__qualname__}"
        out.append(Entry(cls.code, cls.status, meaning(cls), source))
    return sorted(out, key=lambda e: (e.code, e.status, e.source))


def meaning(cls: type) -> str:
    """When `cls` is raised: its own docstring, else its line in its module's exception map
    (a bullet naming it), else the docstring of its nearest documented base."""
    own = cls.__dict__.get("__doc__")
    if own:
        return inspect.cleandoc(own)
    mapped = map_line(sys.modules[cls.__module__].__doc__ or "", cls.__name__)
    if mapped:
        return mapped
    for base in cls.__mro__[1:]:  # a family's own base, not the shared ones (too general)
        if base.__dict__.get("__doc__") and base.__module__.startswith("app.kernel."):
            return inspect.cleandoc(base.__dict__["__doc__"])
    return ""


def map_line(doc: str, name: str) -> str:
    """What the bullet of `doc` naming `name` says after its status and code ("- `Name` 404
    `code`: what it means"), continuation lines included."""
    for bullet in re.split(r"\n(?=\s*- )", doc):
        head = " ".join(bullet.split())
        if head.startswith(f"- `{name}`"):
            _, colon, rest = head.partition(": ")
            if colon:
                return rest
            # "- `Name` 404 `code` (when it is raised)"
            found = re.match(rf"- `{name}` \d+ `\w+` \((.+)\)$", head)
            return found.group(1) if found else ""
    return ""


def conflicts(found: list[Entry]) -> dict[str, set[int]]:
    """Codes answered with more than one status that `TWO_STATUSES` does not explain."""
    statuses: dict[str, set[int]] = {}
    for entry in found:
        statuses.setdefault(entry.code, set()).add(entry.status)
    return {c: s for c, s in statuses.items() if len(s) > 1 and c not in TWO_STATUSES}


def cell(text: str) -> str:
    """`text` fit for one table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def render(found: list[Entry]) -> str:
    """docs/errors.md for `found`."""
    lines = [
        "# Error codes",
        "",
        f"<!-- Generated by `{COMMAND}` from the error classes of `app/`: do not edit. -->",
        "",
        'Every error answer is a JSON object `{"code", "message"}` with the HTTP status below '
        "(a few carry more fields beside them, e.g. `not_ready`'s `checks` and "
        "`canvas_revision_conflict`'s current document). The code is stable and meant for "
        "programs; the message is for people and may change. Each code is one error class "
        "(`Raised as`); the routes are in [api.md](api.md).",
        "",
        "| Code | Status | Meaning | Raised as |",
        "| --- | --- | --- | --- |",
    ]
    served = [e for e in found if not e.source.startswith(COMMAND_LINE)]
    rows = [(e.code, str(e.status), e.meaning, e.source) for e in served] + [FRAMEWORK_ROW]
    for code, status, meaning, source in sorted(rows):
        lines.append(f"| `{code}` | {status} | {cell(meaning)} | `{source}` |")
    lines += ["", "## Codes with two statuses", "", "As Foya answers them:", ""]
    lines += [f"- `{code}`: {reason}" for code, reason in sorted(TWO_STATUSES.items())]
    lines += [
        "",
        "## Errors of the command line",
        "",
        "The operator commands (`foya backup`, `foya restore`, `foya check`) print these as one "
        "`foya: message` line on stderr and exit 2; no route answers with them.",
        "",
        "| Code | Meaning | Raised as |",
        "| --- | --- | --- |",
    ]
    for e in found:
        if e.source.startswith(COMMAND_LINE):
            lines.append(f"| `{e.code}` | {cell(e.meaning)} | `{e.source}` |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on a change")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="default: docs/errors.md")
    args = parser.parse_args(argv)
    text = render(entries())
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run `{COMMAND}` and commit it", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
