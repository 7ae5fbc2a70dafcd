"""The user's context as files: rules, memory, skills and commands, and what a turn makes of them.

`files` reads and writes the rule and memory Markdown (the source of truth), `service.UserContext`
is what the kernel and the routes call; every change is appended to `journal.ContextJournal`
(`<data-dir>/context/events.jsonl`), which `stream` serves as `GET /context/events`. `skills`
(with `skillscan`, `skillfile`, `skillmodels`) discovers SKILL.md packages, `commands` holds the
prompt templates, `prompt` turns all of it into each request's system prompt, `tools` gives the
model its context tools, and `keeper` condenses conversations into memory in the background.
"""

from app.kernel.usercontext.items import Memory, MemorySettings, Rule
from app.kernel.usercontext.journal import ContextJournal
from app.kernel.usercontext.service import UserContext

__all__ = ["ContextJournal", "Memory", "MemorySettings", "Rule", "UserContext"]
