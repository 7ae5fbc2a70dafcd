"""Automations: prompts run as new sessions on a cron schedule (Foya's automations).

`service` owns the automations and their runs; `rules` checks settings and restores them at
start; `scheduler` decides when passes run; `schedule` reads cron expressions in time zones (and
says what daylight saving time does to them); `store` is the records and `automations.json`;
`runs` is one run as a session, `following` the runs going on; `clock` the time the scheduler
is given.
"""

from app.kernel.automations.clock import Clock, SystemClock
from app.kernel.automations.service import Automations
from app.kernel.automations.store import AutomationInput, AutomationWire

__all__ = ["AutomationInput", "AutomationWire", "Automations", "Clock", "SystemClock"]
