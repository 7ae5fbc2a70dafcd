"""Unknown fields in request bodies: refused exactly where Foya's Go handler decodes with
`DisallowUnknownFields`, ignored everywhere else (app/bodies.py), and the connection
payload Foya's desktop builds accepted as it sends it.

The routes come from the app itself: every route with a JSON body must be in `POLICY` (the Go
handler it follows) and its body model, with every model nested in it, must derive from the base
of that policy, so a new route cannot be added without deciding. Each is then tried through a
real `foya serve`: a body with an unknown field is refused (400 `bad_request` naming it) or
answered exactly as the same body without it.

Desktop sources of the connection cases (freesoulcode/foya, apps/desktop):

| case | file | function |
|---|---|---|
| create | src/views/settings/ConnectionsView.vue | `formPayload`, `save` (no `selectedID`) |
| update | src/views/settings/ConnectionsView.vue | `formPayload`, `save` (with `selectedID`) |
| reorder | src/views/settings/ConnectionsView.vue | `finishPointerDrag` (`{...connection}`) |
| type | src/lib/api.ts | `ConnectionConfig` (`video_protocol?: VideoProtocol`, `models_cached?`) |
| transport | src-tauri/src/commands/settings.rs | `create_connection`, `update_connection` |
"""

from __future__ import annotations

import importlib.util
import tempfile
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel
from support.fake_provider import API_KEY, Agent, agent_kernel
from support.helpers import REPO
from support.streams_helpers import assert_error

from app.bodies import Lenient, Strict, policy_of
from app.main import create_app
from app.settings import Settings

Policy = Literal["refused", "ignored"]
PROBE = "zz_not_a_field"

# (method, path) -> (policy, the Go handler in internal/server that decides it). Routes Foya
# does not have say why they take the policy they do.
POLICY: dict[tuple[str, str], tuple[Policy, str]] = {
    ("POST", "/sessions"): ("refused", "handleCreateSession"),
    ("PATCH", "/sessions/{session_id}"): ("refused", "handleUpdateSession"),
    ("POST", "/sessions/{session_id}/fork"): ("refused", "handleForkSession"),
    ("POST", "/sessions/{session_id}/turns"): ("ignored", "handleSubmitTurn"),
    ("POST", "/sessions/{session_id}/turns/{message_seq}/rewind"): ("refused", "handleRewindTurn"),
    ("POST", "/sessions/{session_id}/file-review"): ("refused", "handleResolveFileReview"),
    ("POST", "/sessions/{session_id}/queue"): ("ignored", "handleEnqueueMessage"),
    ("PATCH", "/sessions/{session_id}/queue/{message_id}"): (
        "ignored",
        "handleUpdateQueuedMessage",
    ),
    ("POST", "/sessions/{session_id}/approvals/{request_id}"): ("ignored", "handleResolveApproval"),
    ("POST", "/sessions/{session_id}/questions/{batch_id}/answer"): (
        "ignored",
        "handleAnswerQuestions",
    ),
    ("POST", "/sessions/{session_id}/browser-actions/{request_id}"): (
        "refused",
        "handleResolveBrowserAction",
    ),
    ("POST", "/sessions/{session_id}/commands/{name}"): ("refused", "handleExecuteCommand"),
    ("POST", "/sessions/{session_id}/terminals"): ("ignored", "handleStartTerminal"),
    ("POST", "/sessions/{session_id}/terminals/{ref}/input"): ("ignored", "handleWriteTerminal"),
    ("POST", "/sessions/{session_id}/terminals/{ref}/resize"): ("ignored", "handleResizeTerminal"),
    ("POST", "/sessions/{session_id}/agents"): ("ignored", "handleStartAgent"),
    ("POST", "/sessions/{session_id}/agents/wait"): ("ignored", "handleWaitAgents"),
    ("POST", "/sessions/{session_id}/workspace/entries"): (
        "refused",
        "handleCreateWorkspaceEntry",
    ),
    ("PATCH", "/sessions/{session_id}/workspace/entries"): (
        "refused",
        "handleRenameWorkspaceEntry",
    ),
    ("POST", "/connections"): ("ignored", "handleCreateConnection"),
    ("PATCH", "/connections/{connection_id}"): ("ignored", "handleUpdateConnection"),
    # Not in Foya's kernel; the desktop sends it the connection it edits, as to the two above.
    ("POST", "/connections/discover-models"): ("ignored", "handleCreateConnection"),
    ("PUT", "/settings/default-models"): ("refused", "handleUpdateDefaultModels"),
    ("PUT", "/settings/agent-limits"): ("refused", "handleUpdateAgentLimits"),
    ("PUT", "/settings/memory"): ("refused", "handleUpdateMemorySettings"),
    ("POST", "/projects"): ("ignored", "handleCreateProject"),
    ("PATCH", "/projects/{project_id}"): ("refused", "handleUpdateProject"),
    # Ours only (app.kernel.trust): a security decision, so nothing unknown is let through.
    ("PUT", "/projects/{project_id}/trust"): ("refused", "ours"),
    ("POST", "/rules"): ("refused", "handleCreateRule"),
    ("PATCH", "/rules/{rule_id}"): ("refused", "handleUpdateRule"),
    ("POST", "/memories"): ("refused", "handleCreateMemory"),
    ("PATCH", "/memories/{memory_id}"): ("refused", "handleUpdateMemory"),
    ("PUT", "/hooks"): ("refused", "handleReplaceHooks"),
    ("POST", "/commands"): ("refused", "handleCreateCommand"),
    ("PATCH", "/commands/{ref}"): ("refused", "handleUpdateCommand"),
    ("PATCH", "/skills/{ref}"): ("ignored", "handleSetSkillEnabled"),
    ("PATCH", "/skills/{ref}/pinned"): ("ignored", "handleSetSkillPinned"),
    ("POST", "/canvases"): ("refused", "handleCreateCanvas"),
    ("PATCH", "/canvases/{canvas_id}"): ("refused", "handleUpdateCanvas"),
    ("POST", "/canvases/{canvas_id}/generate-image"): ("refused", "handleGenerateCanvasImage"),
    ("POST", "/canvases/{canvas_id}/generate-video"): ("refused", "handleGenerateCanvasVideo"),
    ("POST", "/automations"): ("refused", "handleCreateAutomation"),
    ("POST", "/channels"): ("refused", "handleCreateChannel"),
    ("PUT", "/channels/{channel_id}"): ("refused", "handleUpdateChannel"),
    ("POST", "/channels/feishu/registrations"): ("refused", "handleStartFeishuRegistration"),
    ("POST", "/sessions/{session_id}/channel-pairings"): (
        "refused",
        "handleStartSessionChannelPairing",
    ),
    # Foya's Feishu-only versions (before channelhub): decoded as the channel update.
    ("PUT", "/settings/feishu-bot"): ("refused", "handleUpdateFeishuBotSettings"),
    ("PUT", "/automations/{automation_id}"): ("refused", "handleUpdateAutomation"),
    # Ours only: the same body as the PUT.
    ("PATCH", "/automations/{automation_id}"): ("refused", "handleUpdateAutomation"),
    ("POST", "/plugins/install"): ("refused", "handleInstallPlugin"),
    ("PATCH", "/plugins/{name}"): ("refused", "handleSetPluginEnabled"),
    ("POST", "/plugin-marketplaces"): ("refused", "handleAddPluginMarketplace"),
    ("PATCH", "/plugin-marketplaces/{name}"): ("refused", "handleSetPluginMarketplaceEnabled"),
    ("POST", "/plugin-marketplaces/{name}/plugins/{plugin}/install"): (
        "refused",
        "handleInstallMarketplacePlugin",
    ),
    # Ours: a browser's PushSubscription.toJSON() carries `expirationTime` and may grow.
    ("POST", "/push/subscriptions"): ("ignored", "ours"),
    ("PUT", "/web-search"): ("ignored", "handleUpdateWebSearch"),
    ("POST", "/web-search/test"): ("ignored", "handleTestWebSearch"),
    ("PUT", "/mcp"): ("ignored", "handleReplaceMCP"),
    ("POST", "/mcp/resources/read"): ("ignored", "handleMCPReadResource"),
    ("POST", "/mcp/prompts/get"): ("ignored", "handleMCPGetPrompt"),
}


# ------------------------------------------------------------------------- the app's routes


@dataclass(frozen=True)
class BodyRoute:
    method: str
    path: str
    model: type[BaseModel]
    path_params: dict[str, Any]

    @property
    def key(self) -> tuple[str, str]:
        return self.method, self.path


def _routes(routes: list[Any]) -> Iterator[APIRoute]:
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        elif hasattr(route, "original_router"):  # an included router, as FastAPI keeps it
            yield from _routes(route.original_router.routes)


def _model(annotation: Any) -> type[BaseModel]:
    """The body model of an annotation such as `Model` or `Model | None`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    kept = [a for a in typing.get_args(annotation) if a is not type(None)]
    assert len(kept) == 1, f"a body that is not one model: {annotation!r}"
    return _model(kept[0])


def body_routes() -> list[BodyRoute]:
    """Every route of the app `foya serve` runs that takes a JSON body, with its model."""
    with tempfile.TemporaryDirectory() as data_dir:
        app: Any = create_app(Settings(data_dir=Path(data_dir))).app
    while not isinstance(app, FastAPI):
        app = app.app
    found = []
    for route in _routes(app.routes):
        if route.body_field is None:
            continue
        params = {p.name: p.field_info.annotation for p in route.dependant.path_params}
        model = _model(route.body_field.field_info.annotation)
        for method in sorted(route.methods or ()):
            found.append(BodyRoute(method, route.path_format, model, params))
    return found


ROUTES = body_routes()


def nested_models(model: type[BaseModel]) -> Iterator[type[BaseModel]]:
    """The models `model`'s fields hold, at any depth (in lists, dicts, unions, …)."""
    seen: set[type[BaseModel]] = set()
    todo = [f.annotation for f in model.model_fields.values()]
    while todo:
        annotation = todo.pop()
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            if annotation not in seen:
                seen.add(annotation)
                todo += [f.annotation for f in annotation.model_fields.values()]
        else:  # list[X], dict[str, X], X | None, Annotated[X, …]: look inside
            todo += typing.get_args(annotation)
    yield from seen


def test_the_app_has_body_routes_of_both_policies() -> None:
    policies = {policy_of(r.model) for r in ROUTES}
    assert len(ROUTES) > 40, ROUTES
    assert policies == {"refused", "ignored"}


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_every_body_takes_its_go_handlers_policy(route: BodyRoute) -> None:
    assert route.key in POLICY, f"{route.key}: decide from Foya's Go handler and add it to POLICY"
    want, handler = POLICY[route.key]
    assert policy_of(route.model) == want, (route.model, handler)
    assert issubclass(route.model, Strict if want == "refused" else Lenient)
    for nested in nested_models(route.model):
        assert policy_of(nested) == want, f"{route.model.__name__} holds {nested.__name__}"


def test_the_reference_states_each_routes_policy_from_its_model() -> None:
    # The generator of docs/api.md (not an installed package), on the document the app serves.
    spec = importlib.util.spec_from_file_location("apidoc", REPO / "tools" / "apidoc.py")
    assert spec is not None and spec.loader is not None
    apidoc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(apidoc)
    text = apidoc.render(apidoc.openapi_document())
    for route in ROUTES:
        shown = apidoc.POLICY_TEXT[POLICY[route.key][0]]
        anchor = apidoc.operation_anchor(route.method, route.path)
        assert f"| [`{route.method} {route.path}`](#{anchor}) | {shown} |" in text, route.key
    assert text.count("Unknown fields in the body: ") == len(ROUTES)


def test_policy_of_refuses_a_model_of_neither_or_both_bases() -> None:
    class Plain(BaseModel):
        pass

    class Both(Strict, Lenient):
        pass

    assert policy_of(Plain) is None
    assert policy_of(Both) is None
    assert policy_of(Strict) == "refused" and policy_of(Lenient) == "ignored"


# ------------------------------------------------------------- through a real `foya serve`


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("body-policy")) as agent:
        yield agent


@pytest.fixture
def client(agent: Agent) -> httpx.Client:
    return agent.client


def sample(schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    """A small value `schema` accepts: its required fields only, each the simplest of its type."""
    if "$ref" in schema:
        return sample(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return sample(next(s for s in schema[key] if s.get("type") != "null"), defs)
    if "enum" in schema:
        return schema["enum"][-1]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: sample(props[name], defs) for name in schema.get("required", [])}
    if kind == "string":
        return "x" * max(1, schema.get("minLength", 1))
    if kind in ("integer", "number"):
        return max(1, schema.get("minimum", 1))
    if kind == "boolean":
        return False
    if kind == "array":
        return [sample(schema.get("items", {}), defs) for _ in range(schema.get("minItems", 0))]
    return {}


def valid_body(route: BodyRoute, agent: Agent) -> dict[str, Any]:
    """A body the route's model takes. Where a generic one would reach outside the loopback
    (a provider's default address, a search engine), it names the fake provider or nothing."""
    if route.path == "/connections/discover-models":
        return {"base_url": agent.fake.base_url, "api_key": API_KEY}
    if route.path == "/connections":
        return {"name": "probe", "base_url": agent.fake.base_url}
    if route.path == "/web-search/test":
        return {"provider_id": "no-such-provider", "query": "x"}
    schema = route.model.model_json_schema()
    body = sample(schema, schema.get("$defs", {}))
    route.model.model_validate(body)
    return dict(body)


def url(route: BodyRoute) -> str:
    """The route's path, its parameters naming things that do not exist."""
    path = route.path
    for name, kind in route.path_params.items():
        path = path.replace("{" + name + "}", "1" if kind is int else f"no-such-{name}")
    return path


def outcome(response: httpx.Response) -> tuple[int, str | None]:
    code = response.json().get("code") if response.status_code >= 400 else None
    return response.status_code, code


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_an_unknown_field_is_refused_or_ignored_as_the_policy_says(
    agent: Agent, client: httpx.Client, route: BodyRoute
) -> None:
    body = valid_body(route, agent)
    probed = client.request(route.method, url(route), json={**body, PROBE: 1})
    if policy_of(route.model) == "refused":
        error = assert_error(probed, 400, "bad_request")
        assert PROBE in error["message"], error
    else:
        plain = client.request(route.method, url(route), json=body)
        assert outcome(probed) == outcome(plain), (probed.text, plain.text)
        assert PROBE not in probed.text


def test_a_known_field_of_the_wrong_type_is_refused_where_unknown_ones_are_ignored(
    client: httpx.Client,
) -> None:
    before = client.get("/connections").json()
    error = assert_error(
        client.post("/connections", json={"models_cached": [True]}), 400, "bad_request"
    )
    assert "models_cached" in error["message"]
    assert client.get("/connections").json() == before


# ------------------------------------------------------------- the desktop's connection form


def model_settings(kind: str) -> dict[str, Any]:
    """What the form keeps for an imported model (`defaultModelSettings` plus token limits)."""
    return {
        "context_window": 128000,
        "max_output_tokens": 8192,
        "image_input": True,
        "image_generation": kind == "image",
        "video_generation": kind == "video",
        "audio_generation": False,
        "tool_calling": kind == "language",
        "web_search": kind == "language",
        "reasoning_efforts": ["low", "medium", "high"],
    }


def form_payload(agent: Agent, kind: str, sort_order: int, **extra: Any) -> dict[str, Any]:
    """The body `formPayload` builds (`video_protocol` only for video; `undefined` is left out
    of the JSON)."""
    return {
        "name": f"Desktop {kind}",
        "type": kind,
        "kind": "openai",
        "auth_kind": "api_key",
        "base_url": agent.fake.base_url,
        "model_settings": {"fake-large": model_settings(kind)},
        "models": ["fake-large"],
        "models_cached": True,
        "sort_order": sort_order,
        "api_key": API_KEY,
        **extra,
    }


def listed(client: httpx.Client) -> dict[str, dict[str, Any]]:
    response = client.get("/connections")
    assert response.status_code == 200, response.text
    return {c["id"]: c for c in response.json()}


def test_the_desktop_creates_and_updates_a_language_connection(
    agent: Agent, client: httpx.Client
) -> None:
    payload = form_payload(agent, "language", len(listed(client)))
    response = client.post("/connections", json=payload)
    assert response.status_code == 201, response.text
    created = response.json()
    assert "video_protocol" not in created
    assert created["models_cached"] is True and created["has_api_key"] is True
    assert created["model_settings"] == payload["model_settings"]
    assert created["sort_order"] == payload["sort_order"]
    assert listed(client)[created["id"]] == created

    # Save again: the same form, now with the id; the key field left empty is not sent.
    again = {k: v for k, v in payload.items() if k != "api_key"}
    again.update(id=created["id"], name="Renamed", models=["fake-large", "fake-small"])
    response = client.patch(f"/connections/{created['id']}", json=again)
    assert response.status_code == 200, response.text
    updated = response.json()
    assert updated["name"] == "Renamed" and updated["has_api_key"] is True
    assert updated["models"] == ["fake-large", "fake-small"]
    assert listed(client)[created["id"]] == updated


def test_the_desktop_echoes_a_listed_connection_back_to_reorder_it(client: httpx.Client) -> None:
    connections = list(listed(client).values())
    assert connections, "the kernel has its connection to the fake provider"
    last = max(connections, key=lambda c: c["sort_order"])
    echoed = {**last, "sort_order": 0}  # every field it read: id, has_api_key, models_cached…
    assert {"id", "has_api_key", "models_cached"} <= set(echoed)
    response = client.patch(f"/connections/{last['id']}", json=echoed)
    assert response.status_code == 200, response.text
    moved = response.json()
    assert moved["sort_order"] == 0
    assert {k: v for k, v in moved.items() if k != "sort_order"} == {
        k: v for k, v in last.items() if k != "sort_order"
    }


def test_read_only_fields_on_create_are_ignored(agent: Agent, client: httpx.Client) -> None:
    payload = form_payload(agent, "language", 0, id="chosen-by-client", has_api_key=True)
    del payload["api_key"]
    response = client.post("/connections", json=payload)
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["id"] != "chosen-by-client"
    assert created["has_api_key"] is False


def test_video_protocol_round_trips_on_a_video_connection(
    agent: Agent, client: httpx.Client
) -> None:
    payload = form_payload(agent, "video", len(listed(client)), video_protocol="seedance")
    response = client.post("/connections", json=payload)
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["video_protocol"] == "seedance"
    assert listed(client)[created["id"]]["video_protocol"] == "seedance"

    # The form switches the protocol; then a drag echoes the whole connection back.
    switched = {**payload, "id": created["id"], "video_protocol": "minimax_h3"}
    del switched["api_key"]
    response = client.patch(f"/connections/{created['id']}", json=switched)
    assert response.status_code == 200, response.text
    assert response.json()["video_protocol"] == "minimax_h3"
    echoed = {**listed(client)[created["id"]], "sort_order": 0}
    response = client.patch(f"/connections/{created['id']}", json=echoed)
    assert response.status_code == 200, response.text
    assert listed(client)[created["id"]]["video_protocol"] == "minimax_h3"

    # Made a language connection, it loses the protocol (the form sends none for it).
    language = {**switched, "type": "language", "video_protocol": None}
    language = {k: v for k, v in language.items() if v is not None}
    response = client.patch(f"/connections/{created['id']}", json=language)
    assert response.status_code == 200, response.text
    assert "video_protocol" not in response.json()
    assert "video_protocol" not in listed(client)[created["id"]]


@pytest.mark.parametrize(
    ("kind", "protocol", "message"),
    [
        pytest.param("video", None, "needs one", id="video-without"),
        pytest.param("video", "sora", "must be one of", id="video-unknown"),
        pytest.param("language", "seedance", "only a video connection", id="language-with"),
        pytest.param("image", "minimax_h3", "only a video connection", id="image-with"),
    ],
)
def test_video_protocol_rules_refuse_and_change_nothing(
    agent: Agent, client: httpx.Client, kind: str, protocol: str | None, message: str
) -> None:
    before = listed(client)
    extra = {} if protocol is None else {"video_protocol": protocol}
    payload = form_payload(agent, kind, 0, **extra)
    error = assert_error(client.post("/connections", json=payload), 400, "bad_request")
    assert "video_protocol" in error["message"] and message in error["message"], error
    assert listed(client) == before


def test_a_video_connection_keeps_its_protocol_unless_told(
    agent: Agent, client: httpx.Client
) -> None:
    payload = form_payload(agent, "video", 0, video_protocol="seedance")
    cid = client.post("/connections", json=payload).json()["id"]
    renamed = client.patch(f"/connections/{cid}", json={"name": "Only the name"})
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["video_protocol"] == "seedance"
    before = listed(client)
    cleared = client.patch(f"/connections/{cid}", json={"video_protocol": ""})
    assert "needs one" in assert_error(cleared, 400, "bad_request")["message"]
    assert listed(client) == before
