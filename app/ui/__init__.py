"""The web client: its files, served at `/ui/` by app.http.ui, and where they come from.

- `static/`: what the browser loads, as is (no build step): `index.html`, the styles, the ES
  modules under `js/`, the PWA's `manifest.webmanifest`, `sw.js` and `icons/`, and `vendor/`,
  the libraries copied byte for byte from npm with their licences and `MANIFEST.json`.
- `npm/`: the exact pins and the lock those libraries come from (`python -m tools.vendor`);
  not shipped, only `static/` is package data.
"""

from __future__ import annotations

from pathlib import Path

#: The directory served at `/ui/`.
STATIC = Path(__file__).resolve().parent / "static"
