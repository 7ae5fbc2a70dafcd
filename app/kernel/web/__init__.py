"""Web search and fetch: the settings and search providers behind `/web-search`, the guarded
fetcher, and the `web_search` and `web_fetch` tools."""

from app.kernel.web.config import UpdateFailed
from app.kernel.web.errors import SearchTestFailed
from app.kernel.web.search import WebSearch
from app.kernel.web.tools import web_tools

__all__ = ["SearchTestFailed", "UpdateFailed", "WebSearch", "web_tools"]
