"""The house rules that hold the floor plan: no import circles, no module over 300 lines, and
the turn core below the capabilities that drive it.

`python -m tools.house` measures the house; these tests hold the figures that must not move.
`lint-imports` checks the layers inside the kernel (pyproject.toml); the checks here say the
same of the turn core in words a failure can name, and add the circles import-linter cannot see
(two sibling modules of one capability importing each other).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import grimp
import pytest
from support.helpers import REPO

#: The kernel's modules the turn core may import: the foundation below it.
FOUNDATION = {
    "approvals",
    "binding",
    "connection_rules",
    "connections",
    "emit",
    "filestate",
    "ids",
    "lifecycle",
    "maintenance",
    "messageshape",
    "projects",
    "providers",
    "readiness",
    "recovery",
    "sessionrow",
    "sessions",
    "sessionsettings",
    "streams",
    "usage",
    "web",
    "workspace",
}


def house() -> ModuleType:
    """`tools.house`, imported from the repository root (where `python -m tools.house` runs)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    return importlib.import_module("tools.house")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("app", include_external_packages=False)


def test_no_import_circles() -> None:
    """No two sibling modules or packages import each other, directly or through others,
    counting imports made only for type checking."""
    circles = house().circles()
    assert circles == [], "import circles: " + ", ".join(f"{a} <-> {b}" for a, b in circles)


def test_no_module_is_over_the_length_where_a_seam_is_due() -> None:
    """A module past `tools.house.LONG_MODULE` lines holds more than one idea: split it."""
    long = house().long_modules()
    assert long == [], "modules to split: " + ", ".join(f"{m} ({n} lines)" for m, n in long)


def test_the_turn_core_imports_no_capability(graph: grimp.ImportGraph) -> None:
    """What the turn core needs of a capability is a Protocol in `app.kernel.turns.ports`: it
    imports only the foundation of the kernel, never a capability nor the root."""
    turns = "app.kernel.turns"
    found = []
    for module in sorted({turns} | graph.find_descendants(turns)):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            parts = imported.split(".")
            inside = imported.startswith(turns) or not imported.startswith("app.kernel")
            if not inside and (len(parts) < 3 or parts[2] not in FOUNDATION):
                found.append(f"{module} -> {imported}")
    assert found == [], "the turn core imports above itself: " + "; ".join(found)


def test_ports_import_no_capability(graph: grimp.ImportGraph) -> None:
    """A module of ports is a lower layer's word: it never imports the capability that
    fits it (that would make the port a circle again)."""
    ports = {
        "app.kernel.turns.ports": ("app.kernel.hooks", "app.kernel.usercontext"),
        "app.kernel.hooks.ports": ("app.kernel.trust",),
        "app.kernel.canvas.ports": ("app.kernel.canvas.service", "app.kernel.canvas.generation"),
        "app.kernel.plugins.ports": ("app.kernel.plugins.store",),
    }
    for port, above in ports.items():
        for module in above:
            chain = graph.find_shortest_chain(importer=port, imported=module)
            assert chain is None, f"{port} reaches {module}: {' -> '.join(chain or ())}"
