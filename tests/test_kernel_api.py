"""`app.kernel.api` is the one surface the HTTP layer imports the kernel from.

Modelled on httpx's `__all__` test: the export list is exactly the module's public names, every
listed name resolves, and no module of `app/http` reaches past the surface into a kernel module
(so every kernel name the HTTP layer uses is listed).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import app.kernel.api as kernel_api

HTTP = Path(__file__).resolve().parents[1] / "app" / "http"
SURFACE = "app.kernel.api"


def public_names() -> set[str]:
    """The names a reader of the module sees: everything bound in it but private names, the
    modules it imports and `annotations` (the `from __future__` import), and the names it looks
    up on first use."""
    bound = {
        name
        for name, value in vars(kernel_api).items()
        if not name.startswith("_") and name != "annotations" and type(value).__name__ != "module"
    }
    return bound | set(kernel_api.__getattr__.homes)


def test_all_lists_exactly_the_public_names() -> None:
    listed = kernel_api.__all__
    assert len(listed) == len(set(listed)), "a name is listed twice in __all__"
    assert set(listed) == public_names(), (
        f"exported but not in __all__: {sorted(public_names() - set(listed))}; "
        f"in __all__ but not defined: {sorted(set(listed) - public_names())}"
    )


def test_every_listed_name_resolves() -> None:
    for name in kernel_api.__all__:
        assert getattr(kernel_api, name, None) is not None, name


def test_a_name_looked_up_on_first_use_is_its_home_modules_own() -> None:
    for name, (home, there) in kernel_api.__getattr__.homes.items():
        assert getattr(kernel_api, name) is getattr(importlib.import_module(home), there), name
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = kernel_api.no_such_name


def kernel_imports(path: Path) -> list[tuple[int, str]]:
    """Every import of a kernel module in `path` (nested and `TYPE_CHECKING` ones included),
    as (line, module)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "app":  # `from app import kernel`
                found += [(node.lineno, f"app.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
    return [(line, m) for line, m in found if m == "app.kernel" or m.startswith("app.kernel.")]


def test_http_imports_the_kernel_only_through_its_surface() -> None:
    files = sorted(HTTP.rglob("*.py"))
    assert len(files) > 30, f"no HTTP modules found under {HTTP}"
    root = HTTP.parents[1]
    stray = [
        f"{path.relative_to(root)}:{line}: imports {module}"
        for path in files
        for line, module in kernel_imports(path)
        if module != SURFACE
    ]
    assert not stray, (
        f"app/http must import the kernel only from {SURFACE} (add the name there and to its "
        "__all__):\n" + "\n".join(stray)
    )


def test_every_kernel_name_http_uses_is_listed() -> None:
    used: dict[str, str] = {}
    for path in sorted(HTTP.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == SURFACE:
                for alias in node.names:
                    used.setdefault(alias.name, f"{path.name}:{node.lineno}")
    missing = {name: where for name, where in used.items() if name not in kernel_api.__all__}
    assert not missing, f"imported from {SURFACE} but not in its __all__: {missing}"
    assert "Kernel" in used
