"""What the marketplaces need of the installed plugins, declared below both.

`Plugins` (the store) owns `Marketplaces`, and installing a marketplace's entry goes through the
store's own install. So that neither module imports the other, the marketplaces name what they
use as `Installer`, which `Plugins` fits by its shape.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Protocol

from app.kernel.plugins.models import Plugin
from app.kernel.web.guard import AllowList


class Installer(Protocol):
    """The installed plugins as a marketplace sees them."""

    @property
    def lock(self) -> asyncio.Lock:
        """Held by one install, removal or marketplace change at a time."""
        ...

    @property
    def data_root(self) -> Path:
        """Where the plugins' data directories are."""
        ...

    @property
    def allow(self) -> AllowList:
        """Git remotes a clone may reach although private."""
        ...

    def list_now(self) -> list[Plugin]:
        """Every installed plugin (blocking)."""
        ...

    def staging(self, prefix: str) -> contextlib.AbstractContextManager[Path]:
        """A private directory beside the plugins, removed afterwards."""
        ...

    async def install_package(
        self, source: Path, label: str, *, expected: str = "", replace: bool = False
    ) -> Plugin:
        """Copy, check and install the package at `source` (caller holds `lock`)."""
        ...

    async def changed(self) -> None:
        """Tell the rest of the kernel the installed or enabled set changed."""
        ...
