"""Terminals: the user's shell on a real PTY per terminal, its output streamed with replay.

- `process`: the shell process, its PTY and its end (L3 work: no HTTP, no kernel)
- `replay`: numbered output events, the last ones kept in memory, the gap marker
- `terminal`: one terminal (output, pacing, input, exit) and a client's stream over it
- `service`: every terminal by ref, limits, the session's and the kernel's end
- `errors`: what the routes answer
"""

from app.kernel.terminals.service import Terminals
from app.kernel.terminals.terminal import TerminalSnapshot, TerminalStream

__all__ = ["TerminalSnapshot", "TerminalStream", "Terminals"]
