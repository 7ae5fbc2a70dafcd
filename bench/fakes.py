"""The fake OpenAI-compatible provider of tests/, for the benchmarks.

`tests/` is not a package: its modules import each other by top-level name, as pytest's
rootdir-relative import mode arranges. This module puts tests/ on sys.path (appended, so it
shadows nothing) and re-exports what the benchmarks use; mypy finds it through `mypy_path` in
pyproject.toml.
"""
# ruff: noqa: E402

from __future__ import annotations

import os
import sys

from bench.harness import ROOT

_TESTS = os.path.join(ROOT, "tests")
if _TESTS not in sys.path:
    sys.path.append(_TESTS)

from support.fake_provider import (
    API_KEY,
    Chunk,
    FakeProvider,
    Recorded,
    Script,
    answer,
    encode,
    finish,
    garbage,
    reply,
    text,
    usage,
)
from support.fake_telegram import TOKEN as TELEGRAM_TOKEN
from support.fake_telegram import FakeTelegram, visible

__all__ = [
    "API_KEY",
    "TELEGRAM_TOKEN",
    "Chunk",
    "FakeProvider",
    "FakeTelegram",
    "Recorded",
    "Script",
    "answer",
    "encode",
    "finish",
    "garbage",
    "reply",
    "text",
    "usage",
    "visible",
]
