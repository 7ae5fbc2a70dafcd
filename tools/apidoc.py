"""Write docs/api.md, the API reference that reads offline, from the kernel's OpenAPI document.

    python -m tools.apidoc                      # rewrite docs/api.md
    python -m tools.apidoc --check              # exit 1 if docs/api.md is not what it would write
    python -m tools.apidoc --openapi FILE       # from a saved `GET /openapi.json` instead

Without `--openapi` the document comes from the app itself (`app.main.create_app`, no server and
no network): the same one `GET /openapi.json` serves. The output depends on nothing else, so a
check in CI finds a reference that no longer matches the code.

What a route does with unknown fields of its JSON body (refused or ignored, as Foya's handler
does) is read from the body model's schema (`x-unknown-fields`, which `app/bodies.py` derives
from the model's config), listed in one table and repeated under each route.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "docs" / "api.md"
COMMAND = "python -m tools.apidoc"
METHODS = ("get", "put", "post", "patch", "delete", "head", "options", "trace")
REF = "#/components/schemas/"
# Where a body model's schema says what its route does with unknown fields (app/bodies.py).
POLICY_KEY = "x-unknown-fields"
POLICY_TEXT = {"refused": "refused (400 `bad_request`)", "ignored": "ignored"}

Schema = dict[str, Any]


def openapi_document() -> Schema:
    """The OpenAPI document of the app `foya serve` runs (built in memory, never started)."""
    from fastapi import FastAPI

    from app.main import create_app
    from app.settings import Settings

    with tempfile.TemporaryDirectory() as data_dir:
        app: Any = create_app(Settings(data_dir=Path(data_dir))).app
        # Down through the ASGI middleware (each keeps the app it wraps as `.app`) to FastAPI.
        while not isinstance(app, FastAPI):
            app = app.app
        return app.openapi()


# ----------------------------------------------------------------------------------- text


def cell(text: str) -> str:
    """`text` fit for one table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def schema_anchor(name: str) -> str:
    return "schema-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def operation_anchor(method: str, path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", f"{method} {path}".lower()).strip("-")


def number(value: Any) -> str:
    """A bound as written; a large power of two as `2^n` (SQLite's integer range is 2^63)."""
    if isinstance(value, int) and value >= 2**32 and value & (value - 1) == 0:
        return f"2^{value.bit_length() - 1}"
    return json.dumps(value)


def literal(value: Any) -> str:
    return f"`{json.dumps(value, ensure_ascii=False)}`"


# ---------------------------------------------------------------------------------- types


_BOUNDS = (
    ("minimum", "≥ {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "≤ {}"),
    ("exclusiveMaximum", "< {}"),
    ("minLength", "length ≥ {}"),
    ("maxLength", "length ≤ {}"),
    ("minItems", "items ≥ {}"),
    ("maxItems", "items ≤ {}"),
)


def type_of(schema: Schema) -> str:
    """A schema in a few words: `string`, `integer ≥ 0`, `array of [Message](#…)`, …"""
    if "$ref" in schema:
        name = str(schema["$ref"]).removeprefix(REF)
        return f"[{name}](#{schema_anchor(name)})"
    if "const" in schema:
        return literal(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(literal(v) for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            parts = [type_of(s) for s in schema[key] if s.get("type") != "null"]
            nullable = len(parts) < len(schema[key])
            return " or ".join(parts) + (" or null" if nullable else "")
    if "allOf" in schema:
        return " and ".join(type_of(s) for s in schema["allOf"])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if kind == "array":
        kind = "array of " + type_of(schema.get("items", {}))
    elif kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        kind = "object of " + type_of(schema["additionalProperties"])
    limits = [form.format(number(schema[key])) for key, form in _BOUNDS if key in schema]
    if "format" in schema:
        limits.insert(0, str(schema["format"]))
    if "pattern" in schema:
        limits.append(f"pattern `{schema['pattern']}`")
    return f"{kind} ({', '.join(limits)})" if limits else str(kind)


def described(schema: Schema, description: str = "") -> str:
    """A property's or parameter's description, with its default."""
    text = description or str(schema.get("description", ""))
    if "default" in schema and schema["default"] is not None:
        text = f"Default {literal(schema['default'])}. {text}"
    return cell(text)


# ------------------------------------------------------------------------------ sections


def operations(doc: Schema) -> Iterator[tuple[str, str, Schema]]:
    for path, item in doc.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                yield method.upper(), path, item[method]


def resolved(schema: Schema, schemas: Schema) -> Schema:
    """`schema`, or the component it refers to; an optional body (`X or null`) as `X`."""
    if "$ref" in schema:
        return dict(schemas.get(str(schema["$ref"]).removeprefix(REF), {}))
    for key in ("anyOf", "oneOf"):
        kept = [s for s in schema.get(key, []) if s.get("type") != "null"]
        if len(kept) == 1:
            return resolved(kept[0], schemas)
    return schema


def body_policy(op: Schema, schemas: Schema) -> str | None:
    """What `op` does with unknown fields of its JSON body (None: no JSON body, or a schema
    that does not say)."""
    content = op.get("requestBody", {}).get("content", {})
    schema = content.get("application/json", {}).get("schema")
    if schema is None:
        return None
    policy = resolved(schema, schemas).get(POLICY_KEY)
    return POLICY_TEXT.get(str(policy)) if policy is not None else None


def body_of(content: Schema) -> str:
    """What a request or response carries: its schema per media type."""
    shown = []
    for media_type, entry in content.items():
        schema = entry.get("schema")
        shown.append(f"`{media_type}`" + (f" {type_of(schema)}" if schema else ""))
    return ", ".join(shown) or "—"


def render_operation(method: str, path: str, op: Schema, schemas: Schema) -> list[str]:
    lines = [f'<a id="{operation_anchor(method, path)}"></a>', f"### `{method} {path}`", ""]
    summary, description = op.get("summary", ""), op.get("description", "")
    lines += [f"**{summary}.** {description}".rstrip() if summary else description, ""]
    if op.get("parameters"):
        lines += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        for p in op["parameters"]:
            schema = p.get("schema", {})
            required = "yes" if p.get("required") else ""
            lines.append(
                f"| `{p['name']}` | {p['in']} | {cell(type_of(schema))} | {required} "
                f"| {described(schema, p.get('description', ''))} |"
            )
        lines.append("")
    body = op.get("requestBody")
    if body:
        need = "required" if body.get("required") else "optional"
        lines += [f"Request body ({need}): {body_of(body.get('content', {}))}", ""]
        policy = body_policy(op, schemas)
        if policy:
            lines += [f"Unknown fields in the body: {policy}.", ""]
    lines += ["| status | body | meaning |", "|---|---|---|"]
    for status, response in op.get("responses", {}).items():
        shown = body_of(response.get("content", {}))
        lines.append(f"| {status} | {cell(shown)} | {cell(response.get('description', ''))} |")
    return [*lines, ""]


def render_schema(name: str, schema: Schema) -> list[str]:
    lines = [f'<a id="{schema_anchor(name)}"></a>', f"### {name}", ""]
    if schema.get("description"):
        lines += [str(schema["description"]), ""]
    properties: Schema = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", []))
        lines += ["| field | type | required | description |", "|---|---|---|---|"]
        for field, prop in properties.items():
            need = "yes" if field in required else ""
            lines.append(f"| `{field}` | {cell(type_of(prop))} | {need} | {described(prop)} |")
        lines.append("")
        extra = schema.get("additionalProperties")
        if extra is False:
            lines += ["Other fields are refused (400).", ""]
        elif extra is True:
            lines += ["Other fields are kept as sent.", ""]
        elif schema.get(POLICY_KEY) == "ignored":
            lines += ["Other fields are ignored.", ""]
    else:
        lines += [f"Type: {type_of(schema)}.", ""]
    for example in schema.get("examples", []):
        lines += ["```json", json.dumps(example, ensure_ascii=False), "```", ""]
    return lines


def render_policies(ops: Iterator[tuple[str, str, Schema]], schemas: Schema) -> list[str]:
    """The table of what each route with a JSON body does with fields it does not know."""
    rows = [
        f"| [`{method} {path}`](#{operation_anchor(method, path)}) | {policy} |"
        for method, path, op in ops
        if (policy := body_policy(op, schemas))
    ]
    if not rows:
        return []
    return [
        "",
        "## Unknown fields in request bodies",
        "",
        "As Foya's own handlers decode them: where Foya refuses a field it does not know, so "
        "does this kernel; elsewhere such fields (the read-only ones a client echoes back, such "
        "as `id` or `has_api_key`) are ignored. A known field of the wrong type is always 400.",
        "",
        "| route | unknown fields |",
        "|---|---|",
        *rows,
    ]


def render(doc: Schema) -> str:
    """docs/api.md for `doc`, an OpenAPI 3.1 document as FastAPI writes it."""
    info = doc.get("info", {})
    by_tag: dict[str, list[tuple[str, str, Schema]]] = {}
    for method, path, op in operations(doc):
        by_tag.setdefault((op.get("tags") or ["other"])[0], []).append((method, path, op))
    schemas: Schema = doc.get("components", {}).get("schemas", {})
    lines = [
        f"# {info.get('title', 'API')} {info.get('version', '')}".rstrip(),
        "",
        f"<!-- Generated by `{COMMAND}` from the kernel's OpenAPI document: do not edit. -->",
        "",
        "Every route of `foya serve`, from the same document it serves at `GET /openapi.json`. "
        "On TCP every request except `GET`/`HEAD /healthz` needs `Authorization: Bearer "
        "<token>`; on the Unix socket none does. Every error is an "
        f'[Error](#{schema_anchor("Error")}) `{{"code", "message"}}`; `default` lists the '
        "errors a route may answer besides those named. Event streams, approvals, rewind and "
        "file review are explained in [using.md](using.md) and [capabilities.md](capabilities.md).",
        "",
        "Error codes: see [errors.md](errors.md), every code with its status and meaning.",
        "",
        "## Routes",
        "",
    ]
    for tag, ops in by_tag.items():
        links = ", ".join(f"[`{m} {p}`](#{operation_anchor(m, p)})" for m, p, _ in ops)
        lines.append(f"- **{tag}**: {links}")
    lines += render_policies(operations(doc), schemas)
    lines += ["", "## Schemas", ""]
    lines.append(", ".join(f"[{name}](#{schema_anchor(name)})" for name in sorted(schemas)))
    lines.append("")
    for tag, ops in by_tag.items():
        lines += [f"## {tag}", ""]
        for method, path, op in ops:
            lines += render_operation(method, path, op, schemas)
    lines += ["## Schemas in detail", ""]
    for name in sorted(schemas):
        lines += render_schema(name, schemas[name])
    return "\n".join(lines).rstrip() + "\n"


# ------------------------------------------------------------------------------------ CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on a change")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="default: docs/api.md")
    parser.add_argument("--openapi", type=Path, help="a saved /openapi.json to render")
    args = parser.parse_args(argv)
    doc = json.loads(args.openapi.read_text()) if args.openapi else openapi_document()
    text = render(doc)
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run `{COMMAND}` and commit it", file=sys.stderr)
            return 1
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
