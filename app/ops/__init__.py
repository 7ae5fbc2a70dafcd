"""Operator tools: commands that drive a data directory, a kernel's REST surface or ssh directly.

`backup` and `restore` (archives of a data directory), `certs` (self-signed TLS), `preflight`
(`foya serve --check`), `rest` (the thin REST client: where the kernel is, errors, "no answer"
messages), `commands` (`status`, `sessions`, `history`, `rewind`, `usage`), `client` (`foya exec`,
REST + SSE over httpx), `client_flags` and `client_cli` (the shared client flags and the Typer
definitions of the commands that talk to a kernel) and `tunnel/` (`foya tunnel` over ssh). They
sit beside `app.cli` at the top of the layers and never import the kernel or the HTTP app:
`cli.py` imports each one lazily, inside the command that needs it.
"""
