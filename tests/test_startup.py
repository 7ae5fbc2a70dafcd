"""What `foya serve` loads before it listens: heavy optional libraries wait for their first use.

The `openai` SDK (~0.3 s, ~15 MB) and Pillow's native libraries made every start slower and every
idle kernel larger (bench/http.py). Checked in a fresh interpreter that builds the app and starts
the kernel the way `foya serve` does; then a provider client and an image upload load them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import asyncio, io, json, sys
from pathlib import Path

from app.logs import configure_logging
from app.main import create_app
from app.settings import Settings
import app.serve.listeners  # noqa: F401  (everything `foya serve` imports)

configure_logging("json", "warning")
HEAVY = ("openai", "PIL", "httpx", "aiohttp")
service = create_app(Settings(data_dir=Path(sys.argv[1])))
kernel = service.kernel
seen = {}


async def main() -> None:
    await kernel.start()
    seen["started"] = [m for m in HEAVY if m in sys.modules]
    fields = {"name": "c", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"}
    conn = await kernel.connections.create(fields)
    kernel.providers.for_connection(conn["id"])  # builds the client; sends nothing
    seen["provider"] = [m for m in HEAVY if m in sys.modules]
    from app.artifacts import _normalize
    try:
        _normalize(b"not an image")
    except Exception as exc:
        seen["upload_error"] = type(exc).__name__
    seen["upload"] = [m for m in HEAVY if m in sys.modules]
    await kernel.close()


asyncio.run(main())
print(json.dumps(seen))
"""


def test_serve_loads_the_model_sdk_and_pillow_on_first_use(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "data")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["started"] == []
    assert seen["provider"] == ["openai", "httpx", "aiohttp"]
    assert seen["upload_error"] == "UnsupportedImage"
    assert seen["upload"] == ["openai", "PIL", "httpx", "aiohttp"]
