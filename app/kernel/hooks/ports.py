"""What the hooks need from project trust, declared here, below the trust that provides it.

A project's hooks run only while the user trusts the project's executable files. The hooks do
not import the trust service: they name what they ask of it (`TrustGate`), and the composition
root hands them `app.kernel.trust.ProjectTrust`, which fits by its shape. `Snapshot`, what one
reading of a project's executable files says, is defined here so both sides share it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Snapshot:
    """A project's executable files, read once: their bytes (present ones only) and digest."""

    project_id: str
    path: Path
    files: Mapping[str, bytes]
    digest: str
    trusted: bool


class TrustGate(Protocol):
    """Whether a project's executable files are trusted, as one snapshot of them."""

    def snapshot(self, project_id: str) -> Snapshot:
        """Read the project's executable files once and say whether that content is trusted."""
        ...

    async def adopt(self, before: Snapshot, rel: str, written: bytes) -> None:
        """The user wrote `written` as `rel` through the kernel: keep trusting what they wrote
        if the files were trusted just before."""
        ...

    async def requested(self, snap: Snapshot) -> None:
        """A turn would have run something of the untrusted `snap`: announce it."""
        ...
