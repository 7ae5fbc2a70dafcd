"""Serving: listeners (Unix socket, TCP, TLS), admission control, and hypercorn's quirks fixed."""
