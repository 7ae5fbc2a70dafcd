"""Hooks: the user's own commands, run at points of a turn (Foya's `hooks`).

Configuration (`config`). `~/.foya/hooks.json` (scope `global`) and `<project>/.foya/hooks.json`
(scope `project`) each hold a JSON array of hooks `{id?, name?, event, matcher?, command,
timeout?, async?, enabled?, may_approve?}`. A session's turn runs the global hooks of an event,
then its project's, all of them (a project hook never replaces a global one). A project's hooks
run only while the user trusts that project's content (`app.kernel.trust`; Foya runs them
unasked); the user's own are always trusted. The files are the source
of truth: a hand edit counts from the next run on. `GET|PUT /hooks` read and replace one scope's
file (atomic, 0600). Every event of Foya's configuration is accepted and kept, but this kernel
runs three (`service`): `UserPromptSubmit` (may deny the prompt), `Stop` (may ask for one more
step) and `PermissionRequest` (may deny a tool call, and approve it only if the hook has
`"may_approve": true`, in any approval mode: without it an `allow` is recorded as `none` and the
user or the guardian decides; `matcher` is a regular expression searched in the tool's name).

The contract with a hook command (`process`, Foya's):

- it runs as `/bin/sh -c <command>` in the session's working directory, in a process group of
  its own, with the request on stdin as a JSON object: `version` (1), `event_id`, `event`,
  `occurred_at`, `session_id`, `root_session_id`, `run_id`, `cwd`, `project_id`,
  `project_path`, `model` and the event's own fields (`user_prompt`; `assistant_message` for
  Stop; `tool_name`, `tool_call_id` (the approval request's id, as Foya sends it) and
  `metadata {action, detail, resource, scope}` for PermissionRequest); empty fields are left
  out;
- its environment is clean: only `PATH`, `HOME`, `USER`, `LOGNAME`, `SHELL`, `LANG`,
  `LANGUAGE`, `LC_*`, `TZ` and `TMPDIR` of the kernel's own (none of its tokens, keys or
  `FOYA_*` settings), plus `FOYA_HOOK_EVENT`, `FOYA_HOOK_EVENT_ID`, `FOYA_HOOK_SESSION_ID`,
  `FOYA_HOOK_RUN_ID`, `FOYA_HOOK_PROJECT_ID`, `FOYA_HOOK_PROJECT_PATH`, `FOYA_HOOK_TOOL_NAME`
  and `FOYA_HOOK_TOOL_CALL_ID`;
- exit 2 denies (stderr is the reason), exit 49 denies and halts; exit 0 with stdout empty or a
  JSON object `{decision: none|allow|deny, halt, reason, context, updated_input}`; any other
  exit, invalid JSON, more than 64 KiB on stdout or stderr, or the timeout (`timeout` seconds,
  default 30, at most 600) is a hook error: the turn goes on as if the hook had not run;
- at its timeout, or when its turn is cancelled, its whole process group is killed. A hook
  marked `async` runs beside the turn and cannot change it.

The hooks of one event run side by side (Foya runs them one after another), so a turn waits at
most the longest of their timeouts; their word is merged in configuration order.

Every run is a stored `hook_completed` fact of the session (Foya's payload). A configuration
file that cannot be read is reported the same way, as a run named `configuration`.

Errors (rendered by `app.http.errors`): `InvalidHooks` 400 `bad_request` (a configuration that
breaks the rules above, as Foya words it); a bad scope or a missing `project_id` 400
`invalid_context_item`, an unknown project 404 `not_found` (as for rules); `HooksUnreadable`
500 `context_item_failed` (on GET, a hand-edited file that is not valid, as Foya answers).
"""

from typing import TYPE_CHECKING

from app.kernel.lazyexports import LazyExports

if TYPE_CHECKING:
    from app.kernel.hooks.config import Hook, HooksUnreadable, InvalidHooks
    from app.kernel.hooks.service import Hooks, Outcome
    from app.kernel.turns.ports import PERMISSION_REQUEST, STOP, USER_PROMPT_SUBMIT

# Imported on first lookup: trust reads the configuration's rules (`config`) at start, and
# importing one module of a package runs its `__init__`; the hooks run with the turn core.
__getattr__ = LazyExports(
    __name__,
    {
        "app.kernel.hooks.config": ("Hook", "HooksUnreadable", "InvalidHooks"),
        "app.kernel.hooks.service": ("Hooks", "Outcome"),
        "app.kernel.turns.ports": ("PERMISSION_REQUEST", "STOP", "USER_PROMPT_SUBMIT"),
    },
)

__all__ = [
    "PERMISSION_REQUEST",
    "STOP",
    "USER_PROMPT_SUBMIT",
    "Hook",
    "Hooks",
    "HooksUnreadable",
    "InvalidHooks",
    "Outcome",
]
