"""The composition root: every service of the kernel is built here, once, in dependency order.

Each service is a `cached_property`: reading it builds it (and, first, what it needs), so a
service is never reached before it exists. The root is layered as the kernel is:
`foundation` (the store, sessions, providers, the user's context), `plugged` (what plugs into
the turn, the tool table and the turn core built complete from it) and `root` (what drives the
turn, the capabilities built on first use, and the kernel's life). A capability declares its
tools, limits, instructions and life steps in one `Capability` record (`capability`);
`Wiring.capabilities()` is the one ordered list `Lifecycle` runs: start in order, shutdown,
close and a session's deletion in reverse.

A new capability finds its room here: build its service as a `cached_property` of the layer it
needs (importing its package there, so that a start does not), and add its record to `_plugs`
(if it plugs tools into the turn: its loader goes in `tools`) or `capabilities()`. If its start
only reads what it recorded, say which file in `ondisk` and start it only when that exists.
"""

from app.kernel.wiring.capability import Capability, Lifecycle, Observer, Phase
from app.kernel.wiring.root import EAGER, LAZY, Wiring

__all__ = ["EAGER", "LAZY", "Capability", "Lifecycle", "Observer", "Phase", "Wiring"]
