"""The wire shapes Foya's desktop client reads, declared by hand, and a checker naming every
difference with its path.

Source: `apps/desktop/src/lib/api.ts` of `freesoulcode/foya` (newest stored version), the store
files that cast SSE payloads (`src/stores/conversation.ts`, `src/stores/interaction.ts`) and, for
the workspace routes whose TypeScript is not in the stored desktop, the Go structs the desktop
decodes (`internal/kernel/workspace_service.go`). Each shape names the interface it paraphrases.

Rules taken from TypeScript: a field without `?` is required; `?` means "absent or of this type"
(`null` is not `undefined`, so an optional field sent as `null` is a difference unless the
interface says `| null`); a string union is the complete set of allowed values; `number` is any
JSON number (never a boolean); fields the interface does not name are allowed (TypeScript ignores
them). `check(shape, value)` returns every violation as `Path.to.field: what is wrong`, e.g.
`Session.agent_mode: 'foo' not in {execute, plan, plan_ready}` or `ProjectInfo.available: missing`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


class Type:
    """One JSON type of a TypeScript declaration."""

    label = "value"

    def violations(self, value: Any, path: str) -> Iterator[str]:
        raise NotImplementedError

    def root(self) -> str:
        """The name a root path starts with."""
        return self.label


@dataclass(frozen=True)
class Scalar(Type):
    label: str = "string"

    def violations(self, value: Any, path: str) -> Iterator[str]:
        ok = {
            "string": isinstance(value, str),
            "number": isinstance(value, int | float) and not isinstance(value, bool),
            "boolean": isinstance(value, bool),
            "unknown": True,
        }[self.label]
        if not ok:
            yield f"{path}: expected {self.label}, got {describe(value)}"


STR = Scalar("string")
NUM = Scalar("number")
BOOL = Scalar("boolean")
ANY = Scalar("unknown")


@dataclass(frozen=True)
class OneOf(Type):
    """A union of literals (`"a" | "b"`, or numbers like `7 | 30`)."""

    values: tuple[Any, ...] = ()

    def violations(self, value: Any, path: str) -> Iterator[str]:
        kinds = {type(v) for v in self.values}
        if isinstance(value, bool) or not isinstance(value, tuple(kinds)):
            wanted = " | ".join(sorted({"string" if k is str else "number" for k in kinds}))
            yield f"{path}: expected {wanted}, got {describe(value)}"
        elif value not in self.values:
            allowed = ", ".join(str(v) if v != "" else "''" for v in self.values)
            yield f"{path}: {value!r} not in {{{allowed}}}"


def one_of(*values: Any) -> OneOf:
    return OneOf(values)


@dataclass(frozen=True)
class ArrayOf(Type):
    item: Type = ANY

    def root(self) -> str:
        return self.item.root()

    def violations(self, value: Any, path: str) -> Iterator[str]:
        if not isinstance(value, list):
            yield f"{path}: expected array, got {describe(value)}"
            return
        for index, element in enumerate(value):
            yield from self.item.violations(element, f"{path}[{index}]")


@dataclass(frozen=True)
class MapOf(Type):
    """`Record<string, T>`."""

    value: Type = ANY

    def violations(self, value: Any, path: str) -> Iterator[str]:
        if not isinstance(value, dict):
            yield f"{path}: expected object, got {describe(value)}"
            return
        for key, element in value.items():
            yield from self.value.violations(element, f"{path}[{key!r}]")


@dataclass(frozen=True)
class Nullable(Type):
    """`T | null`."""

    inner: Type = ANY

    def root(self) -> str:
        return self.inner.root()

    def violations(self, value: Any, path: str) -> Iterator[str]:
        if value is not None:
            yield from self.inner.violations(value, path)


@dataclass(frozen=True)
class Field:
    type: Type
    required: bool = True


def opt(t: Type) -> Field:
    """An optional field (`name?: T`)."""
    return Field(t, required=False)


@dataclass(frozen=True)
class Obj(Type):
    """A TypeScript interface: its name (for paths) and its fields."""

    name: str = "object"
    fields: Mapping[str, Field] = field(default_factory=dict)

    def root(self) -> str:
        return self.name

    def violations(self, value: Any, path: str) -> Iterator[str]:
        if not isinstance(value, dict):
            yield f"{path}: expected object, got {describe(value)}"
            return
        for key, spec in self.fields.items():
            where = f"{path}.{key}"
            if key not in value:
                if spec.required:
                    yield f"{where}: missing"
                continue
            if value[key] is None and not isinstance(spec.type, Nullable) and spec.type is not ANY:
                absent = "" if spec.required else " (an optional field is absent, not null)"
                yield f"{where}: null is not {label(spec.type)}{absent}"
                continue
            yield from spec.type.violations(value[key], where)


def obj(name: str, /, **fields: Type | Field) -> Obj:
    return Obj(name, {k: v if isinstance(v, Field) else Field(v) for k, v in fields.items()})


def extend(base: Obj, name: str, /, **fields: Type | Field) -> Obj:
    """`interface name extends base { … }`."""
    more = {k: v if isinstance(v, Field) else Field(v) for k, v in fields.items()}
    return Obj(name, {**base.fields, **more})


def label(t: Type) -> str:
    if isinstance(t, Obj):
        return t.name
    if isinstance(t, ArrayOf):
        return f"{label(t.item)}[]"
    if isinstance(t, MapOf):
        return "object"
    if isinstance(t, OneOf):
        return "a union value"
    return t.label


def describe(value: Any) -> str:
    kind = {bool: "boolean", str: "string", int: "number", float: "number", list: "array"}
    name = "null" if value is None else kind.get(type(value), "object")
    text = repr(value)
    return f"{name} ({text[:60]}{'…' if len(text) > 60 else ''})"


def check(shape: Type, value: Any) -> list[str]:
    """Every difference between `value` and `shape`, each with its path."""
    return list(shape.violations(value, shape.root()))


# ------------------------------------------------------------------------------- api.ts shapes

REASONING_EFFORT = one_of("", "low", "medium", "high")  # ReasoningEffort
APPROVAL_MODE = one_of("manual", "auto", "full_access")  # ApprovalMode
TOOL_STATUS = one_of("queued", "running", "done", "error")  # ToolCallView["status"]
TURN_STATUS = one_of("completed", "failed", "cancelled")  # ChatMessage["turn_status"]

SESSION_TASK = obj("SessionTask", content=STR, status=one_of("pending", "in_progress", "completed"))
SESSION = obj(
    "Session",
    id=STR,
    parent_id=opt(STR),
    spawned_by=opt(
        obj(
            "Session.spawned_by",
            parent_run_id=opt(STR),
            parent_turn_id=opt(STR),
            parent_tool_call_id=STR,
        )
    ),
    agent_ref=opt(STR),
    agent_name=opt(STR),
    agent_digest=opt(STR),
    phase=STR,
    agent_mode=opt(one_of("execute", "plan", "plan_ready")),
    connection_id=STR,
    model=STR,
    reasoning_effort=opt(REASONING_EFFORT),
    project_id=opt(STR),
    approval_mode=opt(APPROVAL_MODE),
    title=opt(STR),
    title_is_manual=opt(BOOL),
    pinned=opt(BOOL),
    pinned_at=opt(STR),
    tasks=opt(ArrayOf(SESSION_TASK)),
    created_at=STR,
    updated_at=STR,
)
ATTACHMENT = obj(
    "AttachmentRef",
    id=STR,
    name=STR,
    kind=STR,
    media_type=STR,
    bytes=NUM,
    width=opt(NUM),
    height=opt(NUM),
    sha256=opt(STR),
)
BROWSER_ELEMENT = obj(
    "BrowserElementSelection",
    page_url=STR,
    page_title=STR,
    tag=STR,
    selector=STR,
    text=STR,
    html=STR,
)
QUEUED_MESSAGE = obj(
    "QueuedMessage",
    id=STR,
    session_id=STR,
    text=STR,
    skill_ref=opt(STR),
    attachments=opt(ArrayOf(ATTACHMENT)),
    browser_elements=opt(ArrayOf(BROWSER_ELEMENT)),
    position=NUM,
    created_at=STR,
    updated_at=STR,
)
SUBMIT_TURN_RESULT = obj(
    "SubmitTurnResult",
    run_id=opt(STR),
    status=one_of("started", "queued"),
    queued=opt(QUEUED_MESSAGE),
)
UPLOAD_RESULT = obj("uploadImage result", attachment=ATTACHMENT)

CANVAS_GENERATION = obj(
    "CanvasGenerationSpec",
    connection_id=opt(STR),
    mode=one_of("image", "video"),
    model=opt(STR),
    aspect_ratio=opt(STR),
    quality=opt(STR),
    count=opt(NUM),
    duration=opt(NUM),
)
CANVAS_NODE = obj(
    "CanvasNode",
    id=STR,
    type=one_of("image", "video", "text", "generation"),
    title=opt(STR),
    asset_id=opt(STR),
    text=opt(STR),
    prompt=opt(STR),
    parent_id=opt(STR),
    status=opt(one_of("idle", "queued", "running", "success", "error")),
    error=opt(STR),
    generation=opt(CANVAS_GENERATION),
    x=NUM,
    y=NUM,
    width=NUM,
    height=NUM,
    rotation=opt(NUM),
    z_index=NUM,
)
CANVAS_EDGE = obj(
    "CanvasEdge",
    id=STR,
    from_node_id=STR,
    to_node_id=STR,
    kind=opt(one_of("reference", "variation", "output")),
)
CANVAS_ASSET = obj(
    "CanvasAsset",
    id=STR,
    name=STR,
    kind=one_of("image", "video"),
    media_type=STR,
    bytes=NUM,
    width=opt(NUM),
    height=opt(NUM),
    sha256=STR,
    created_at=STR,
)
CANVAS_DOCUMENT = obj(
    "CanvasDocument",
    id=STR,
    title=STR,
    session_id=opt(STR),
    project_id=opt(STR),
    revision=NUM,
    nodes=ArrayOf(CANVAS_NODE),
    edges=ArrayOf(CANVAS_EDGE),
    assets=ArrayOf(CANVAS_ASSET),
    viewport=obj("CanvasViewport", x=NUM, y=NUM, zoom=NUM),
    background=one_of("dots", "grid", "blank"),
    created_at=STR,
    updated_at=STR,
)
CANVAS_UPLOAD = obj("uploadCanvasAsset result", asset=CANVAS_ASSET, canvas=CANVAS_DOCUMENT)

REWIND_FILE = obj(
    "RewindFile",
    key=STR,
    path=STR,
    status=one_of("ready", "mergeable", "modified"),
    additions=NUM,
    deletions=NUM,
    diff=STR,
)
REWIND_RESULT = obj(
    "RewindTurnResult",
    status=one_of("rewound", "confirmation_required"),
    message=STR,
    files=opt(ArrayOf(REWIND_FILE)),
    file_state_token=STR,
    head_seq=NUM,
)
FILE_REVIEW = obj("FileReview", files=ArrayOf(REWIND_FILE), file_state_token=STR, through_seq=NUM)

CONTEXT_USAGE = obj(
    "ContextUsage",
    model=STR,
    input_tokens=NUM,
    output_tokens=NUM,
    total_tokens=NUM,
    cached_tokens=NUM,
)
USAGE_STATISTICS = obj(
    "UsageStatistics",
    range_days=one_of(7, 30),
    total_tokens=NUM,
    input_tokens=NUM,
    output_tokens=NUM,
    cached_tokens=NUM,
    session_count=NUM,
    message_count=NUM,
    active_days=NUM,
    current_streak=NUM,
    most_used_model=opt(STR),
    most_used_model_share=NUM,
    activity=ArrayOf(obj("DailyUsage", date=STR, message_count=NUM, token_count=NUM)),
    model_usage=ArrayOf(
        obj("ModelUsage", model=STR, token_count=NUM, request_count=NUM, share=NUM)
    ),
)
COMPACT_RESULT = obj(
    "CompactSessionResult",
    checkpoint_id=opt(STR),
    phase=opt(one_of("standalone", "pre_turn", "mid_turn")),
    projection_kind=opt(one_of("text", "provider_native")),
    level=opt(one_of("segmented", "session")),
    segment_count=opt(NUM),
    through_seq=NUM,
    estimated_tokens_before=NUM,
    estimated_tokens_after=NUM,
)

MODEL_SETTINGS = obj(
    "ModelSettings",
    context_window=opt(NUM),
    max_input_tokens=opt(NUM),
    max_output_tokens=opt(NUM),
    image_input=BOOL,
    image_generation=BOOL,
    video_generation=BOOL,
    audio_generation=BOOL,
    tool_calling=BOOL,
    web_search=BOOL,
    reasoning_efforts=opt(ArrayOf(REASONING_EFFORT)),
)
CONNECTION = obj(
    "ConnectionConfig",
    id=opt(STR),
    name=STR,
    type=one_of("language", "image", "video"),
    video_protocol=opt(one_of("seedance", "minimax_h3")),
    kind=STR,
    auth_kind=one_of("api_key"),
    base_url=STR,
    model_settings=MapOf(MODEL_SETTINGS),
    models=opt(ArrayOf(STR)),
    models_cached=opt(BOOL),
    api_key=opt(STR),
    has_api_key=opt(BOOL),
    sort_order=NUM,
)
# listConnectionModels reads the catalog as Partial<…> and fills the gaps: every field optional.
MODEL_CATALOG = obj(
    "ConnectionModelCatalog",
    models=opt(ArrayOf(STR)),
    context_windows=opt(MapOf(NUM)),
    capabilities=opt(MapOf(obj("capability", image_input=opt(BOOL)))),
)
MODEL_REF = obj("ModelRef", connection_id=STR, model=STR)
DEFAULT_MODELS = obj(
    "DefaultModels", language=MODEL_REF, fast=MODEL_REF, image=MODEL_REF, video=MODEL_REF
)

TERMINAL = obj(
    "TerminalResource",
    ref=STR,
    session_id=STR,
    running=BOOL,
    exit_code=opt(NUM),
    buffer=opt(STR),
    seq=NUM,
)
TERMINAL_EVENT = obj(
    "TerminalDataEvent",
    session_id=STR,
    ref=STR,
    seq=NUM,
    data=opt(STR),
    exited=opt(BOOL),
    exit_code=opt(NUM),
)
BACKGROUND_COMMAND = obj(
    "BackgroundCommand",
    command_id=STR,
    session_id=STR,
    command=STR,
    pid=opt(NUM),
    running=BOOL,
    exit_code=opt(NUM),
    stdout=opt(STR),
    stderr=opt(STR),
    started_at=STR,
    backgrounded_by=opt(one_of("agent", "user")),
    stopped_by=opt(one_of("agent", "user")),
)
BROWSER_ACTION = obj(
    "BrowserActionRequest",
    id=STR,
    session_id=STR,
    tool_call_id=opt(STR),
    browser_id=STR,
    action=one_of(
        "open",
        "navigate",
        "snapshot",
        "click",
        "type",
        "press_key",
        "scroll",
        "wait",
        "extract",
        "back",
        "reload",
        "screenshot",
    ),
    url=opt(STR),
    ref=opt(STR),
    observation_id=opt(STR),
    text=opt(STR),
    key=opt(STR),
    direction=opt(one_of("up", "down", "left", "right")),
    amount=opt(NUM),
    timeout_ms=opt(NUM),
    clear=opt(BOOL),
    full_page=opt(BOOL),
    created_at=STR,
)
QUESTION_BATCH = obj(
    "PendingQuestionBatch",
    id=STR,
    session_id=STR,
    run_id=opt(STR),
    tool_call_id=opt(STR),
    questions=ArrayOf(
        obj(
            "UserQuestion",
            id=STR,
            question=STR,
            description=opt(STR),
            options=opt(
                ArrayOf(
                    obj(
                        "QuestionOption",
                        label=STR,
                        description=opt(STR),
                        recommended=opt(BOOL),
                    )
                )
            ),
            allow_custom=opt(BOOL),
        )
    ),
    created_at=STR,
)
# ChatMessage.tool_calls as the kernel sends them: ToolCallView's wire part; `status` and the
# other view fields are added by the client (normalizeHistory).
HISTORY_TOOL_CALL = obj("ToolCallView", id=STR, name=STR, input=STR)
CHAT_MESSAGE = obj(
    "ChatMessage",
    role=one_of("user", "assistant", "system", "tool"),
    content=STR,
    command=opt(STR),
    skill_ref=opt(STR),
    attachments=opt(ArrayOf(ATTACHMENT)),
    browser_elements=opt(ArrayOf(BROWSER_ELEMENT)),
    event_seq=opt(NUM),
    created_at=opt(STR),
    reasoning=opt(STR),
    tool_calls=opt(ArrayOf(HISTORY_TOOL_CALL)),
    tool_call_id=opt(STR),
    diff=opt(STR),
    turn_started_at=opt(STR),
    turn_completed_at=opt(STR),
    turn_status=opt(TURN_STATUS),
    turn_reason=opt(STR),
    error=opt(BOOL),
)

SKILL = obj(
    "SkillInfo",
    ref=STR,
    name=STR,
    description=opt(STR),
    scope=one_of("builtin", "plugin", "global", "user", "project"),
    path=opt(STR),
    root=opt(STR),
    main_path=opt(STR),
    enabled=BOOL,
    pinned=opt(BOOL),
    allowed_tools=opt(ArrayOf(STR)),
    required_tools=opt(ArrayOf(STR)),
    required_capabilities=opt(ArrayOf(STR)),
    resources=opt(ArrayOf(obj("SkillResourceInfo", path=STR, size=opt(NUM), media_type=opt(STR)))),
    content_hash=opt(STR),
    diagnostics=opt(
        ArrayOf(
            obj(
                "SkillDiagnostic",
                ref=opt(STR),
                name=opt(STR),
                path=opt(STR),
                code=STR,
                severity=STR,
                message=STR,
                field=opt(STR),
            )
        )
    ),
)
AGENT = obj(
    "AgentInfo",
    ref=STR,
    name=STR,
    description=STR,
    scope=one_of("builtin", "user", "project"),
    path=opt(STR),
    model=opt(STR),
    tools=opt(ArrayOf(STR)),
    max_turns=opt(NUM),
    timeout=opt(STR),
    digest=STR,
)
AGENT_RUN = obj(
    "AgentRunSnapshot",
    id=STR,
    status=one_of("queued", "running", "completed", "failed", "cancelled", "interrupted"),
    root_session_id=STR,
    root_run_id=STR,
    parent_session_id=STR,
    parent_tool_call_id=opt(STR),
    child_session_id=opt(STR),
    agent_ref=opt(STR),
    agent_name=opt(STR),
    task=STR,
    depth=NUM,
    tokens_used=opt(NUM),
    output=opt(STR),
    error=opt(STR),
    created_at=STR,
    started_at=opt(STR),
    completed_at=opt(STR),
)
# ToolCallView in full (`status` required): what Foya's history route sends, the view fields
# already filled (normalizeHistory keeps them). `child_messages?: ChatMessage[]` is not checked.
TOOL_CALL_VIEW = obj(
    "ToolCallView",
    id=STR,
    name=STR,
    input=STR,
    status=TOOL_STATUS,
    output=opt(STR),
    child_session_id=opt(STR),
    agent_ref=opt(STR),
    agent_name=opt(STR),
    agent_run=opt(AGENT_RUN),
    diff=opt(STR),
    attachments=opt(ArrayOf(ATTACHMENT)),
)
# ChatMessage as `GET /sessions/{id}/history` answers it: its tool_calls are ToolCallViews.
HISTORY_CHAT_MESSAGE = extend(CHAT_MESSAGE, "ChatMessage", tool_calls=opt(ArrayOf(TOOL_CALL_VIEW)))
AGENT_BUDGET = obj(
    "AgentBudget",
    root_session_id=STR,
    root_run_id=STR,
    tokens_used=NUM,
    max_tokens=opt(NUM),
    exceeded=BOOL,
)
AGENT_LIMITS = obj("AgentLimits", max_global_concurrency=NUM, max_per_root=NUM, max_tree_tokens=NUM)
AUTOMATION = obj(
    "AutomationTask",
    id=STR,
    name=STR,
    prompt=STR,
    cron=STR,
    timezone=STR,
    enabled=BOOL,
    connection_id=opt(STR),
    model=opt(STR),
    project_id=opt(STR),
    approval_mode=one_of("auto", "full_access"),
    last_status=one_of("idle", "running", "completed", "failed", "cancelled"),
    last_error=opt(STR),
    last_session_id=opt(STR),
    last_run_at=opt(STR),
    next_run_at=opt(STR),
    created_at=STR,
    updated_at=STR,
)
HOOK = obj(
    "HookConfig",
    id=opt(STR),
    name=opt(STR),
    event=one_of(
        "SessionStart",
        "SessionEnd",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "PermissionRequest",
        "SubagentStart",
        "SubagentStop",
        "PreCompact",
        "PostCompact",
        "Stop",
        "TurnComplete",
        "Notification",
    ),
    matcher=opt(STR),
    command=STR,
    timeout=opt(NUM),
    # `async` is a Python keyword: added below.
    enabled=opt(BOOL),
)
HOOK = Obj(HOOK.name, {**HOOK.fields, "async": opt(BOOL)})
COMMAND = obj(
    "CommandInfo",
    ref=STR,
    name=STR,
    description=opt(STR),
    scope=one_of("builtin", "global", "project"),
    project_id=opt(STR),
    kind=one_of("prompt", "workflow"),
    path=opt(STR),
    body=opt(STR),
    builtin=opt(BOOL),
    updated_at=opt(STR),
)
WORKFLOW = obj(
    "WorkflowRecord",
    id=STR,
    session_id=STR,
    kind=one_of("plan", "spec", "goal"),
    status=one_of("active", "ready", "approved", "completed", "closed"),
    goal=STR,
    title=opt(STR),
    content=opt(STR),
    path=opt(STR),
    artifact_root=opt(STR),
    artifacts=opt(obj("WorkflowRecord.artifacts", spec=STR, tasks=STR, checklist=STR)),
    revision=NUM,
    created_at=STR,
    updated_at=STR,
)
COMMAND_EXECUTION = obj(
    "CommandExecution",
    command=COMMAND,
    status=STR,
    submission=opt(SUBMIT_TURN_RESULT),
    workflow=opt(WORKFLOW),
    message=opt(STR),
)
WORKFLOW_APPROVAL = obj("WorkflowApproval", workflow=WORKFLOW, submission=SUBMIT_TURN_RESULT)
PROJECT = obj(
    "ProjectInfo",
    id=STR,
    name=STR,
    path=STR,
    available=BOOL,
    pinned=opt(BOOL),
    pinned_at=opt(STR),
    created_at=STR,
    updated_at=STR,
)
CONTEXT_ITEM = obj(
    "ContextItem",
    id=STR,
    name=opt(STR),
    description=opt(STR),
    trigger=opt(one_of("always", "glob", "model_decision", "manual")),
    globs=opt(ArrayOf(STR)),
    path=opt(STR),
    scope=one_of("global", "project"),
    project_id=opt(STR),
    content=STR,
    created_at=STR,
    updated_at=STR,
)
MEMORY_SETTINGS = obj("MemorySettings", enabled=BOOL)
SEARCH_PROVIDER = obj(
    "SearchProviderConfig",
    id=STR,
    kind=one_of("google_cse", "bing", "baidu"),
    name=STR,
    enabled=BOOL,
    api_key=opt(STR),
    has_api_key=opt(BOOL),
    search_engine_id=opt(STR),
    endpoint=opt(STR),
)
# parseWebSearchSettings fills `enabled` and `providers` when absent; present, they must fit.
WEB_SEARCH_SETTINGS = obj(
    "WebSearchSettings",
    enabled=opt(BOOL),
    default_provider=opt(STR),
    providers=opt(ArrayOf(SEARCH_PROVIDER)),
)
WEB_SEARCH_RESULT = obj(
    "WebSearchResult", title=STR, url=STR, snippet=opt(STR), source=opt(STR), rank=NUM
)
MCP_SERVER = obj(
    "McpServerConfig",
    id=STR,
    name=STR,
    enabled=BOOL,
    transport=one_of("stdio", "streamable_http", "sse"),
    command=opt(STR),
    args=opt(ArrayOf(STR)),
    env=opt(MapOf(STR)),
    cwd=opt(STR),
    url=opt(STR),
    headers=opt(MapOf(STR)),
    bearer_token=opt(STR),
    has_token=opt(BOOL),
)
# parseMcpConfig fills `version` and `servers` when absent.
MCP_CONFIG = obj("McpConfig", version=opt(NUM), servers=opt(ArrayOf(MCP_SERVER)))
MCP_STATUS = obj(
    "McpStatus",
    id=STR,
    name=STR,
    state=one_of("disabled", "disconnected", "connecting", "connected", "error"),
    transport=STR,
    tool_count=NUM,
    resource_count=NUM,
    prompt_count=NUM,
    error=opt(STR),
    plugin_id=opt(STR),
)
MCP_REGISTRY_SERVER = obj(
    "McpRegistryServer",
    id=STR,
    name=STR,
    description=opt(STR),
    version=opt(STR),
    installable=BOOL,
    reason=opt(STR),
    config=MCP_SERVER,
)
PLUGIN_AUTHOR = obj("PluginAuthor", name=opt(STR), email=opt(STR), url=opt(STR))
PLUGIN_DIAGNOSTIC = obj(
    "PluginDiagnostic",
    component=opt(STR),
    path=opt(STR),
    code=STR,
    severity=one_of("warning", "error"),
    message=STR,
)
PLUGIN = obj(
    "AgentPlugin",
    **{"$schema": STR},
    name=STR,
    version=opt(STR),
    description=opt(STR),
    author=opt(PLUGIN_AUTHOR),
    homepage=opt(STR),
    repository=opt(STR),
    license=opt(STR),
    keywords=opt(ArrayOf(STR)),
    path=STR,
    data_path=STR,
    source=opt(STR),
    enabled=BOOL,
    valid=BOOL,
    skill_count=NUM,
    mcp_server_count=NUM,
    diagnostics=opt(ArrayOf(PLUGIN_DIAGNOSTIC)),
)
MARKETPLACE = obj(
    "PluginMarketplace",
    id=STR,
    name=STR,
    description=opt(STR),
    repository=STR,
    owner=PLUGIN_AUTHOR,
    source=STR,
    ref=opt(STR),
    sparse_paths=opt(ArrayOf(STR)),
    resolved_sha=opt(STR),
    format=one_of("codex", "claude", "copilot"),
    enabled=BOOL,
)
MARKETPLACE_PLUGIN = obj(
    "MarketplacePlugin",
    name=STR,
    description=opt(STR),
    version=opt(STR),
    author=opt(PLUGIN_AUTHOR),
    homepage=opt(STR),
    repository=opt(STR),
    license=opt(STR),
    keywords=opt(ArrayOf(STR)),
    category=opt(STR),
    tags=opt(ArrayOf(STR)),
    source=STR,
    installable=BOOL,
    reason=opt(STR),
    installed=BOOL,
    enabled=opt(BOOL),
    installed_version=opt(STR),
)
MARKETPLACE_CATALOG = extend(
    MARKETPLACE, "PluginMarketplaceCatalog", plugins=ArrayOf(MARKETPLACE_PLUGIN)
)
MARKETPLACE_PREVIEW = obj(
    "MarketplacePluginPreview",
    name=STR,
    valid=BOOL,
    compatibility=one_of("compatible", "partial", "unsupported"),
    skill_count=NUM,
    mcp_server_count=NUM,
    unsupported_components=opt(ArrayOf(STR)),
    diagnostics=opt(ArrayOf(PLUGIN_DIAGNOSTIC)),
)

# Workspace routes: the Go structs the desktop's workspace view decodes (workspace_service.go).
SESSION_WORKSPACE = obj(
    "SessionWorkspace",
    kind=one_of("project", "managed"),
    name=STR,
    path=STR,
    project_id=opt(STR),
)
WORKSPACE_ENTRY = obj("WorkspaceEntry", path=STR, name=STR, is_dir=BOOL)

# Every error the desktop shows: `{code, message}`.
ERROR = obj("Error", code=STR, message=STR)

# ---------------------------------------------------------------- SSE payloads (stores/*.ts)

# conversation.ts `KernelEvent`: the envelope of every session-stream data frame.
KERNEL_EVENT = obj("KernelEvent", seq=NUM, kind=STR, session=STR, time=STR, payload=opt(ANY))
# interaction.ts `PendingApproval`.
PENDING_APPROVAL = obj(
    "PendingApproval",
    id=STR,
    session=STR,
    execution_session=opt(STR),
    tool_name=STR,
    action=STR,
    detail=STR,
    resource=opt(STR),
    scope=opt(STR),
)
TOOL_BEGIN = obj("tool_begin", id=STR, name=STR, input=STR, status=opt(TOOL_STATUS))
TOOL_UPDATE = obj(
    "tool_update",
    id=STR,
    name=STR,
    input=STR,
    status=opt(TOOL_STATUS),
    output=opt(STR),
    is_error=opt(BOOL),
    diff=opt(STR),
    attachments=opt(ArrayOf(ATTACHMENT)),
)
TOOL_END = obj(
    "tool_end",
    id=STR,
    name=STR,
    output=STR,
    is_error=BOOL,
    diff=opt(STR),
    attachments=opt(ArrayOf(ATTACHMENT)),
)
TURN_STARTED = Nullable(obj("turn_started", started_at=opt(STR)))
TURN_COMPLETE = Nullable(
    obj(
        "turn_complete",
        started_at=opt(STR),
        completed_at=opt(STR),
        status=opt(TURN_STATUS),
        reason=opt(STR),
    )
)
WITH_ID = obj("{id}", id=opt(STR))

# kind → the payload shape the store casts it to (None: the store reads no payload field).
SESSION_EVENT_PAYLOADS: dict[str, Type | None] = {
    "message_delta": STR,
    "reasoning_delta": STR,
    "message_end": CHAT_MESSAGE,
    "message_imported": CHAT_MESSAGE,
    "history_rewound": obj("history_rewound", target_user_seq=opt(NUM)),
    "file_review_resolved": None,
    "tool_begin": TOOL_BEGIN,
    "tool_update": TOOL_UPDATE,
    "tool_end": TOOL_END,
    **{
        f"subagent_{s}": AGENT_RUN
        for s in ("queued", "running", "started", "completed", "failed", "cancelled", "interrupted")
    },
    "agent_budget_updated": AGENT_BUDGET,
    "agent_budget_exceeded": AGENT_BUDGET,
    "approval_request": PENDING_APPROVAL,
    "approval_resolved": obj("approval_resolved", id=STR),
    "question_requested": QUESTION_BATCH,
    "question_resolved": WITH_ID,
    "browser_action_requested": BROWSER_ACTION,
    "browser_action_resolved": WITH_ID,
    "turn_started": TURN_STARTED,
    "turn_complete": TURN_COMPLETE,
    "queue_updated": obj("queue_updated", items=opt(ArrayOf(QUEUED_MESSAGE))),
    "usage_updated": CONTEXT_USAGE,
    "compaction_started": None,
    "compaction_completed": None,
    "compaction_failed": None,
    "session_updated": SESSION,
    "session_deleted": WITH_ID,
    "workflow_updated": WORKFLOW,
    "background_command_updated": BACKGROUND_COMMAND,
    "error": STR,
}
# The canvas view's stream frames carry the document; the context stream is only counted.
CANVAS_EVENT = obj("CanvasEvent", seq=NUM, kind=STR, payload=CANVAS_DOCUMENT)
CONTEXT_EVENT = obj("ContextEvent", kind=STR)
