"""ChatBuddy backups as an `ImportBundle` (reference: chatbuddy-backup.md §6).

`chatbuddy_format` reads and checks the backup (ZIP, encrypted ZIP, legacy JSON),
`chatbuddy_sessions` maps sessions and messages; this module puts the bundle together:

- Each session gets its assistant's modelRef ("providerId:modelId", or the oldest backups'
  defaultProviderId/defaultModel) as model, and its system prompt as rule. Sessions of
  assistants missing from the backup are imported without either, and counted in a warning.
- Each distinct non-empty system prompt becomes one rule "ChatBuddy: <assistant>", keyed by
  a hash of its text (so re-imports and assistants sharing a prompt find the same rule).
- Providers become connections only `with_keys`: the OpenAI-compatible kinds, with their key
  from providerApiKeys (v2) or apiKey (v1); gemini and unknown kinds are skipped with a warning.
- Sampling settings, MCP servers, templates, UI state and kv are counted in the report, never
  imported. No key reaches a report or an error: only provider names and kinds are named.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from app.imports.chatbuddy_format import (
    Backup,
    as_object,
    as_optional_text,
    as_text,
    read_backup,
)
from app.imports.chatbuddy_sessions import SessionMapper
from app.imports.model import (
    ImportBundle,
    ImportedConnection,
    ImportedRule,
    ImportReport,
    Progress,
)
from app.jsontypes import JSONObject

OPENAI_COMPATIBLE = frozenset({"openai", "openrouter", "ollama", "custom"})


def parse(
    data: bytes | Path,
    *,
    passphrase: str | None = None,
    images_dir: Path | None = None,
    with_keys: bool = False,
    progress: Progress | None = None,
    scratch: Path | None = None,
) -> ImportBundle:
    """Every session, rule (and, `with_keys`, connection) of a ChatBuddy backup (its bytes,
    or a file); a ZIP's members are extracted under `scratch` while it is read."""
    backup = read_backup(data, passphrase, scratch=scratch)
    bundle = ImportBundle(source="chatbuddy")
    report = bundle.report
    assistants = _assistants(backup.assistants, bundle.rules)
    bundle.connections = _connections(backup, with_keys, report)
    _report_left_out(backup, report)
    mapper = SessionMapper(report, images_dir)
    sizes = [_message_count(s) for s in backup.sessions]
    total, done, unknown = sum(sizes), 0, 0
    if progress:
        progress(0, total)
    for position, (raw, size) in enumerate(zip(backup.sessions, sizes, strict=True), 1):
        session = as_object(raw, f"session {position}")
        aid = session.get("assistantId")
        assistant = assistants.get(aid) if isinstance(aid, str) else None
        unknown += assistant is None
        bundle.sessions.append(mapper.session(session, assistant))
        done += size
        if progress:
            progress(done, total)
    if unknown:
        report.warnings.append(
            f"{unknown} session(s) belong to assistants missing from the backup: "
            "imported without a rule or model"
        )
    return bundle


def _assistants(items: list[Any], rules: list[ImportedRule]) -> dict[str, tuple[str, str | None]]:
    """Assistant id → (model ref, rule key); each distinct system prompt added to `rules`."""
    out: dict[str, tuple[str, str | None]] = {}
    keys: set[str] = set()
    for position, item in enumerate(items, 1):
        assistant = as_object(item, f"assistant {position}")
        aid = as_text(assistant.get("id"), f"assistant {position} id")
        name = as_optional_text(assistant.get("name"), f"assistant {aid} name") or aid
        prompt = as_optional_text(assistant.get("systemPrompt"), f"assistant {aid} systemPrompt")
        key = None
        if prompt.strip():
            digest = hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest()
            key = f"chatbuddy:prompt:{digest[:32]}"
            if key not in keys:
                keys.add(key)
                rules.append(ImportedRule(key=key, name=f"ChatBuddy: {name}", content=prompt))
        out[aid] = (_model_ref(assistant), key)
    return out


def _model_ref(assistant: JSONObject) -> str:
    ref = assistant.get("modelRef")
    if isinstance(ref, str) and ref:
        return ref
    provider, model = assistant.get("defaultProviderId"), assistant.get("defaultModel")
    if isinstance(provider, str) and isinstance(model, str) and provider and model:
        return f"{provider}:{model}"
    return ""


def _connections(backup: Backup, with_keys: bool, report: ImportReport) -> list[ImportedConnection]:
    if not with_keys:
        if backup.providers:
            report.skip("provider (connections are imported only with keys)", len(backup.providers))
        return []
    out = []
    for position, item in enumerate(backup.providers, 1):
        provider = as_object(item, f"provider {position}")
        pid = as_optional_text(provider.get("id"), f"provider {position} id")
        name = as_optional_text(provider.get("name"), f"provider {position} name") or pid
        kind = provider.get("kind") if isinstance(provider.get("kind"), str) else "unknown kind"
        base_url = as_optional_text(provider.get("baseUrl"), f"provider {name} baseUrl")
        if kind not in OPENAI_COMPATIBLE:
            report.warnings.append(
                f"provider {name!r} ({kind}) not imported: connections are OpenAI-compatible"
            )
            continue
        if not base_url:
            report.warnings.append(f"provider {name!r} has no base URL: not imported")
            continue
        models = provider.get("models") if isinstance(provider.get("models"), list) else []
        ids = [m.get("id") if isinstance(m, dict) else m for m in models or ()]
        out.append(
            ImportedConnection(
                name=name,
                base_url=base_url,
                api_key=backup.api_keys.get(pid, ""),
                models=[i for i in ids if isinstance(i, str) and i],
            )
        )
    return out


def _report_left_out(backup: Backup, report: ImportReport) -> None:
    counts = {
        "sampling settings (not imported)": len(backup.assistants) + int(backup.sampling),
        "MCP server (not imported)": backup.mcp_servers,
        "template (not imported)": backup.templates,
        "UI state (not imported)": int(backup.ui),
        "kv entry (not imported)": backup.kv,
    }
    for reason, count in counts.items():
        if count:
            report.skip(reason, count)


def _message_count(session: Any) -> int:
    messages = session.get("messages") if isinstance(session, dict) else None
    return len(messages) if isinstance(messages, list) else 0
