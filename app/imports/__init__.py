"""Other tools' histories, read into one shape (`ImportBundle`) that the kernel stores.

Each source module parses its own format and knows nothing of the kernel or the store:
`chatbuddy` (ChatBuddy backups), `claude_code`, `codex`, `opencode` (agent-CLI transcripts)
and `archive` (Foya's own portable export). The kernel's import service writes a bundle
all-or-nothing and idempotently (app.kernel.imports).
"""
