"""Tools that wait for a client: the `ask_user` question batches
(`questions`, `ask_user`) and the browser actions a browser-driving client performs
(`browser`, `browser_tools`), both on the pending-request pattern of `waiting`.
Errors: `questions`, `browser`."""

from app.kernel.interactions.ask_user import AskUser
from app.kernel.interactions.browser import BrowserActions
from app.kernel.interactions.browser_tools import browser_tools
from app.kernel.interactions.questions import Answer, Questions

__all__ = ["Answer", "AskUser", "BrowserActions", "Questions", "browser_tools"]
