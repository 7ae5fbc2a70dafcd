"""What of the installed plugins outlives a restart: `plugins.json` (which are disabled, where
each came from) and a replacement a crash caught halfway (`.staging/<install>/previous/<name>/`,
the plugin moved aside, which the start puts back)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from app.kernel.plugins.manifest import valid_name
from app.logs import get_logger
from app.staging import STAGING

PREVIOUS = "previous"  # in an install's staging: the plugin a replacement moved aside


def moved_aside(root: Path) -> list[Path]:
    """`.staging/<install>/previous/<name>/` directories, never through a link."""

    def dirs(path: Path) -> list[Path]:
        try:
            with os.scandir(path) as entries:
                return sorted(Path(e.path) for e in entries if e.is_dir(follow_symlinks=False))
        except (FileNotFoundError, NotADirectoryError):
            return []

    found = []
    for staged in dirs(root / STAGING):
        if (staged / PREVIOUS).is_symlink():
            continue
        found += [p for p in dirs(staged / PREVIOUS) if valid_name(p.name)]
    return found


def load_state(state_file: Path) -> tuple[frozenset[str], dict[str, str]]:
    """`plugins.json`: the disabled plugins and where each came from; a file that cannot be
    read counts every plugin as enabled."""
    try:
        raw = json.loads(state_file.read_bytes())
    except FileNotFoundError:
        return frozenset(), {}
    except (OSError, ValueError) as exc:
        log = get_logger("foya.plugins")
        log.warning("plugins.json cannot be read: every plugin counts as enabled", error=str(exc))
        return frozenset(), {}
    raw = raw if isinstance(raw, dict) else {}
    disabled = raw.get("disabled")
    disabled = disabled if isinstance(disabled, list) else []
    sources = raw.get("sources")
    sources = sources if isinstance(sources, dict) else {}
    return (
        frozenset(n for n in disabled if isinstance(n, str) and valid_name(n)),
        {k: v for k, v in sources.items() if valid_name(k) and isinstance(v, str)},
    )
