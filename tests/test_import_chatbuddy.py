"""ChatBuddy backups through the parser (app.imports.chatbuddy) and the safe ZIP reader
(app.imports.zipsafe): every documented form, the exact mapping of the reference's §5 example,
every refusal rule, damaged and hostile archives, and garbled input that may only ever raise
the import model's errors."""

from __future__ import annotations

import base64
import contextlib
import copy
import hashlib
import io
import json
import random
import zipfile
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from support.chatbuddy_fixtures import (
    BIG_SESSION,
    CODE_REVIEWER,
    PNG_1X1,
    encrypted,
    legacy_json,
    sample_payload,
    single_json,
    v2_members,
    v2_zip,
    zip_members,
)

from app.imports.chatbuddy import parse
from app.imports.chatbuddy_crypto import decrypt, is_encrypted
from app.imports.model import (
    ImportBundle,
    ImportTooLarge,
    InvalidImport,
    UnsupportedImportVersion,
    WrongPassphrase,
)
from app.imports.zipsafe import read_zip

MODEL_ERRORS = (InvalidImport, UnsupportedImportVersion, WrongPassphrase, ImportTooLarge)
REVIEW = "session_1781791200000_3b9f0c1a"
SKY = "session_1781863200000_5d6e7f80"
CHART = "session_1781903100000_9a8b7c6d"
OPENAI_REF = "provider_1781078400000_7e1d44b0:gpt-4o"
OPENROUTER_REF = "provider_1781078460000_c0ffee01:deepseek/deepseek-r1"
KEYS = ("sk-test-openai-0000", "sk-or-v1-test-0000")
RETRY_PY = (
    "def retry(fn, n=3):\n    for _ in range(n):\n        try:\n            return fn()\n"
    "        except Exception:\n            pass\n    return fn()\n"
)
SALT, IV = bytes(range(16)), bytes(range(100, 112))


def messages(bundle: ImportBundle, session_id: str) -> list[tuple[str, dict[str, Any]]]:
    session = next(s for s in bundle.sessions if s.source == f"chatbuddy:{session_id}")
    return [(m.source_id, m.message) for m in session.messages]


def everything_said(bundle: ImportBundle) -> str:
    report = bundle.report
    return json.dumps([report.warnings, list(report.skipped)], ensure_ascii=False)


# --- the fixtures follow the documented layout -----------------------------------------------


def test_fixture_zip_is_laid_out_as_documented() -> None:
    with zipfile.ZipFile(io.BytesIO(v2_zip(sample_payload()))) as archive:
        infos = archive.infolist()
        assert len(infos) == 13
        assert all(i.compress_type == zipfile.ZIP_STORED and i.flag_bits & 0x800 for i in infos)
        assert not any(i.flag_bits & 0x08 for i in infos)
        manifest = archive.read("backup.manifest.json").decode()
        assert manifest.endswith("}\n") and '\n  "schema": "chatbuddy.backup.compass"' in manifest
        assert json.loads(manifest)["packageFormat"] == "structured-zip"
        jsonl = archive.read(f"sessions/{CODE_REVIEWER}/{REVIEW}.jsonl").decode()
        assert jsonl.count("\n") == 3 and jsonl.endswith("\n") and ": " not in jsonl[:40]


# --- the §5 example, mapped exactly ----------------------------------------------------------


def test_sample_through_the_zip_maps_sessions_titles_and_models() -> None:
    bundle = parse(v2_zip(sample_payload()))
    assert bundle.source == "chatbuddy"
    assert [(s.source, s.title, s.model) for s in bundle.sessions] == [
        (f"chatbuddy:{REVIEW}", "Review of retry helper", OPENAI_REF),
        (f"chatbuddy:{SKY}", "Why the sky is blue", OPENROUTER_REF),
        (f"chatbuddy:{CHART}", "Reading a latency chart", OPENROUTER_REF),
    ]
    review = bundle.sessions[0]
    assert (review.created_at_ns, review.updated_at_ns) == (
        1781791200000 * 10**6,
        1781791262000 * 10**6,
    )


def test_tool_rounds_expand_before_the_answer_and_files_reach_model_content() -> None:
    at = "2026-06-18T14:01:02.000Z"
    by = {"model": "gpt-4o", "model_label": "gpt-4o | OpenAI"}
    call = "call_9fK2mQ7xL0"
    tool = "mcp_1781078600000_k3j9x2a__read_file"
    answer = "msg_1781791230412_0a1b2c3d"
    assert messages(parse(v2_zip(sample_payload())), REVIEW) == [
        (
            "msg_1781791200000_aa01bb02",
            {
                "role": "assistant",
                "content": "Hi! Attach a file to review.",
                "created_at": "2026-06-18T14:00:00.000Z",
            },
        ),
        (
            "msg_1781791230000_c3d4e5f6",
            {
                "role": "user",
                "content": "Please review this helper.",
                "created_at": "2026-06-18T14:00:30.000Z",
                "model_content": "Please review this helper.\n\n```python\n// File: retry.py\n"
                + RETRY_PY
                + "```",
            },
        ),
        (
            f"{answer}#round-0",
            {
                "role": "assistant",
                "content": "",
                "created_at": at,
                **by,
                "tool_calls": [{"id": call, "name": tool, "input": {"path": "src/client.py"}}],
            },
        ),
        (
            f"{answer}#call-{call}",
            {
                "role": "tool",
                "tool_call_id": call,
                "name": tool,
                "content": "retry(get, n=0)\n",
                "created_at": at,
            },
        ),
        (
            answer,
            {
                "role": "assistant",
                "content": "Bug: fn() runs once more after the loop, and client.py passes n=0.",
                "created_at": at,
                **by,
            },
        ),
    ]


def test_reasoning_and_model_label_are_kept() -> None:
    (_, user), (_, answer) = messages(parse(v2_zip(sample_payload())), SKY)
    assert user == {
        "role": "user",
        "content": "Why is the sky blue? Two sentences.",
        "created_at": "2026-06-19T10:00:05.000Z",
    }
    assert answer["model"] == "deepseek/deepseek-r1"
    assert answer["model_label"] == "deepseek/deepseek-r1 | OpenRouter"
    assert answer["reasoning"] == "Rayleigh scattering; mention 1/λ⁴, keep it short."


def test_inline_image_is_decoded_and_path_only_one_counted_without_images_dir() -> None:
    bundle = parse(v2_zip(sample_payload()))
    user = next(s for s in bundle.sessions if s.source.endswith(CHART)).messages[0]
    assert [i.data for i in user.images] == [base64.b64decode(PNG_1X1)]
    assert user.images[0].name.endswith(".png")
    assert "attachments" not in user.message
    assert bundle.report.skipped["image not in the backup"] == 1


def test_path_only_image_is_read_from_images_dir_by_plain_name_only(tmp_path: Path) -> None:
    images = tmp_path / "images"
    images.mkdir()
    name = f"{CHART}_msg_1781903110000_deadbeef_0.png"
    (images / name).write_bytes(b"chart bytes")
    (tmp_path / "secret.png").write_bytes(b"outside")
    payload = sample_payload()
    chart = payload["storage"]["sessions"][2]["messages"][0]
    chart["images"].append({"base64": "", "mimeType": "image/png", "path": "../secret.png"})
    chart["images"].append({"base64": "", "mimeType": "image/png", "path": "missing.png"})
    bundle = parse(v2_zip(payload), images_dir=images)
    user = next(s for s in bundle.sessions if s.source.endswith(CHART)).messages[0]
    assert (user.images[0].name, user.images[0].data) == (name, b"chart bytes")
    assert [i.data for i in user.images][1:] == [base64.b64decode(PNG_1X1)]
    assert bundle.report.skipped["image path that is not a plain file name"] == 1
    assert bundle.report.skipped["image not found in the images directory"] == 1
    assert "image not in the backup" not in bundle.report.skipped


def test_invalid_base64_image_is_skipped_and_counted() -> None:
    payload = sample_payload()
    payload["storage"]["sessions"][2]["messages"][0]["images"][1]["base64"] = "not base64!"
    bundle = parse(v2_zip(payload))
    assert next(s for s in bundle.sessions if s.source.endswith(CHART)).messages[0].images == []
    assert bundle.report.skipped["image with invalid base64"] == 1


def test_system_prompts_become_rules_linked_from_sessions_and_deduplicated() -> None:
    payload = sample_payload()
    assistants = payload["storage"]["structuredState"]["core"]["assistants"]
    twin = {**copy.deepcopy(assistants[0]), "id": "assistant_twin", "name": "Twin"}
    empty = {**copy.deepcopy(assistants[0]), "id": "assistant_blank", "systemPrompt": "  "}
    assistants += [twin, empty]
    bundle = parse(v2_zip(payload))
    prompt = "You are a strict Python reviewer. Report bugs first."
    assert [(r.name, r.content) for r in bundle.rules] == [
        ("ChatBuddy: Code Reviewer", prompt),
        ("ChatBuddy: Research Buddy", "You are a concise research assistant."),
    ]
    keys = [r.key for r in bundle.rules]
    assert len(set(keys)) == 2
    assert [s.rule for s in bundle.sessions] == [keys[0], keys[1], keys[1]]
    assert parse(v2_zip(payload)).rules == bundle.rules  # the key is a stable hash


def test_connections_only_with_keys_and_gemini_skipped_without_leaking_keys() -> None:
    payload = sample_payload()
    config = payload["storage"]["structuredState"]["settingsModelConfig"]
    config["providers"].append(
        {"id": "provider_gem", "kind": "gemini", "name": "Gemini", "apiKey": "", "models": []}
    )
    payload["storage"]["providerApiKeys"]["provider_gem"] = "AIza-secret-gemini"
    without = parse(v2_zip(payload))
    assert without.connections == []
    assert without.report.skipped["provider (connections are imported only with keys)"] == 3
    bundle = parse(v2_zip(payload), with_keys=True)
    assert [(c.name, c.base_url, c.api_key, c.models) for c in bundle.connections] == [
        ("OpenAI", "https://api.openai.com/v1", KEYS[0], ["gpt-4o"]),
        ("OpenRouter", "https://openrouter.ai/api/v1", KEYS[1], ["deepseek/deepseek-r1"]),
    ]
    assert any("Gemini" in w for w in bundle.report.warnings)
    for said in (everything_said(bundle), everything_said(without)):
        assert not any(key in said for key in (*KEYS, "AIza-secret-gemini"))


def test_what_is_not_imported_is_reported() -> None:
    assert parse(v2_zip(sample_payload())).report.skipped == {
        "sampling settings (not imported)": 3,
        "MCP server (not imported)": 1,
        "UI state (not imported)": 1,
        "kv entry (not imported)": 1,
        "provider (connections are imported only with keys)": 2,
        "image not in the backup": 1,
    }


def test_system_messages_skipped_unknown_assistants_kept_and_rounds_in_order() -> None:
    payload = sample_payload()
    sessions = payload["storage"]["sessions"]
    sessions[1]["assistantId"] = "assistant_gone"
    sky = sessions[1]["messages"]
    sky.insert(0, {"id": "msg_sys", "role": "system", "content": "x", "timestamp": 1781863200000})
    sky[-1]["toolRounds"] = [
        {"reasoning": "first look", "calls": [{"id": "a", "name": "t", "argumentsText": "{bad"}]},
        {
            "calls": [
                {"id": "b", "name": "t", "argumentsText": "[1]", "output": "B"},
                {"id": "c", "name": "u", "argumentsText": "{}"},
            ]
        },
    ]
    bundle = parse(v2_zip(payload))
    assert bundle.report.skipped["system message"] == 1
    assert any("1 session(s)" in w for w in bundle.report.warnings)
    session = next(s for s in bundle.sessions if s.source.endswith(SKY))
    assert (session.model, session.rule) == ("", None)
    got = [
        (sid, m["role"], m.get("tool_calls"), m.get("content")) for sid, m in messages(bundle, SKY)
    ]
    answer = "msg_1781863205120_55667788"
    assert [g[0] for g in got] == [
        "msg_1781863205000_11223344",
        f"{answer}#round-0",
        f"{answer}#call-a",
        f"{answer}#round-1",
        f"{answer}#call-b",
        f"{answer}#call-c",
        answer,
    ]
    assert got[1][2] == [{"id": "a", "name": "t", "input": "{bad"}]
    assert got[3][2] == [
        {"id": "b", "name": "t", "input": [1]},
        {"id": "c", "name": "u", "input": {}},
    ]
    assert [g[3] for g in got if g[1] == "tool"] == ["", "B", ""]
    round_0 = messages(bundle, SKY)[1][1]
    assert round_0["reasoning"] == "first look"
    assert all("is_error" not in m for _, m in messages(bundle, SKY))


def test_progress_counts_messages_up_to_the_total() -> None:
    calls: list[tuple[int, int]] = []
    parse(v2_zip(sample_payload(extra_messages=40)), progress=lambda d, t: calls.append((d, t)))
    assert calls[0] == (0, 47) and calls[-1] == (47, 47)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_big_payload_imports_every_generated_message() -> None:
    bundle = parse(v2_zip(sample_payload(extra_messages=200)))
    big = messages(bundle, BIG_SESSION)
    assert len(big) == 200 + 2 * 10  # every tenth answer adds a round and a tool message
    assert len({sid for sid, _ in big}) == len(big)


# --- the other forms ---------------------------------------------------------------------------


def test_top_folder_and_single_json_forms_equal_the_zip() -> None:
    expected = parse(v2_zip(sample_payload()), with_keys=True)
    assert parse(v2_zip(sample_payload(), top_folder="backup"), with_keys=True) == expected
    assert parse(single_json(sample_payload()), with_keys=True) == expected


def test_encrypted_backup_opens_with_its_passphrase_typed_or_trimmed() -> None:
    plain = v2_zip(sample_payload())
    sealed = encrypted(plain, "correct horse", salt=SALT, iv=IV)
    assert is_encrypted(sealed) and not is_encrypted(plain)
    expected = parse(plain)
    assert parse(sealed, passphrase="correct horse") == expected
    assert parse(sealed, passphrase="  correct horse \n") == expected
    spaced = encrypted(plain, " spaced ", salt=SALT, iv=IV)  # typed as is at encryption time
    assert parse(spaced, passphrase=" spaced ") == expected
    with pytest.raises(WrongPassphrase):
        parse(sealed, passphrase="wrong")
    with pytest.raises(WrongPassphrase):
        parse(sealed)
    with pytest.raises(InvalidImport):
        parse(sealed[:51], passphrase="correct horse")
    tampered = bytearray(sealed)
    tampered[100] ^= 1
    with pytest.raises(WrongPassphrase):
        parse(bytes(tampered), passphrase="correct horse")


def test_encrypted_layout_is_the_documented_one() -> None:
    sealed = encrypted(b"PK plaintext", "pw", salt=SALT, iv=IV)
    assert sealed[:8] == b"CBENCv01" and sealed[8:24] == SALT and sealed[24:36] == IV
    key = hashlib.pbkdf2_hmac("sha256", b"pw", SALT, 100_000, 32)
    assert AESGCM(key).decrypt(IV, sealed[52:] + sealed[36:52], None) == b"PK plaintext"
    assert decrypt(sealed, "pw") == b"PK plaintext"


def test_decrypted_content_must_be_a_zip() -> None:
    with pytest.raises(InvalidImport, match="not a ZIP"):
        parse(encrypted(single_json(sample_payload()), "pw"), passphrase="pw")


def test_legacy_v1_json_maps_like_the_zip() -> None:
    expected = parse(v2_zip(sample_payload()), with_keys=True)
    for schema in ("chatbuddy.backup", "chatbuddy.backup.compass"):
        bundle = parse(legacy_json(schema=schema), with_keys=True)
        assert bundle.sessions == expected.sessions
        assert bundle.rules == expected.rules
        assert bundle.connections == expected.connections  # keys from the providers' apiKey
        assert bundle.report.skipped["MCP server (not imported)"] == 1
    for wrapper in ("state", "data", None):
        assert parse(legacy_json(wrapper=wrapper)).sessions == expected.sessions


def test_oldest_v1_uses_default_model_and_titles_without_source() -> None:
    payload = sample_payload()
    payload["storage"]["sessions"][1]["title"] = "New Session"
    payload["storage"]["sessions"][2]["title"] = "新会话"
    bundle = parse(legacy_json(payload, oldest=True))
    assert [(s.title, s.model) for s in bundle.sessions] == [
        ("Review of retry helper", OPENAI_REF),
        (None, OPENROUTER_REF),
        (None, OPENROUTER_REF),
    ]


def test_default_title_source_drops_the_title() -> None:
    payload = sample_payload()
    payload["storage"]["sessions"][0]["titleSource"] = "default"
    assert parse(v2_zip(payload)).sessions[0].title is None


def test_tool_rounds_stored_as_a_json_string_are_read() -> None:
    payload = sample_payload()
    answer = payload["storage"]["sessions"][0]["messages"][2]
    answer["toolRounds"] = json.dumps(answer["toolRounds"])
    assert parse(v2_zip(payload)) == parse(v2_zip(sample_payload()))


# --- refusals -------------------------------------------------------------------


def manifest_with(**changes: Any) -> bytes:
    members = v2_members(sample_payload())
    manifest = json.loads(members["backup.manifest.json"])
    for key, value in changes.items():
        if key in ("layout", "layoutVersion"):
            manifest["storage"][key] = value
        else:
            manifest[key] = value
    members["backup.manifest.json"] = json.dumps(manifest).encode()
    return zip_members(members)


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"schema": "chatbuddy.backup"}, InvalidImport),
        ({"schema": "something.else"}, InvalidImport),
        ({"version": "2"}, InvalidImport),
        ({"version": True}, InvalidImport),
        ({"version": None}, InvalidImport),
        ({"version": 1}, InvalidImport),
        ({"version": 3}, UnsupportedImportVersion),
        ({"packageFormat": "flat-zip"}, InvalidImport),
        ({"layout": "sqlite"}, InvalidImport),
        ({"layoutVersion": "3"}, InvalidImport),
        ({"layoutVersion": 4}, UnsupportedImportVersion),
    ],
)
def test_manifest_refusals(changes: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        parse(manifest_with(**changes))


def test_newer_version_names_both_versions() -> None:
    with pytest.raises(UnsupportedImportVersion, match=r"version 3 .*version 2"):
        parse(manifest_with(version=3))
    payload = sample_payload()
    payload["version"] = 3
    with pytest.raises(UnsupportedImportVersion):
        parse(single_json(payload))
    with pytest.raises(UnsupportedImportVersion):
        parse(legacy_json(version=2))


def test_older_layout_version_is_accepted() -> None:
    assert len(parse(manifest_with(layoutVersion=2)).sessions) == 3


def damaged(name: str, body: bytes | None) -> bytes:
    members = v2_members(sample_payload())
    if body is None:
        del members[name]
    else:
        members[name] = body
    return zip_members(members)


REVIEW_JSONL = f"sessions/{CODE_REVIEWER}/{REVIEW}.jsonl"


@pytest.mark.parametrize(
    ("name", "body", "says"),
    [
        ("backup.manifest.json", None, "backup.manifest.json"),
        ("backup.manifest.json", b"{", "backup.manifest.json"),
        ("meta/state.core.json", None, "meta/state.core.json"),
        ("meta/ui.selection.json", None, "meta/ui.selection.json"),
        ("meta/settings.general.json", None, "meta/settings.general.json"),
        ("meta/settings.model-config.json", None, "model-config"),
        ("meta/settings.default-models.json", None, "default-models"),
        ("meta/settings.mcp.json", None, "meta/settings.mcp.json"),
        ("meta/settings.mcp.json", b"[]\n", "meta/settings.mcp.json"),
        ("meta/state.core.json", b"\xff\xfe", "meta/state.core.json"),
        ("meta/providers.api-keys.json", b"nope", "api-keys"),
        ("sessions/index.compass.json", None, "index.compass.json"),
        ("sessions/index.compass.json", b'{"sessions": {}}', "index.compass.json"),
        ("sessions/index.compass.json", b'{"sessions": [{"id": 1}]}', "index.compass.json"),
        (REVIEW_JSONL, None, REVIEW_JSONL),
        (REVIEW_JSONL, b'{"id":"m","role":"user"}\n{oops\n{}\n', f"{REVIEW_JSONL} line 2"),
        (REVIEW_JSONL, b'{"id":"m"}\n[]\n{}\n', f"{REVIEW_JSONL} line 2"),
        (REVIEW_JSONL, b"{}\n{}\n", "messageCount"),
    ],
)
def test_member_refusals(name: str, body: bytes | None, says: str) -> None:
    with pytest.raises(InvalidImport) as caught:
        parse(damaged(name, body))
    assert says in caught.value.message


def test_duplicate_session_ids_are_refused() -> None:
    payload = sample_payload()
    sessions = payload["storage"]["sessions"]
    sessions.append({**copy.deepcopy(sessions[1]), "assistantId": CODE_REVIEWER})
    with pytest.raises(InvalidImport, match="twice"):
        parse(v2_zip(payload))
    with pytest.raises(InvalidImport, match="twice"):
        parse(single_json(payload))


@pytest.mark.parametrize(
    "document",
    [b"", b"hello", b"[]", b'{"schema": "other", "version": 2}', b'{"foo": 1}', b"\xff{}"],
)
def test_not_a_backup(document: bytes) -> None:
    with pytest.raises(InvalidImport):
        parse(document)


def test_malformed_message_fields_name_where() -> None:
    payload = sample_payload()
    payload["storage"]["sessions"][1]["messages"][0]["timestamp"] = "yesterday"
    with pytest.raises(InvalidImport, match=f"{SKY}.*timestamp"):
        parse(v2_zip(payload))


# --- the safe ZIP reader -----------------------------------------------------------------------


def test_read_zip_returns_members_and_skips_directories() -> None:
    data = zip_members(
        [("top/", b""), ("top/a.txt", b"a" * 5000), ("b.bin", b"\x00\x01")],
        compression=zipfile.ZIP_DEFLATED,
    )
    assert read_zip(data) == {"top/a.txt": b"a" * 5000, "b.bin": b"\x00\x01"}


def test_truncated_and_flipped_archives_are_invalid() -> None:
    data = v2_zip(sample_payload())
    with pytest.raises(InvalidImport):
        read_zip(data[: len(data) // 2])
    flipped = bytearray(data)
    flipped[data.index(b"Code Reviewer")] ^= 0x20  # inside a STORED member: the CRC catches it
    with pytest.raises(InvalidImport, match=r"state\.core\.json"):
        parse(bytes(flipped))


@pytest.mark.parametrize(
    "name", ["../x", "/abs", "a/../../x", "a\\b", "C:x", "a//b", "./a", "a/./b", "a/.."]
)
def test_unsafe_member_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidImport, match="not a safe relative path"):
        read_zip(zip_members([("ok.txt", b"x"), (name, b"y")]))


def test_nul_in_a_member_name_is_refused() -> None:
    data = zip_members([("aXb", b"y")]).replace(b"aXb", b"a\x00b")
    with pytest.raises(InvalidImport, match="not a safe relative path"):
        read_zip(data)


def test_duplicate_members_are_refused() -> None:
    with pytest.warns(UserWarning):  # zipfile warns when writing a duplicate
        data = zip_members([("a.txt", b"1"), ("a.txt", b"2")])
    with pytest.raises(InvalidImport, match="twice"):
        read_zip(data)


def test_encrypted_members_are_refused() -> None:
    data = bytearray(zip_members([("a.txt", b"secret")]))
    central = data.index(b"PK\x01\x02")
    data[central + 8] |= 0x01
    with pytest.raises(InvalidImport, match="encrypted"):
        read_zip(bytes(data))


def test_zip_bomb_is_too_large() -> None:
    bomb = zip_members([("zeros.bin", bytes(50 * 1024 * 1024))], compression=zipfile.ZIP_DEFLATED)
    assert len(bomb) < 200_000
    with pytest.raises(ImportTooLarge, match=r"zeros\.bin"):
        read_zip(bomb)
    with pytest.raises(ImportTooLarge):
        parse(bomb)


def test_header_that_understates_the_size_is_caught() -> None:
    data = bytearray(zip_members([("a.txt", b"x" * 1000)], compression=zipfile.ZIP_DEFLATED))
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = data.index(signature) + offset
        data[at : at + 4] = (10).to_bytes(4, "little")  # uncompressed size: 10
    with pytest.raises(InvalidImport, match=r"a\.txt"):
        read_zip(bytes(data))


def test_member_count_and_total_limits() -> None:
    data = zip_members([(f"f{i}", b"x" * 100) for i in range(5)])
    with pytest.raises(ImportTooLarge, match="members"):
        read_zip(data, max_members=4)
    with pytest.raises(ImportTooLarge):
        read_zip(data, max_total=450)
    assert len(read_zip(data, max_members=5, max_total=500)) == 5


# --- garbled input raises only the model's errors ---------------------------------------------


def parse_or_model_error(data: bytes, **kwargs: Any) -> None:
    with contextlib.suppress(*MODEL_ERRORS):
        parse(data, **kwargs)


def test_truncations_and_garbled_bytes_raise_only_model_errors() -> None:
    rng = random.Random(19)
    for data in (v2_zip(sample_payload()), single_json(sample_payload()), legacy_json()):
        for cut in range(0, len(data), max(1, len(data) // 150)):
            parse_or_model_error(data[:cut])
        for _ in range(150):
            garbled = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                garbled[rng.randrange(len(garbled))] = rng.randrange(256)
            parse_or_model_error(bytes(garbled))
    sealed = encrypted(v2_zip(sample_payload()), "pw", salt=SALT, iv=IV)
    for cut in (0, 8, 40, 51, 52, 53, len(sealed) - 1):
        parse_or_model_error(sealed[:cut], passphrase="pw")


ODD_VALUES: list[Any] = [None, 0, -1, 1e300, float("nan"), True, "", "x", [], {}, [1], {"a": 1}]


def garble(tree: Any, rng: random.Random) -> Any:
    """`tree` with one to three values somewhere inside replaced by odd ones."""
    for _ in range(rng.randint(1, 3)):
        node: Any = tree
        parent: Any = None
        key: Any = None
        while isinstance(node, (dict, list)) and node and rng.random() < 0.85:
            key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
            parent, node = node, node[key]
        if parent is not None:
            parent[key] = copy.deepcopy(rng.choice(ODD_VALUES))
    return tree


def test_garbled_values_raise_only_model_errors() -> None:
    rng = random.Random(1919)
    legacy = json.loads(legacy_json())
    members = v2_members(sample_payload())
    for _ in range(400):
        parse_or_model_error(single_json(garble(sample_payload(), rng)), with_keys=True)
        document = garble(copy.deepcopy(legacy), rng)
        parse_or_model_error(json.dumps(document).encode(), with_keys=True)
        name = rng.choice([n for n in members if n.endswith(".json")])
        changed = dict(
            members, **{name: json.dumps(garble(json.loads(members[name]), rng)).encode()}
        )
        parse_or_model_error(zip_members(changed), with_keys=True)
    jsonl = [n for n in members if n.endswith(".jsonl")]
    for _ in range(200):
        name = rng.choice(jsonl)
        lines = [garble(json.loads(line), rng) for line in members[name].splitlines()]
        body = "".join(json.dumps(line) + "\n" for line in lines).encode()
        parse_or_model_error(zip_members(dict(members, **{name: body})), with_keys=True)
