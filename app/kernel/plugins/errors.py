"""The errors of the plugin and marketplace routes: one class per code and status, as Foya's
handlers answer them. Inside the package a `Problem` says what is wrong; `reported` turns it into
the failure of the operation at hand.

Exception map (status, code):

- 400, the operation refused (bad source, a conflict, a damaged package, a failed fetch):
  `PluginInstallFailed` `plugin_install_failed`, `PluginUpdateFailed` `plugin_update_failed`,
  `PluginRemoveFailed` `plugin_remove_failed`, `MarketplaceAddFailed`
  `plugin_marketplace_add_failed`, `MarketplaceUpdateFailed` `plugin_marketplace_update_failed`,
  `MarketplaceRemoveFailed` `plugin_marketplace_remove_failed`, `MarketplaceRefreshFailed`
  `plugin_marketplace_refresh_failed`
- 404, the marketplace or its entry does not exist: `MarketplaceNotFound`
  `plugin_marketplace_failed`, `PreviewNotFound` `plugin_preview_failed`, `InstallNotFound`
  `plugin_install_failed`
- 502, the marketplace's catalog or package could not be read: `MarketplaceFailed`
  `plugin_marketplace_failed`, `PreviewFailed` `plugin_preview_failed`
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from app.errors import FoyaError, NotFound


class Problem(Exception):
    """Why a plugin operation cannot be done (`missing`: what it names does not exist)."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.missing = missing


class PluginFailure(FoyaError):
    """A refused plugin or marketplace operation; each operation has its own subclass."""

    abstract = True
    status = 400
    code = "plugin_failed"


class PluginInstallFailed(PluginFailure):
    """Installing a plugin (from a source or a marketplace entry) was refused."""

    code = "plugin_install_failed"


class PluginUpdateFailed(PluginFailure):
    """Updating an installed plugin (enabling, disabling, upgrading) was refused."""

    code = "plugin_update_failed"


class PluginRemoveFailed(PluginFailure):
    """Removing an installed plugin was refused."""

    code = "plugin_remove_failed"


class MarketplaceAddFailed(PluginFailure):
    """Adding a marketplace was refused (it exists already, or its source could not be read)."""

    code = "plugin_marketplace_add_failed"


class MarketplaceUpdateFailed(PluginFailure):
    """Enabling or disabling a marketplace was refused."""

    code = "plugin_marketplace_update_failed"


class MarketplaceRemoveFailed(PluginFailure):
    """Removing a marketplace was refused."""

    code = "plugin_marketplace_remove_failed"


class MarketplaceRefreshFailed(PluginFailure):
    """Fetching a marketplace again was refused (or its name changed)."""

    code = "plugin_marketplace_refresh_failed"


class MarketplaceFailed(PluginFailure):
    """A marketplace's catalog could not be read."""

    status = 502
    code = "plugin_marketplace_failed"


class MarketplaceNotFound(PluginFailure, NotFound):
    """Browsing a marketplace that does not exist (or is disabled)."""

    status = 404
    code = "plugin_marketplace_failed"


class PreviewFailed(PluginFailure):
    """A marketplace entry's package could not be fetched or read for a preview."""

    status = 502
    code = "plugin_preview_failed"


class PreviewNotFound(PluginFailure, NotFound):
    """Previewing an entry of a marketplace that does not exist, or that it does not list."""

    status = 404
    code = "plugin_preview_failed"


class InstallNotFound(PluginFailure, NotFound):
    """Installing an entry of a marketplace that does not exist, or that it does not list."""

    status = 404
    code = "plugin_install_failed"


@contextlib.contextmanager
def reported(
    failure: type[PluginFailure], *, missing: type[PluginFailure] | None = None
) -> Iterator[None]:
    """Turn a `Problem` raised inside into `failure`, or into `missing` when it names
    something that does not exist and the operation answers that apart."""
    try:
        yield
    except Problem as exc:
        raise (missing if exc.missing and missing else failure)(exc.message) from None
