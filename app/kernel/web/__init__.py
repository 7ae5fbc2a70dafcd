"""Web search and fetch: the settings and search providers behind `/web-search`, the guarded
fetcher, and the `web_search` and `web_fetch` tools."""

from typing import TYPE_CHECKING

from app.kernel.lazyexports import LazyExports

if TYPE_CHECKING:
    from app.kernel.web.config import UpdateFailed
    from app.kernel.web.errors import SearchTestFailed
    from app.kernel.web.search import WebSearch
    from app.kernel.web.tools import web_tools

# Imported on first lookup: the address guard (`guard`) is read at start by other capabilities,
# and importing one module of a package runs its `__init__`.
__getattr__ = LazyExports(
    __name__,
    {
        "app.kernel.web.config": ("UpdateFailed",),
        "app.kernel.web.errors": ("SearchTestFailed",),
        "app.kernel.web.search": ("WebSearch",),
        "app.kernel.web.tools": ("web_tools",),
    },
)

__all__ = ["SearchTestFailed", "UpdateFailed", "WebSearch", "web_tools"]
