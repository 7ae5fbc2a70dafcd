"""The `foya rules`, `foya memory` and `foya skills` command groups: the user's context on a
running kernel, over its REST API (app.ops.context_commands, app.ops.skill_commands), as Foya's
CLI has them.

`app.cli` registers the three groups. Like app.ops.client_cli, this module imports only typer at
the top: each command imports its client when it runs. Every command takes the client flags of
`foya sessions` (`--socket`, `--url`, `--token-file`, `--cacert`, `--data-dir`), `--project ID`
for a project's scope (else global) where a scope applies, and `--json` where it prints data.
TEXT is the command line's words, or stdin when they are none.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from app.ops.client_flags import Client, client_flags, fail

CONTEXT = {"help_option_names": ["-h", "--help"]}
ProjectOpt = Annotated[
    str | None,
    typer.Option(
        "--project", "--project-id", metavar="ID", help="A project's (default: the global ones)."
    ),
]
TextArg = Annotated[list[str] | None, typer.Argument(metavar="TEXT", hidden=True)]


def _group() -> typer.Typer:
    """A command group; its help is its callback's docstring."""
    return typer.Typer(add_completion=False, rich_markup_mode=None, context_settings=CONTEXT)


rules_cli, memory_cli, skills_cli = _group(), _group(), _group()


def _text(words: list[str] | None) -> str:
    """TEXT from the command line, else from stdin when it is not a terminal."""
    text = " ".join(words or ()).strip()
    if not text and not sys.stdin.isatty():
        text = sys.stdin.read().strip()
    if not text:
        fail("give TEXT, or pipe it on stdin")
    return text


# ---------------------------------------------------------------------------------------- rules


@rules_cli.callback(invoke_without_command=True)
def rules(ctx: typer.Context) -> None:
    """Rules the model follows: list, show, add, edit, delete.

    The global rules are ~/.foya/rules/user_rules.md, a project's are the files below
    <project>/.foya/rules/ (`edit-path` prints where). Without a command, `list`.
    """
    if ctx.invoked_subcommand is None:
        rules_list()


@rules_cli.command("list")
@client_flags()
def rules_list(project: ProjectOpt = None, *, client: Client) -> None:
    """List the global rules, or a project's."""
    from app.ops import context_commands as cc

    client.run(cc.rules_list(project))


@rules_cli.command("show")
@client_flags()
def rules_show(
    rule_id: Annotated[str, typer.Argument(metavar="RULE_ID", hidden=True)],
    project: ProjectOpt = None,
    *,
    client: Client,
) -> None:
    """Print a rule: its fields, then its content."""
    from app.ops import context_commands as cc

    client.run(cc.rules_show(rule_id, project))


@rules_cli.command("add")
@client_flags()
def rules_add(text: TextArg = None, project: ProjectOpt = None, *, client: Client) -> None:
    """Add a rule whose content is TEXT (applied always)."""
    from app.ops import context_commands as cc

    command = cc.rules_add(project, _text(text))
    client.run(command)


@rules_cli.command("edit")
@client_flags()
def rules_edit(
    rule_id: Annotated[str, typer.Argument(metavar="RULE_ID", hidden=True)],
    text: TextArg = None,
    *,
    client: Client,
) -> None:
    """Replace a rule's content with TEXT.

    Its name, description, trigger and globs stay as they are.
    """
    from app.ops import context_commands as cc

    command = cc.rules_edit(rule_id, _text(text))
    client.run(command)


@rules_cli.command("delete")
@client_flags(json=False)
def rules_delete(
    rule_id: Annotated[str, typer.Argument(metavar="RULE_ID", hidden=True)],
    *,
    client: Client,
) -> None:
    """Delete a rule (a project rule's file is removed)."""
    from app.ops import context_commands as cc

    client.run(cc.rules_delete(rule_id))


@rules_cli.command("edit-path")
@client_flags(json=False)
def rules_edit_path(
    rule_id: Annotated[str | None, typer.Argument(metavar="RULE_ID", hidden=True)] = None,
    project: ProjectOpt = None,
    *,
    client: Client,
) -> None:
    """Print where to edit rules by hand.

    The global rules file, a project's rules directory, or with RULE_ID that rule's file.
    Paths are on the kernel's machine (`~` is its user's home when it is reached by --url).
    """
    from app.ops import context_commands as cc

    client.run(cc.rules_edit_path(rule_id, project))


# --------------------------------------------------------------------------------------- memory


@memory_cli.callback(invoke_without_command=True)
def memory(ctx: typer.Context) -> None:
    """The model's memory: show, set, clear, status, enable, disable.

    The global memory is ~/.foya/memory/user_profile.md, each project has its own file
    (`edit-path` prints where). Without a command, `show`.
    """
    if ctx.invoked_subcommand is None:
        memory_show()


@memory_cli.command("show")
@client_flags()
def memory_show(project: ProjectOpt = None, *, client: Client) -> None:
    """Print the global memory, or a project's."""
    from app.ops import context_commands as cc

    client.run(cc.memory_show(project))


@memory_cli.command("status")
@client_flags()
def memory_status(*, client: Client) -> None:
    """Print whether memory is given to the model."""
    from app.ops import context_commands as cc

    client.run(cc.memory_settings(None))


@memory_cli.command("enable")
@client_flags()
def memory_enable(*, client: Client) -> None:
    """Give memory to the model."""
    from app.ops import context_commands as cc

    client.run(cc.memory_settings(True))


@memory_cli.command("disable")
@client_flags()
def memory_disable(*, client: Client) -> None:
    """Stop giving memory to the model (the files stay)."""
    from app.ops import context_commands as cc

    client.run(cc.memory_settings(False))


@memory_cli.command("set")
@client_flags()
def memory_set(text: TextArg = None, project: ProjectOpt = None, *, client: Client) -> None:
    """Replace the global memory, or a project's, with TEXT."""
    from app.ops import context_commands as cc

    command = cc.memory_set(project, _text(text))
    client.run(command)


@memory_cli.command("clear")
@client_flags(json=False)
def memory_clear(project: ProjectOpt = None, *, client: Client) -> None:
    """Empty the global memory, or a project's."""
    from app.ops import context_commands as cc

    client.run(cc.memory_clear(project))


@memory_cli.command("edit-path")
@client_flags(json=False)
def memory_edit_path(project: ProjectOpt = None, *, client: Client) -> None:
    """Print where to edit memory by hand.

    The global memory file, or a project's.
    Paths are on the kernel's machine (`~` is its user's home when it is reached by --url).
    """
    from app.ops import context_commands as cc

    client.run(cc.memory_edit_path(project))


# --------------------------------------------------------------------------------------- skills

RefArg = Annotated[str, typer.Argument(metavar="REF", hidden=True)]


@skills_cli.callback(invoke_without_command=True)
def skills(ctx: typer.Context) -> None:
    """Skills the model can load: list, show, enable, disable.

    A skill is a SKILL.md in ~/.foya/skills/<name>/ or <project>/.foya/skills/<name>/ (also
    .agents/skills/; `edit-path` prints where). REF is a skill's ref (`global:<name>`,
    `project:<id>:<name>`, `builtin:<name>`) or its name. Without a command, `list`.
    """
    if ctx.invoked_subcommand is None:
        skills_list()


@skills_cli.command("list")
@client_flags()
def skills_list(project: ProjectOpt = None, *, client: Client) -> None:
    """List every skill, disabled ones too.

    The built-in and global skills; with --project, the project's as well.
    """
    from app.ops import skill_commands as sc

    client.run(sc.skills_list(project))


@skills_cli.command("show")
@client_flags()
def skills_show(ref: RefArg, project: ProjectOpt = None, *, client: Client) -> None:
    """Print a skill's fields."""
    from app.ops import skill_commands as sc

    client.run(sc.skills_show(ref, project))


@skills_cli.command("enable")
@client_flags(json=False)
def skills_enable(ref: RefArg, project: ProjectOpt = None, *, client: Client) -> None:
    """Let the model load a skill."""
    from app.ops import skill_commands as sc

    client.run(sc.skills_enable(ref, project, True))


@skills_cli.command("disable")
@client_flags(json=False)
def skills_disable(ref: RefArg, project: ProjectOpt = None, *, client: Client) -> None:
    """Keep a skill from the model (its files stay)."""
    from app.ops import skill_commands as sc

    client.run(sc.skills_enable(ref, project, False))


@skills_cli.command("edit-path")
@client_flags(json=False)
def skills_edit_path(
    ref: Annotated[str | None, typer.Argument(metavar="REF", hidden=True)] = None,
    project: ProjectOpt = None,
    *,
    client: Client,
) -> None:
    """Print where to edit skills by hand.

    A skill's SKILL.md, or the directory new skills go in (global, or a project's).
    Paths are on the kernel's machine (`~` is its user's home when it is reached by --url).
    """
    from app.ops import skill_commands as sc

    client.run(sc.skills_edit_path(ref, project))
