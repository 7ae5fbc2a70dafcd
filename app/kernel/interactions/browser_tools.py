"""The browser tools, Foya's names and schemas: `browser_navigate`, `browser_snapshot`,
`browser_click`, `browser_type`, `browser_press_key`, `browser_wait`, `browser_scroll`,
`browser_extract`, `browser_screenshot` (what they share, approval included: `browser_tool`).
"""

from __future__ import annotations

from app.jsontypes import JSONObject
from app.kernel.interactions.browser import ActionFields, BrowserActions, clean_url
from app.kernel.interactions.browser_tool import (
    DIRECTIONS,
    MAX_SCROLL,
    OBSERVATION,
    REF,
    TIMEOUT,
    BrowserTool,
    arg,
    object_schema,
    only_given,
    text_arg,
    wait_ms,
)
from app.tools import Tool, ToolError


def required(args: JSONObject, key: str) -> str:
    """A string argument that must not be blank."""
    value = text_arg(args, key)
    if not value.strip():
        raise ToolError(f"{key} is required")
    return value


def waiting_schema(ref: str, text: str) -> JSONObject:
    """The parameters of a tool that waits for an element ref or a text (described by `ref`
    and `text`)."""
    return object_schema(
        {
            "ref": {"type": "string", "description": ref},
            "observation_id": OBSERVATION,
            "text": {"type": "string", "description": text},
            "timeout_ms": TIMEOUT,
        }
    )


def waiting_fields(args: JSONObject) -> ActionFields:
    """The action fields of a tool with `waiting_schema` parameters."""
    return only_given(
        ActionFields(
            ref=text_arg(args, "ref"),
            observation_id=text_arg(args, "observation_id"),
            text=text_arg(args, "text"),
            timeout_ms=wait_ms(args),
        )
    )


class Navigate(BrowserTool):
    kind = "navigate"
    description = (
        "Open an http or https URL in the user's browser; then call browser_snapshot to see "
        "the page."
    )
    parameters = object_schema(
        {"url": {"type": "string", "description": "The full http or https URL."}}, ("url",)
    )
    approval = "network"

    def fields(self, args: JSONObject) -> ActionFields:
        url = clean_url(text_arg(args, "url"))
        if not url:
            raise ToolError("url is required")
        if not url.lower().startswith(("http://", "https://")):
            raise ToolError("url must be an http or https URL")
        return ActionFields(url=url)


class Snapshot(BrowserTool):
    kind = "snapshot"
    description = (
        "Look at the browser's current page: a fresh snapshot whose elements carry refs. Use "
        "refs from the latest snapshot only."
    )


class Click(BrowserTool):
    kind = "click"
    description = (
        "Click the element with a ref from the latest browser_snapshot; take a snapshot after "
        "a click that may navigate."
    )
    parameters = object_schema({"ref": REF, "observation_id": OBSERVATION}, ("ref",))
    approval = "browser_interact"

    def fields(self, args: JSONObject) -> ActionFields:
        ref = required(args, "ref")
        return only_given(ActionFields(ref=ref, observation_id=text_arg(args, "observation_id")))


class TypeText(BrowserTool):
    kind = "type"
    description = (
        "Type text into an input or editable element (a ref from the latest browser_snapshot); "
        "clear=true replaces what it holds."
    )
    parameters = object_schema(
        {
            "ref": REF,
            "observation_id": OBSERVATION,
            "text": {"type": "string", "description": "What to type."},
            "clear": {"type": "boolean", "description": "Empty the field first."},
        },
        ("ref", "text"),
    )
    approval = "browser_interact"

    def fields(self, args: JSONObject) -> ActionFields:
        ref = required(args, "ref")
        return only_given(
            ActionFields(
                ref=ref,
                observation_id=text_arg(args, "observation_id"),
                text=text_arg(args, "text"),
                clear=bool(arg(args, "clear", bool)),
            )
        )


class PressKey(BrowserTool):
    kind = "press_key"
    description = (
        "Press a key (Enter, Tab, Escape, ArrowDown, …) in the browser, on an element ref if "
        "given; take a snapshot after one that may navigate."
    )
    parameters = object_schema(
        {
            "ref": {"type": "string", "description": "An element ref from the latest snapshot."},
            "key": {"type": "string", "description": "The key's name, e.g. Enter."},
        },
        ("key",),
    )
    approval = "browser_interact"

    def fields(self, args: JSONObject) -> ActionFields:
        key = required(args, "key")
        return only_given(ActionFields(ref=text_arg(args, "ref"), key=key))


class Wait(BrowserTool):
    kind = "wait"
    description = (
        "Wait until a text appears or an element ref is present in the browser, then return a "
        "fresh snapshot."
    )
    parameters = waiting_schema("An element ref to wait for.", "Visible text to wait for.")

    def fields(self, args: JSONObject) -> ActionFields:
        if not text_arg(args, "ref") and not text_arg(args, "text"):
            raise ToolError("ref or text is required")
        return waiting_fields(args)


class Scroll(BrowserTool):
    kind = "scroll"
    description = (
        "Scroll the browser's page (content above, below or beside the view), then return a "
        "fresh snapshot."
    )
    parameters = object_schema(
        {
            "direction": {
                "type": "string",
                "enum": list(DIRECTIONS),
                "description": "Which way; down if not given.",
            },
            "amount": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_SCROLL,
                "description": "How far, in pixels; 600 if not given.",
            },
        }
    )

    def fields(self, args: JSONObject) -> ActionFields:
        direction = text_arg(args, "direction").strip() or "down"
        if direction not in DIRECTIONS:
            raise ToolError(f"direction must be one of {', '.join(DIRECTIONS)}")
        amount = int(arg(args, "amount", int) or 0)
        if amount < 0:
            raise ToolError("amount must be positive")
        return only_given(ActionFields(direction=direction, amount=min(amount, MAX_SCROLL)))


class Extract(BrowserTool):
    kind = "extract"
    description = (
        "Read the text of the browser's current page (or of one element ref) after a "
        "browser_snapshot, optionally once a text has appeared."
    )
    parameters = waiting_schema(
        "An element ref whose text to read.", "Text to wait for before reading."
    )

    def fields(self, args: JSONObject) -> ActionFields:
        return waiting_fields(args)


class Screenshot(BrowserTool):
    kind = "screenshot"
    description = "Take a screenshot of the browser's page, to check what it looks like."
    parameters = object_schema(
        {"full_page": {"type": "boolean", "description": "The whole page, where supported."}}
    )

    def fields(self, args: JSONObject) -> ActionFields:
        return only_given(ActionFields(full_page=bool(arg(args, "full_page", bool))))


def browser_tools(actions: BrowserActions) -> dict[str, Tool]:
    """The browser tools by name."""
    kinds = (Navigate, Snapshot, Click, TypeText, PressKey, Wait, Scroll, Extract, Screenshot)
    tools = [kind(actions) for kind in kinds]
    return {tool.name: tool for tool in tools}
