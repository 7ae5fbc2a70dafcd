"""Request and response models of rewind and file review.

Response fields with a fixed set of values are typed with the kernel's own `Literal`s, so the
schema lists them (a one-value `Literal` is documented as an enum too, not a `const`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.http.models.common import NonNegative, Strict, one_of
from app.kernel.api import FileAction, Status

_FORCE = "Keys of `modified` files to restore anyway, overwriting the edits made after the agent's."


class Rewind(Strict):
    """Empty (or `confirm: false`) previews; a confirm repeats what the preview returned:
    `head_seq` as `expected_head_seq`, `file_state_token` as `expected_file_state`."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {},
                {"confirm": True, "expected_head_seq": 42, "expected_file_state": "9f2c…"},
            ]
        }
    )

    confirm: StrictBool = Field(False, description="`true` rewinds; `false` or absent previews.")
    expected_head_seq: NonNegative | None = Field(
        None,
        description="Needed to confirm: the preview's `head_seq`. 409 `history_changed` if the "
        "session's history moved since.",
    )
    expected_file_state: str | None = Field(
        None,
        description="Needed to confirm: the preview's `file_state_token`. 409 "
        "`file_state_changed` if a file changed since.",
    )
    force_file_keys: list[str] | None = Field(None, description=_FORCE)


class FilePreview(BaseModel):
    key: str = Field(description="The file's handle in `force_file_keys`.")
    path: str
    status: Status = Field(
        description="`ready`: as the agent left it; `mergeable`: edited since, the agent's "
        "changes can still be taken out by a three-way merge; `modified`: edited since in a way "
        "that conflicts, left alone unless forced."
    )
    additions: int
    deletions: int
    diff: str = Field(description="What restoring (undoing) it would apply, as a unified diff.")
    action: FileAction | None = Field(None, description="What a confirmed rewind did to it.")


class Rewound(BaseModel):
    status: Literal["confirmation_required", "rewound"] = Field(
        description="`confirmation_required` for a preview, `rewound` once confirmed."
    )
    message: str = Field(description="The rewound user message's text, for the composer.")
    files: list[FilePreview]
    file_state_token: str = Field(
        description="In a preview: send it back as `expected_file_state` to confirm. Empty "
        "once rewound."
    )
    head_seq: int = Field(
        description="The session's history head. In a preview: send it back as "
        "`expected_head_seq` to confirm."
    )


class FileReview(BaseModel):
    files: list[FilePreview]
    file_state_token: str = Field(description="Send it back as `expected_file_state`.")
    through_seq: int = Field(
        description="The last event seq this review covers: send it back as `expected_through_seq`."
    )


class ResolveFileReview(Strict):
    action: Annotated[str, one_of("keep", "undo")]
    expected_through_seq: NonNegative = Field(
        description="`through_seq` from `GET …/file-review`; 409 if new changes arrived since."
    )
    expected_file_state: str = Field(
        description="`file_state_token` from `GET …/file-review`; 409 if a file changed since."
    )
    force_file_keys: list[str] | None = Field(None, description=_FORCE)


class Resolved(BaseModel):
    status: Annotated[Literal["resolved"], one_of("resolved")]
