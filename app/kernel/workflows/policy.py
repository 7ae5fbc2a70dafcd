"""What plan mode allows and what it tells the model (Foya's plan workflow policy).

While a session's plan workflow is open (`active` or `ready`) its turns may use only the tools
that change nothing (`PLAN_TOOLS`, Foya's list; names not registered here are simply absent),
and every model request carries `instructions`. Approving the plan lifts both; the execution
turn is told where the approved plan is (`execution_prompt`).
"""

from __future__ import annotations

PLAN_TOOLS = frozenset(
    {
        "read",
        "web_search",
        "web_fetch",
        "skill_search",
        "skill_load",
        "skill_read_resource",
        "rule_load",
        "ask_user",
        "history_read_tool_result",
    }
)


def instructions(goal: str) -> str:
    """The system-prompt note of a session in plan mode."""
    return (
        "You are in plan mode.\n"
        f"Goal: {goal}\n\n"
        "Investigate with the read-only tools available to you. Do not change files, run "
        "commands, start sub-agents or cause any other side effect. Give the complete plan as "
        "your final answer."
    )


def execution_prompt(path: str | None) -> str:
    """The user message that starts carrying out an approved plan."""
    return (
        f"Carry out the approved plan in {path} now. Do not make another plan and do not wait "
        "for another confirmation."
    )
