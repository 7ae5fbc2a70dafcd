"""The user's context as files: rules and memory in Markdown, and the memory switch.

`files` reads and writes the Markdown (the source of truth), `service.UserContext` is what the
kernel and the routes call; every change is appended to `journal.ContextJournal`
(`<data-dir>/context/events.jsonl`), which `stream` serves as `GET /context/events`.
"""

from app.kernel.usercontext.items import Memory, MemorySettings, Rule
from app.kernel.usercontext.journal import ContextJournal
from app.kernel.usercontext.service import UserContext

__all__ = ["ContextJournal", "Memory", "MemorySettings", "Rule", "UserContext"]
