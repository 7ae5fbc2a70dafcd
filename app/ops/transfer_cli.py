"""`foya import SOURCE PATH` and `foya export DEST`: histories into and out of a running kernel
(app.ops.transfer), with the client flags of `foya sessions` and a progress bar on stderr.

Exit codes: 0 done, 1 a bad source or the kernel's refusal (nothing was imported), 2 the
kernel could not be reached or a flag is wrong.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from app.ops.client_flags import Client, client_flags, fail
from app.ops.progress import Progress

if TYPE_CHECKING:
    from app.imports.model import ImportBundle

PASSPHRASE_ENV = "FOYA_IMPORT_PASSPHRASE"  # noqa: S105 (a variable name)
PASSPHRASE_INSTEAD = f"give `--passphrase -` and type it on stdin, or set {PASSPHRASE_ENV}"


PassphraseOpt = Annotated[
    str | None,
    typer.Option(
        "--passphrase",
        metavar="TEXT",
        help=f"An encrypted ChatBuddy backup's passphrase: only `-`, which reads it "
        f"from stdin (else ${PASSPHRASE_ENV}).",
    ),
]
WithKeysOpt = Annotated[
    bool, typer.Option("--with-keys", help="Also import providers as connections, keys too.")
]
ImagesDirOpt = Annotated[
    Path | None, typer.Option("--images-dir", metavar="DIR", help="ChatBuddy's images/ folder.")
]
ProjectIdOpt = Annotated[
    str | None,
    typer.Option("--project-id", metavar="ID", help="Put the sessions (and rules) in it."),
]


def _refused(message: str) -> NoReturn:
    typer.echo(f"foya: {message}", err=True)
    raise typer.Exit(1)


def _talk(client: Client, work: Callable[[Any], Any]) -> Any:
    """Run `work(target)`, mapping the kernel's refusals (exit 1) and silence (exit 2)."""
    import httpx

    from app.ops.rest import KernelError, Unreachable, unreachable

    target = client.target()
    try:
        return work(target)
    except KernelError as exc:
        _refused(target.explain(exc))
    except Unreachable as exc:
        fail(str(exc))
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        fail(unreachable(target, exc))
    except httpx.TransportError as exc:
        fail(unreachable(target, exc, connecting=False))


@client_flags()
def import_(
    source: Annotated[str, typer.Argument(metavar="SOURCE", hidden=True)],
    path: Annotated[Path, typer.Argument(metavar="PATH", hidden=True)],
    *,
    client: Client,
    passphrase: PassphraseOpt = None,
    with_keys: WithKeysOpt = False,
    images_dir: ImagesDirOpt = None,
    project_id: ProjectIdOpt = None,
) -> None:
    """Import another tool's history or a Foya export.

    SOURCE is chatbuddy (PATH: a backup), claude-code, codex or opencode (PATH: a transcript or
    a folder of them) or foya (PATH: an archive of `foya export`). All or nothing; importing
    the same thing again adds only what is new.
    """
    from app.imports.sources import SOURCES
    from app.ops import transfer

    if source not in SOURCES:
        fail(f"SOURCE must be one of {', '.join(SOURCES)}")
    if not path.exists():
        fail(f"{path} does not exist")
    from app.ops.secretargs import STDIN, check_literal

    check_literal(passphrase, "--passphrase", PASSPHRASE_INSTEAD)
    if passphrase == STDIN:
        passphrase = sys.stdin.readline().rstrip("\n")
    passphrase = passphrase or os.environ.get(PASSPHRASE_ENV) or None
    file, bundle = _read(source, path, passphrase, images_dir)
    fields = {"source": "foya", "with_keys": "true" if with_keys else "false"}
    if project_id:
        fields["project_id"] = project_id
    with file, Progress("uploading") as progress:
        summary = _talk(client, lambda target: transfer.upload(target, file, fields, progress))
    summary = transfer.merge_report(summary, bundle)
    if client.as_json:
        typer.echo(json.dumps(summary, ensure_ascii=False, indent=2))
    else:
        for line in transfer.describe(summary):
            typer.echo(line)


def _read(
    source: str, path: Path, passphrase: str | None, images_dir: Path | None
) -> tuple[IO[bytes], ImportBundle | None]:
    """What to upload: a Foya archive as it is, else the source parsed here into a bundle (and
    that bundle, whose local skips join the kernel's summary); exit 1 on a bad source."""
    from app.errors import FoyaError
    from app.imports import sources
    from app.ops import transfer

    with Progress(f"reading {source}") as progress:
        try:
            if source == "foya":
                return path.open("rb"), None
            bundle = sources.parse(
                source, path, passphrase=passphrase, images_dir=images_dir, progress=progress
            )
            return transfer.bundle_file(bundle), bundle
        except FoyaError as exc:
            _refused(exc.message)
        except OSError as exc:
            _refused(f"cannot read {path}: {exc.strerror or exc}")


@client_flags(json=False)
def export(
    dest: Annotated[Path, typer.Argument(metavar="DEST", hidden=True)],
    session: Annotated[
        list[str] | None,
        typer.Option("--session", metavar="ID", help="Export this session (repeatable)."),
    ] = None,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="One session's readable transcript instead.")
    ] = False,
    *,
    client: Client,
) -> None:
    """Export sessions as a portable archive.

    DEST is the file to write (or a folder to write it in). Every session unless --session
    names some; `foya import foya` reads the archive.
    """
    from urllib.parse import quote

    from app.ops import transfer

    ids = session or []
    if markdown and len(ids) != 1:
        fail("--markdown exports one session: give exactly one --session")
    if dest.is_dir():
        name = ids[0] if len(ids) == 1 else "sessions"
        dest = dest / f"foya-{name}.{'md' if markdown else 'zip'}"
    if markdown:
        path = f"/sessions/{quote(ids[0], safe='')}/export?format=markdown"
    else:
        path = "/export" + (
            "?" + "&".join(f"session={quote(s, safe='')}" for s in ids) if ids else ""
        )
    with Progress("exporting") as progress:
        size = _talk(client, lambda target: transfer.download(target, path, dest, progress))
    typer.echo(f"wrote {dest} ({size / 1e6:.1f} MB)")
