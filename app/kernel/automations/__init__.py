"""Automations: prompts run as new sessions on a cron schedule (Foya's automations).

`service` owns the automations and their runs; `rules` checks settings and restores them at
start; `scheduler` decides when passes run; `schedule` reads cron expressions in time zones (and
says what daylight saving time does to them); `store` is the records and `automations.json`;
`runs` is one run as a session, `following` the runs going on; `clock` the time the scheduler
is given.
"""

from typing import TYPE_CHECKING

from app.kernel.automations.clock import Clock, SystemClock
from app.kernel.lazyexports import LazyExports

if TYPE_CHECKING:
    from app.kernel.automations.service import Automations
    from app.kernel.automations.store import AutomationInput, AutomationWire

# Imported on first lookup: a start needs only the clock and the file's name while no
# automation exists, and importing one module of a package runs its `__init__`.
__getattr__ = LazyExports(
    __name__,
    {
        "app.kernel.automations.service": ("Automations",),
        "app.kernel.automations.store": ("AutomationInput", "AutomationWire"),
    },
)

__all__ = ["AutomationInput", "AutomationWire", "Automations", "Clock", "SystemClock"]
