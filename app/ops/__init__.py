"""Operator tools: commands that drive a data directory, a kernel's REST surface or ssh directly.

`backup` and `restore` (archives of a data directory), `certs` (self-signed TLS), `client`
(`foya exec`, a thin REST + SSE client) and `tunnel/` (`foya tunnel` over ssh). They sit beside
`app.cli` at the top of the layers and never import the kernel or the HTTP app: `cli.py` imports
each one lazily, inside the command that needs it.
"""
