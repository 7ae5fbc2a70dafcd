"""Names for JSON that is untyped by nature: what `json` decodes from a source we do not shape.

Tool arguments a model sends, a provider's messages, a foreign tool's files: their keys and
values are whatever the other side wrote, and the code that reads them checks each field it
uses. Shapes the kernel builds itself get a TypedDict or a model instead.
"""

from __future__ import annotations

from typing import Any, TypeAlias

#: A decoded JSON object from outside: tool arguments, provider messages, foreign records.
JSONObject: TypeAlias = dict[str, Any]
