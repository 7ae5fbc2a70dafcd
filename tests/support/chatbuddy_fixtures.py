"""Builders of ChatBuddy backups from the documented layout (reference: chatbuddy-backup.md).

`sample_payload()` is the reference's §5 example (the single-JSON form, data copied as
documented); `v2_zip` packs a payload the way ChatBuddy's "Export data" does (§1), `encrypted`
seals a ZIP as its 2026-05 local backups did (§4), `legacy_json` writes the v1 single file (§3).
`v2_members` and `zip_members` are the two halves of `v2_zip`, for tests that damage a member.
"""

from __future__ import annotations

import copy
import io
import json
import zipfile
from typing import Any

from app.imports.chatbuddy_crypto import encrypt

# The reference's §5 example, verbatim.
SAMPLE_JSON = r"""{"schema":"chatbuddy.backup.compass","version":2,"exportedAt":"2026-06-20T09:15:42.318Z",
 "storage":{"layout":"compass","layoutVersion":3,
  "structuredState":{
   "core":{"groups":[
    {"id":"group_default","name":"Default","kind":"default","createdAt":1781078400000,"updatedAt":1781078400000},
    {"id":"group_deleted","name":"Deleted","kind":"deleted","createdAt":1781078400000,"updatedAt":1781078400000}],
    "assistants":[
    {"id":"assistant_1781256600000_0f3a9c21","name":"Code Reviewer","note":"","groupId":"group_default","systemPrompt":"You are a strict Python reviewer. Report bugs first.","greeting":"Hi! Attach a file to review.","questionPrefix":"","modelRef":"provider_1781078400000_7e1d44b0:gpt-4o","temperature":0.3,"topP":1,"maxTokens":0,"contextCount":16,"presencePenalty":0,"frequencyPenalty":0,"streaming":true,"enabledMcpServerIds":["mcp_1781078600000_k3j9x2a"],"pinned":true,"isDeleted":false,"createdAt":1781256600000,"updatedAt":1781791262000,"lastInteractedAt":1781791262000},
    {"id":"assistant_1781256900000_b27e9f10","name":"Research Buddy","note":"","avatar":"book","groupId":"group_default","systemPrompt":"You are a concise research assistant.","greeting":"","questionPrefix":"","modelRef":"provider_1781078460000_c0ffee01:deepseek/deepseek-r1","temperature":0.7,"topP":1,"maxTokens":0,"contextCount":16,"presencePenalty":0,"frequencyPenalty":0,"streaming":true,"enabledMcpServerIds":[],"pinned":false,"isDeleted":false,"createdAt":1781256900000,"updatedAt":1781903135000,"lastInteractedAt":1781903135000}],
    "templates":[]},
   "ui":{"selectedAssistantId":"assistant_1781256900000_b27e9f10","selectedSessionIdByAssistant":{"assistant_1781256600000_0f3a9c21":"session_1781791200000_3b9f0c1a","assistant_1781256900000_b27e9f10":"session_1781903100000_9a8b7c6d"},"sessionPanelCollapsed":false,"collapsedGroupIds":[]},
   "settingsGeneral":{"temperature":0.7,"topP":1,"maxTokens":0,"presencePenalty":0,"frequencyPenalty":0,"timeoutMs":0,"streamingDefault":true,"locale":"en","sendShortcut":"enter","chatTabMode":"single","localBackup":{"enabled":false,"directory":"","intervalHours":24,"maxCount":10,"maxAgeDays":30}},
   "settingsModelConfig":{"providers":[
    {"id":"provider_1781078400000_7e1d44b0","kind":"openai","name":"OpenAI","apiKey":"","baseUrl":"https://api.openai.com/v1","apiType":"chat_completions","enabled":true,"models":[{"id":"gpt-4o","name":"gpt-4o","source":"fetched"}],"modelLastSyncedAt":1781078500000},
    {"id":"provider_1781078460000_c0ffee01","kind":"openrouter","name":"OpenRouter","apiKey":"","baseUrl":"https://openrouter.ai/api/v1","apiType":"chat_completions","enabled":true,"models":[{"id":"deepseek/deepseek-r1","name":"DeepSeek R1","source":"manual","userCapabilitiesOverride":{"reasoning":true}}]}]},
   "settingsDefaultModels":{"defaultModels":{"assistant":{"providerId":"provider_1781078400000_7e1d44b0","modelId":"gpt-4o"},"titleSummary":{"providerId":"provider_1781078400000_7e1d44b0","modelId":"gpt-4o"}}},
   "settingsMcp":{"mcp":{"servers":[{"id":"mcp_1781078600000_k3j9x2a","name":"Filesystem","enabled":true,"transport":"stdio","command":"npx","args":["-y","@modelcontextprotocol/server-filesystem","."],"cwd":"","env":[],"url":"","headers":[],"timeoutMs":30000,"remotePassthroughEnabled":false}],"groups":[],"maxToolRounds":8}}},
  "providerApiKeys":{"provider_1781078400000_7e1d44b0":"sk-test-openai-0000","provider_1781078460000_c0ffee01":"sk-or-v1-test-0000"},
  "sessions":[
   {"id":"session_1781791200000_3b9f0c1a","assistantId":"assistant_1781256600000_0f3a9c21","title":"Review of retry helper","titleSource":"generated","createdAt":1781791200000,"updatedAt":1781791262000,"messages":[
    {"id":"msg_1781791200000_aa01bb02","role":"assistant","content":"Hi! Attach a file to review.","timestamp":1781791200000},
    {"id":"msg_1781791230000_c3d4e5f6","role":"user","content":"Please review this helper.","timestamp":1781791230000,"files":[{"name":"retry.py","content":"def retry(fn, n=3):\n    for _ in range(n):\n        try:\n            return fn()\n        except Exception:\n            pass\n    return fn()\n","language":"python"}]},
    {"id":"msg_1781791230412_0a1b2c3d","role":"assistant","content":"Bug: fn() runs once more after the loop, and client.py passes n=0.","timestamp":1781791262000,"model":"gpt-4o | OpenAI","toolRounds":[{"calls":[{"id":"call_9fK2mQ7xL0","name":"mcp_1781078600000_k3j9x2a__read_file","argumentsText":"{\"path\":\"src/client.py\"}","output":"retry(get, n=0)\n"}]}]}]},
   {"id":"session_1781863200000_5d6e7f80","assistantId":"assistant_1781256900000_b27e9f10","title":"Why the sky is blue","titleSource":"custom","createdAt":1781863200000,"updatedAt":1781863241000,"messages":[
    {"id":"msg_1781863205000_11223344","role":"user","content":"Why is the sky blue? Two sentences.","timestamp":1781863205000},
    {"id":"msg_1781863205120_55667788","role":"assistant","content":"Air scatters short blue wavelengths far more than red (Rayleigh, ∝1/λ⁴), so blue light reaches you from all directions.","timestamp":1781863241000,"model":"deepseek/deepseek-r1 | OpenRouter","reasoning":"Rayleigh scattering; mention 1/λ⁴, keep it short."}]},
   {"id":"session_1781903100000_9a8b7c6d","assistantId":"assistant_1781256900000_b27e9f10","title":"Reading a latency chart","titleSource":"generated","createdAt":1781903100000,"updatedAt":1781903135000,"messages":[
    {"id":"msg_1781903110000_deadbeef","role":"user","content":"What do these show?","timestamp":1781903110000,"images":[{"base64":"","mimeType":"image/png","path":"session_1781903100000_9a8b7c6d_msg_1781903110000_deadbeef_0.png"},{"base64":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=","mimeType":"image/png"}]},
    {"id":"msg_1781903110150_feedface","role":"assistant","content":"1: p95 latency, one spike to 900 ms at 14:00. 2: a single transparent pixel.","timestamp":1781903135000,"model":"gpt-4o | OpenAI"}]}],
  "kv":{"mcp.probeCache":"{\"lastProbeAt\":1781078700000,\"entries\":[]}"}}}"""  # noqa: E501

PNG_1X1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)
CODE_REVIEWER = "assistant_1781256600000_0f3a9c21"
BIG_SESSION = "session_1781990000000_0b16b16b"
META_FILES = {
    "core": "meta/state.core.json",
    "ui": "meta/ui.selection.json",
    "settingsGeneral": "meta/settings.general.json",
    "settingsModelConfig": "meta/settings.model-config.json",
    "settingsDefaultModels": "meta/settings.default-models.json",
    "settingsMcp": "meta/settings.mcp.json",
}
# 2026-06-20 09:15:42 UTC, the example's exportedAt, as a ZIP (local) time.
_ZIP_TIME = (2026, 6, 20, 9, 15, 42)


def sample_payload(extra_messages: int = 0) -> dict[str, Any]:
    """The §5 example; with `extra_messages`, plus one Code Reviewer session holding that many
    generated messages (user and assistant in turn; every tenth answer with a tool round)."""
    payload: dict[str, Any] = json.loads(SAMPLE_JSON)
    if extra_messages:
        payload["storage"]["sessions"].append(_big_session(extra_messages))
    return payload


def big_payload(messages: int) -> dict[str, Any]:
    """The §5 example plus one session of `messages` generated messages (for benchmarks)."""
    return sample_payload(extra_messages=messages)


def v2_zip(payload: dict[str, Any], *, top_folder: str | None = None) -> bytes:
    """The backup ZIP of a §5-form payload, laid out as §1 says."""
    return zip_members(v2_members(payload, top_folder=top_folder))


def v2_members(payload: dict[str, Any], *, top_folder: str | None = None) -> dict[str, bytes]:
    """The backup ZIP's entries, name → bytes, in ChatBuddy's order."""
    storage = payload["storage"]
    manifest = {
        "schema": payload["schema"],
        "version": payload["version"],
        "exportedAt": payload["exportedAt"],
        "packageFormat": "structured-zip",
        "storage": {"layout": storage["layout"], "layoutVersion": storage["layoutVersion"]},
    }
    members = {"backup.manifest.json": _pretty(manifest)}
    for part, name in META_FILES.items():
        members[name] = _pretty(storage["structuredState"][part])
    if storage.get("providerApiKeys"):
        members["meta/providers.api-keys.json"] = _pretty(storage["providerApiKeys"])
    if storage.get("kv"):
        members["meta/kv.compass.json"] = _pretty(storage["kv"])
    sessions = sorted(storage["sessions"], key=lambda s: s["createdAt"])
    index = []
    for session in sessions:
        entry = {k: v for k, v in session.items() if k != "messages"}
        entry["messageCount"] = len(session["messages"])
        if session["messages"]:
            entry["preview"] = session["messages"][-1]["content"][:80]
        index.append(entry)
    members["sessions/index.compass.json"] = _pretty({"sessions": index})
    for session in sessions:
        lines = "".join(_compact(m) + "\n" for m in session["messages"])
        members[f"sessions/{session['assistantId']}/{session['id']}.jsonl"] = lines.encode()
    prefix = f"{top_folder}/" if top_folder else ""
    return {prefix + name: body for name, body in members.items()}


def zip_members(
    members: dict[str, bytes] | list[tuple[str, bytes]],
    *,
    compression: int = zipfile.ZIP_STORED,
) -> bytes:
    """A ZIP of `members` (a list may repeat a name): UTF-8 names (flag 0x0800 on every
    entry, as ChatBuddy writes them), no data descriptors."""
    items = list(members.items()) if isinstance(members, dict) else members
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, body in items:
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.compress_type = compression
            archive.writestr(info, body)
    return _utf8_flagged(out.getvalue())


def _utf8_flagged(data: bytes) -> bytes:
    # zipfile sets the UTF-8 flag only on non-ASCII names: set it in every local and central
    # header, as ChatBuddy's writer does.
    out = bytearray(data)
    end = out.rindex(b"PK\x05\x06")
    count = int.from_bytes(out[end + 10 : end + 12], "little")
    at = int.from_bytes(out[end + 16 : end + 20], "little")
    for _ in range(count):
        local = int.from_bytes(out[at + 42 : at + 46], "little")
        for flag in (at + 8, local + 6):
            out[flag + 1] |= 0x08  # bit 11 of the little-endian flag word
        lengths = (int.from_bytes(out[at + i : at + i + 2], "little") for i in (28, 30, 32))
        at += 46 + sum(lengths)
    return bytes(out)


def encrypted(
    zip_bytes: bytes, passphrase: str, *, salt: bytes | None = None, iv: bytes | None = None
) -> bytes:
    """An encrypted local backup (`….enc.zip`) of `zip_bytes`."""
    return encrypt(zip_bytes, passphrase, salt=salt, iv=iv)


def legacy_json(
    payload: dict[str, Any] | None = None,
    *,
    schema: str = "chatbuddy.backup",
    version: Any = 1,
    oldest: bool = False,
    wrapper: str | None = "schema",
) -> bytes:
    """A v1 single-file backup of a §5-form payload: state inline, providers with their keys.
    `oldest`: assistants with defaultProviderId/defaultModel and sessions without titleSource.
    `wrapper` "schema" (the file ChatBuddy wrote), "state", "data" or None (a bare state)."""
    payload = copy.deepcopy(payload or sample_payload())
    storage = payload["storage"]
    parts = storage["structuredState"]
    keys = storage.get("providerApiKeys", {})
    providers = [
        {**p, "apiKey": keys.get(p["id"], "")} for p in parts["settingsModelConfig"]["providers"]
    ]
    assistants = parts["core"]["assistants"]
    sessions = storage["sessions"]
    if oldest:
        for assistant in assistants:
            provider, _, model = assistant.pop("modelRef").partition(":")
            assistant["defaultProviderId"], assistant["defaultModel"] = provider, model
        for session in sessions:
            session.pop("titleSource")
    state = {
        "groups": parts["core"]["groups"],
        "assistants": assistants,
        "sessions": sessions,
        **parts["ui"],
        "settings": {
            "providers": providers,
            **parts["settingsDefaultModels"],
            **parts["settingsMcp"],
            **parts["settingsGeneral"],
        },
    }
    document: dict[str, Any]
    if wrapper == "schema":
        document = {
            "schema": schema,
            "version": version,
            "exportedAt": payload["exportedAt"],
            "state": state,
        }
    elif wrapper is None:
        document = state
    else:
        document = {wrapper: state}
    return _pretty(document)


def single_json(payload: dict[str, Any]) -> bytes:
    """The §5 form as a file (what ChatBuddy's legacy-JSON import also takes)."""
    return _pretty(payload)


def _big_session(count: int) -> dict[str, Any]:
    start = 1781990000000
    messages: list[dict[str, Any]] = []
    for i in range(count):
        ts = start + i * 1000
        message: dict[str, Any] = {"id": f"msg_{ts}_{i:08x}", "timestamp": ts}
        if i % 2 == 0:
            message.update(role="user", content=f"Question {i}: what does line {i} do?")
        else:
            message.update(
                role="assistant",
                content=f"Answer {i}: it increments the counter.",
                model="gpt-4o | OpenAI",
                reasoning=f"Look at line {i - 1}.",
            )
            if i % 20 == 19:
                call = {
                    "id": f"call_{i:08x}",
                    "name": "mcp_1781078600000_k3j9x2a__read_file",
                    "argumentsText": json.dumps({"path": f"src/m{i}.py"}),
                    "output": f"counter += {i}\n",
                }
                message["toolRounds"] = [{"calls": [call]}]
        messages.append(message)
    return {
        "id": BIG_SESSION,
        "assistantId": CODE_REVIEWER,
        "title": "A long review",
        "titleSource": "custom",
        "createdAt": start,
        "updatedAt": start + count * 1000,
        "messages": messages,
    }


def _pretty(value: Any) -> bytes:
    return (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode()


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
