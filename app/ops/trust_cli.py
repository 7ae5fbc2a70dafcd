"""The `foya projects` command group: a project's trust on a running kernel, over its REST API
(`GET|PUT|DELETE /projects/{id}/trust`, `app.kernel.trust`).

- `show-trust ID`: the state, the digest, and every command the project would run, by file;
- `trust ID [--digest D]`: trust the files as they are now (with `--digest`, only if they still
  have the digest `show-trust` printed: the kernel answers 409 `trust_digest_changed` if not);
- `untrust ID`: nothing of the project runs until it is trusted again.

`app.cli` registers the group. Every command takes the client flags of `foya sessions`
(`--socket`, `--url`, `--token-file`, `--cacert`, `--data-dir`) and `--json` (the kernel's JSON
as it came). Like app.ops.mcp_cli, only typer is imported at the top.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from app.ops.client_flags import Client, client_flags, fail

if TYPE_CHECKING:
    from app.ops.commands import Command, Console
    from app.ops.rest import Rest

CONTEXT = {"help_option_names": ["-h", "--help"]}
projects_cli = typer.Typer(add_completion=False, rich_markup_mode=None, context_settings=CONTEXT)
IdArg = Annotated[str, typer.Argument(metavar="ID", help="The project's id (GET /projects).")]


def _route(project_id: str) -> str:
    """The trust route of `project_id`; an id that would leave it is refused here."""
    if not project_id.strip() or "/" in project_id or project_id in (".", ".."):
        fail(f"not a project id: {project_id!r}")
    return f"/projects/{project_id}/trust"


def _print(info: Any, con: Console) -> None:
    """A `TrustInfo` as text: state and digest, then one line per thing it would run."""
    if con.as_json:
        con.data(info)
        return
    con.line(f"project  {info['project_id']}  {info['path']}")
    con.line(f"state    {info['state']}")
    con.line(f"digest   {info['digest']}")
    if info.get("trusted_digest") and info["trusted_digest"] != info["digest"]:
        con.line(f"trusted  {info['trusted_digest']} (the files changed since)")
    for error in info.get("errors", ()):
        con.line(f"error    {error}")
    runs = info.get("runs") or []
    if not runs:
        con.line("runs     nothing")
        return
    rows = [("FILE", "EVENT", "MATCHER", "FLAGS", "COMMAND")]
    for r in runs:
        flags = ",".join(
            f
            for f, on in (
                ("may_approve", r.get("may_approve")),
                ("off", not r.get("enabled", True)),
            )
            if on
        )
        rows.append((r["file"], r["event"], r.get("matcher") or "", flags, r["command"]))
    con.table(rows)


def call(method: str, project_id: str, body: Any = None) -> Command:
    """One trust call, its answer printed."""
    route = _route(project_id)

    def command(rest: Rest, con: Console) -> int:
        _print(rest.call(method, route, body), con)
        return 0

    return command


@projects_cli.callback()
def projects() -> None:
    """A project's trust: show-trust, trust, untrust.

    A project's own hooks (<project>/.foya/hooks.json) run only once you trust the project,
    and only while its files are exactly what you trusted.
    """


@projects_cli.command("show-trust")
@client_flags()
def show_trust(project_id: IdArg, *, client: Client) -> None:
    """Whether the project is trusted, and every command it would run."""
    client.run(call("GET", project_id))


@projects_cli.command("trust")
@client_flags()
def trust(
    project_id: IdArg,
    digest: Annotated[
        str | None,
        typer.Option("--digest", metavar="D", help="Only if the files still have this digest."),
    ] = None,
    *,
    client: Client,
) -> None:
    """Trust the project's executable files as they are now; a later change asks again."""
    client.run(call("PUT", project_id, {"digest": digest} if digest else {}))


@projects_cli.command("untrust")
@client_flags()
def untrust(project_id: IdArg, *, client: Client) -> None:
    """Withdraw trust: none of the project's hooks run until it is trusted again."""
    client.run(call("DELETE", project_id))
