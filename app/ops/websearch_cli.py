"""`foya web-search`: the web search settings of a running kernel, over its REST API
(`/web-search`), as Foya's CLI has them: `show`, `test QUERY…`, `set-google ID CX API_KEY`; and
ours, `set-searxng ID ENDPOINT`.

Like app.ops.context_cli, it takes the client flags of `foya sessions` and `--json`, prints plain
text (or the kernel's JSON), and exits 0, 1 (the kernel answered an error) or 2 (no answer).
`set-google` and `set-searxng` replace every provider with that one and make it the default, as
Foya's `set-google` does. An API_KEY of `-` is read from stdin, which keeps it out of `ps` and
the shell's history; a literal API_KEY is refused (app.ops.secretargs), so Foya's
`set-google ID CX KEY` becomes `… set-google ID CX -` with the key on stdin. `test` asks the
default provider (DuckDuckGo when none is set) through `POST /web-search/test`, so it shows at
most 3 results; `--provider ID` asks another one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from app.jsontypes import JSONObject
from app.ops.client_flags import Client, client_flags, fail

if TYPE_CHECKING:
    from app.ops.commands import Command, Console
    from app.ops.rest import Rest

web_search_cli = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@web_search_cli.callback(invoke_without_command=True)
def web_search(ctx: typer.Context) -> None:
    """Web search providers: show, test, set-google, set-searxng. Without a command, `show`."""
    if ctx.invoked_subcommand is None:
        show()


@web_search_cli.command()
@client_flags()
def show(*, client: Client) -> None:
    """Print the settings: whether search is on, and each provider (keys never shown)."""
    client.run(_show)


@web_search_cli.command()
@client_flags()
def test(
    query: Annotated[list[str], typer.Argument(metavar="QUERY…")],
    provider: Annotated[
        str | None,
        typer.Option("--provider", metavar="ID", help="A provider other than the default."),
    ] = None,
    *,
    client: Client,
) -> None:
    """Search once with the default provider and print what it found."""
    text = " ".join(query).strip()
    if not text:
        fail("give a QUERY")
    client.run(_test(text, provider))


@web_search_cli.command("set-google")
@client_flags()
def set_google(
    provider_id: Annotated[str, typer.Argument(metavar="ID")],
    cx: Annotated[str, typer.Argument(metavar="CX", help="The search engine id.")],
    api_key: Annotated[
        str, typer.Argument(metavar="API_KEY", help="Only `-`, which reads it from stdin.")
    ],
    *,
    client: Client,
) -> None:
    """Use Google Custom Search, and only it."""
    provider = {
        "id": provider_id,
        "name": "Google Custom Search (legacy)",
        "kind": "google_cse",
        "enabled": True,
        "search_engine_id": cx,
        "api_key": _key(api_key),
    }
    client.run(_only(provider))


@web_search_cli.command("set-searxng")
@client_flags()
def set_searxng(
    provider_id: Annotated[str, typer.Argument(metavar="ID")],
    endpoint: Annotated[
        str,
        typer.Argument(metavar="ENDPOINT", help="The instance's URL (`-` reads it from stdin)."),
    ],
    *,
    client: Client,
) -> None:
    """Use a SearXNG instance (its JSON API), and only it."""
    from app.ops.secretargs import STDIN, check_url, read_stdin

    check_url(endpoint, "ENDPOINT", "give `-` and the URL on stdin")
    if endpoint == STDIN:
        endpoint = read_stdin("ENDPOINT")
    provider = {"id": provider_id, "kind": "searxng", "enabled": True, "endpoint": endpoint}
    client.run(_only(provider))


def _key(value: str) -> str:
    from app.ops.secretargs import check_literal, read_stdin

    check_literal(value, "API_KEY", "give `-` and the key on stdin")
    return read_stdin("API_KEY")


def _show(rest: Rest, con: Console) -> int:
    settings = rest.call("GET", "/web-search")
    _print(settings, con)
    return 0


def _print(settings: JSONObject, con: Console) -> None:
    if con.as_json:
        con.data(settings)
        return
    default = settings.get("default_provider") or "duckduckgo (none set)"
    con.line(f"web search: {'enabled' if settings['enabled'] else 'disabled'}")
    con.line(f"default provider: {default}")
    rows = [["ID", "KIND", "NAME", "ENABLED", "KEY", "ENDPOINT"]]
    for p in settings["providers"]:
        key = "set" if p.get("has_api_key") else "-"
        on = "yes" if p["enabled"] else "no"
        rows.append([p["id"], p["kind"], p["name"], on, key, p.get("endpoint", "")])
    if len(rows) > 1:
        con.table(rows)


def _test(query: str, provider: str | None) -> Command:
    def command(rest: Rest, con: Console) -> int:
        chosen = provider
        if chosen is None:
            settings = rest.call("GET", "/web-search")
            if not settings["enabled"]:
                con.note("web search is disabled")
                return 1
            chosen = settings.get("default_provider") or "duckduckgo"
        results = rest.call("POST", "/web-search/test", {"provider_id": chosen, "query": query})
        if con.as_json:
            con.data({"provider": chosen, "results": results})
            return 0
        con.line(f"provider: {chosen}")
        for row in results:
            con.line(f"{row['rank']}. {row['title']}")
            con.line(f"   {row['url']}")
            if row.get("snippet"):
                con.line(f"   {row['snippet']}")
        return 0

    return command


def _only(provider: JSONObject) -> Command:
    def command(rest: Rest, con: Console) -> int:
        body = {"enabled": True, "default_provider": provider["id"], "providers": [provider]}
        _print(rest.call("PUT", "/web-search", body), con)
        return 0

    return command
