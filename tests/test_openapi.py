"""GET /openapi.json: served (authenticated on TCP, open on the Unix socket), complete, and
pinned by a snapshot of routes and schema names in tests/openapi.snapshot.json.

After an intended API change, regenerate the snapshot and review its diff:

    FOYA_UPDATE_SNAPSHOT=1 .venv/bin/pytest tests/test_openapi.py
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.helpers import UNAUTHORIZED, Kernel, Launcher, app_endpoints, base_env, short_tmpdir
from support.streams_helpers import unix_kernel

SNAPSHOT = Path(__file__).with_name("openapi.snapshot.json")
UPDATE_ENV = "FOYA_UPDATE_SNAPSHOT"
REGENERATE = f"{UPDATE_ENV}=1 .venv/bin/pytest tests/test_openapi.py"
METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


@dataclass(frozen=True)
class Pair:
    tcp: Kernel
    unix: Kernel


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory, digest: str) -> Iterator[Pair]:
    base = tmp_path_factory.mktemp("openapi")
    launcher = Launcher(base / "procs")
    try:
        with short_tmpdir() as root:
            tcp = launcher.tcp(
                ["--allow-plaintext", "--data-dir", str(base / "tcp")],
                env=base_env(FOYA_AUTH_TOKEN_SHA256=digest),
                ready=False,
            )
            unix = unix_kernel(launcher, root, "u", ready=False).kernel
            yield Pair(tcp.wait_ready(), unix.wait_ready())
    finally:
        launcher.close()


@pytest.fixture(scope="module")
def document(kernels: Pair) -> dict[str, Any]:
    with kernels.unix.client() as client:
        response = client.get("/openapi.json")
    assert response.status_code == 200, response.text
    return dict(response.json())


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method in METHODS:
                yield method.upper(), path, op


# ----------------------------------------------------------------------------------- serving


def test_openapi_needs_the_token_on_tcp(
    kernels: Pair, token: str, document: dict[str, Any]
) -> None:
    with kernels.tcp.client() as anonymous:
        response = anonymous.get("/openapi.json")
    assert response.status_code == 401
    assert response.json() == UNAUTHORIZED
    with kernels.tcp.client(token) as client:
        response = client.get("/openapi.json")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == document  # the same service on either transport


def test_openapi_on_the_unix_socket(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.")
    assert document["info"]["title"]
    assert document["paths"]


def test_openapi_lists_every_route(document: dict[str, Any], tmp_path: Path) -> None:
    served = {
        (method, re.sub(r"\{(\w+):\w+\}", r"{\1}", path))  # OpenAPI drops `{ref:path}`'s type
        for method, path in app_endpoints(tmp_path / "data", "ab" * 32)
        if method != "HEAD" and path != "/openapi.json"
    }
    documented = {(method, path) for method, path, _ in operations(document)}
    assert served - documented == set(), "routes missing from /openapi.json"
    assert documented - served == set(), "documented routes that are not served"
    for must in [
        ("POST", "/sessions"),
        ("GET", "/sessions/{session_id}/events"),
        ("DELETE", "/projects/{project_id}"),
        ("GET", "/usage"),
    ]:
        assert must in documented


def test_openapi_documents_no_422(kernels: Pair, document: dict[str, Any]) -> None:
    """Invalid requests are answered 400 `{code, message}`, never FastAPI's 422,
    so a generated client must not be told to expect a 422 `HTTPValidationError`."""
    with kernels.unix.client() as client:
        response = client.post("/sessions", json={"workspace": "/tmp"})
    assert response.status_code == 400, response.text
    advertised = sorted(
        f"{method} {path}" for method, path, op in operations(document) if "422" in op["responses"]
    )
    assert advertised == [], (
        f"these operations document a 422 the service never sends: {advertised}"
    )


# ------------------------------------------------------------------------- enums and fields

ENUMS = {
    ("Decision", "decision"): ["approved", "approved_for_session", "denied"],
    ("CreateSession", "approval_mode"): ["manual", "auto", "full_access"],
    ("UpdateSession", "approval_mode"): ["manual", "auto", "full_access"],
    ("CreateSession", "reasoning_effort"): ["", "low", "medium", "high"],
    ("UpdateSession", "reasoning_effort"): ["", "low", "medium", "high"],
    ("ModelSettings", "reasoning_efforts"): ["", "low", "medium", "high"],
    ("ConnectionIn", "type"): ["language", "image", "video"],
    ("Connection", "type"): ["language", "image", "video"],
    ("ConnectionIn", "kind"): ["openai"],
    ("ConnectionIn", "auth_kind"): ["api_key"],
    ("ResolveFileReview", "action"): ["keep", "undo"],
    ("FilePreview", "status"): ["ready", "mergeable", "modified"],
    ("FilePreview", "action"): ["restored", "merged", "kept", "force_restored"],
    ("Rewound", "status"): ["confirmation_required", "rewound"],
    ("Resolved", "status"): ["resolved"],
    ("Attachment", "kind"): ["image"],
    ("DirectoryEntry", "kind"): ["dir", "file", "other"],
    ("SessionWorkspace", "kind"): ["project", "managed"],
    ("CreateWorkspaceEntry", "kind"): ["file", "directory"],
    ("Readiness", "status"): ["ready"],
    ("CheckOut", "name"): ["database", "data_dir", "disk", "replication"],
}


def enum_of(prop: dict[str, Any]) -> list[Any] | None:
    """The values a property (or its non-null branch, or its list's items) is documented with."""
    for branch in [prop, *prop.get("anyOf", [])]:
        for schema in (branch, branch.get("items") or {}):
            if "enum" in schema:
                return list(schema["enum"])
    return None


@pytest.mark.parametrize(("schema", "field"), list(ENUMS))
def test_every_closed_set_of_values_is_an_enum(
    document: dict[str, Any], schema: str, field: str
) -> None:
    prop = document["components"]["schemas"][schema]["properties"][field]
    assert enum_of(prop) == ENUMS[schema, field], prop


def test_no_schema_uses_const_for_a_one_value_enum(document: dict[str, Any]) -> None:
    """Client generators handle `enum` everywhere; `const` (pydantic's one-value Literal) not."""
    assert '"const"' not in json.dumps(document["components"])


def test_rewind_fields_say_where_their_values_come_from(document: dict[str, Any]) -> None:
    """The preview answers `head_seq` / `file_state_token`; the confirm sends them back as
    `expected_head_seq` / `expected_file_state`: each side names the other."""
    schemas = document["components"]["schemas"]
    preview, confirm = schemas["Rewound"]["properties"], schemas["Rewind"]["properties"]
    assert "expected_head_seq" in preview["head_seq"]["description"]
    assert "expected_file_state" in preview["file_state_token"]["description"]
    assert "head_seq" in confirm["expected_head_seq"]["description"]
    assert "file_state_token" in confirm["expected_file_state"]["description"]
    assert confirm["confirm"]["description"] and confirm["force_file_keys"]["description"]
    examples = schemas["Rewind"]["examples"]
    assert {} in examples
    assert any({"confirm", "expected_head_seq", "expected_file_state"} <= set(e) for e in examples)
    review, resolve = (
        schemas["FileReview"]["properties"],
        schemas["ResolveFileReview"]["properties"],
    )
    assert "expected_through_seq" in review["through_seq"]["description"]
    assert "through_seq" in resolve["expected_through_seq"]["description"]


# ---------------------------------------------------------------------------------- snapshot


def schema_name(schema: dict[str, Any]) -> str:
    """A compact name: `Session`, `list[Session]`, `CreateSession | null`, `string`, `any`."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " | ".join(schema_name(s) for s in schema[key])
    kind = schema.get("type")
    if kind == "array":
        return f"list[{schema_name(schema.get('items', {}))}]"
    return str(kind) if kind else "any"


def content_name(content: dict[str, Any] | None) -> str | None:
    """The body's media types and schema names, e.g. `Session` or `text/event-stream`."""
    if not content:
        return None
    names = []
    for media, spec in sorted(content.items()):
        schema = spec.get("schema")
        if media == "application/json":
            names.append(schema_name(schema or {}))
        else:
            names.append(media if schema is None else f"{media}: {schema_name(schema)}")
    return "; ".join(names)


def summary(doc: dict[str, Any]) -> dict[str, Any]:
    """Every operation: its parameters, request body and responses, by schema name. FastAPI's
    generated 422 entries are left out: `test_openapi_documents_no_422` owns them, so removing
    them does not also break the snapshot."""
    out: dict[str, Any] = {}
    for method, path, op in operations(doc):
        body = op.get("requestBody")
        out[f"{method} {path}"] = {
            "params": sorted(f"{p['in']}:{p['name']}" for p in op.get("parameters", [])),
            "request": content_name(body.get("content")) if body else None,
            "responses": {
                status: content_name(spec.get("content"))
                for status, spec in sorted(op["responses"].items())
                if status != "422"
            },
        }
    return dict(sorted(out.items()))


def difference(old: dict[str, Any], new: dict[str, Any]) -> str:
    lines = [f"+ {key}: {json.dumps(new[key])}" for key in sorted(new.keys() - old.keys())]
    lines += [f"- {key}: {json.dumps(old[key])}" for key in sorted(old.keys() - new.keys())]
    for key in sorted(old.keys() & new.keys()):
        if old[key] != new[key]:
            lines.append(
                f"~ {key}:\n    was {json.dumps(old[key])}\n    now {json.dumps(new[key])}"
            )
    return "\n".join(lines)


def test_openapi_matches_the_snapshot(document: dict[str, Any]) -> None:
    current = summary(document)
    rendered = json.dumps(current, indent=2, sort_keys=True) + "\n"
    if os.environ.get(UPDATE_ENV) == "1":
        SNAPSHOT.write_text(rendered)
        print(f"rewrote {SNAPSHOT}")
        return
    assert SNAPSHOT.exists(), f"{SNAPSHOT} is missing; create it with: {REGENERATE}"
    stored = json.loads(SNAPSHOT.read_text())
    if stored != current:
        pytest.fail(
            f"/openapi.json differs from {SNAPSHOT.name}:\n{difference(stored, current)}\n\n"
            f"If the change is intended, regenerate the snapshot and review its diff:\n"
            f"    {REGENERATE}",
            pytrace=False,
        )


def test_snapshot_summary_names_schemas() -> None:
    """The summary itself: refs, optional bodies, lists and SSE come out readable."""
    doc = {
        "paths": {
            "/x/{id}": {
                "parameters": [],
                "post": {
                    "parameters": [{"in": "path", "name": "id"}],
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {
                                    "anyOf": [{"$ref": "#/components/schemas/In"}, {"type": "null"}]
                                }
                            }
                        }
                    },
                    "responses": {
                        "200": {
                            "content": {
                                "application/json": {
                                    "schema": {
                                        "type": "array",
                                        "items": {"$ref": "#/components/schemas/Out"},
                                    }
                                }
                            }
                        },
                        "204": {"description": "nothing"},
                    },
                },
                "get": {"responses": {"200": {"content": {"text/event-stream": {}}}}},
            }
        }
    }
    assert summary(doc) == {
        "GET /x/{id}": {"params": [], "request": None, "responses": {"200": "text/event-stream"}},
        "POST /x/{id}": {
            "params": ["path:id"],
            "request": "In | null",
            "responses": {"200": "list[Out]", "204": None},
        },
    }


def test_snapshot_diff_is_readable() -> None:
    old = {"GET /a": {"request": None}, "GET /b": {"request": None}}
    new = {"GET /a": {"request": "A"}, "GET /c": {"request": None}}
    text = difference(old, new)
    assert "+ GET /c" in text
    assert "- GET /b" in text
    assert "~ GET /a" in text
