"""Web search: `GET|PUT /web-search`, `POST /web-search/test` and the
`web_search` tool, through a real `foya serve` on a Unix socket, against a local fake search
server that speaks SearXNG's JSON API and the Bing Web Search API.

Settings are stored in `<data-dir>/web-search.json` (0600); API keys are write-only (`has_api_key`),
kept by an empty `api_key`, dropped when the provider's endpoint changes, and never appear in an
answer or the kernel's log. Bad settings are a 400 and change nothing. The tool answers Foya's
`{"provider", "query", "results"}` and asks for `network` approval in manual mode.
"""

from __future__ import annotations

import contextlib
import json
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from support.fake_provider import Agent, agent_kernel, answer, call, only, payloads, tools
from support.helpers import FOYA, REPO, base_env, threaded_server
from support.streams_helpers import assert_error

from app.kernel.web.providers import parse_baidu, parse_duckduckgo

KEY = "bing-secret-4f1c2b7a9d"
RESULTS = [
    {"title": "Foya kernel", "url": "https://example.com/foya", "content": "An agent kernel."},
    {"title": "Same again", "url": "https://example.com/foya", "content": "duplicate"},
    {"title": "Not the web", "url": "ftp://example.com/file", "content": "skipped"},
    {"title": "Docs", "url": "https://docs.example.org/start", "content": ""},
]


@dataclass
class FakeSearch:
    """SearXNG at `/search`, Bing at `/bing`, an error at `/broken/search`; records requests."""

    port: int = 0
    requests: list[tuple[str, dict[str, str], dict[str, str]]] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextlib.contextmanager
def fake_search() -> Iterator[FakeSearch]:
    fake = FakeSearch()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            return None

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            headers = {k.lower(): v for k, v in self.headers.items()}
            fake.requests.append((parts.path, query, headers))
            body: dict[str, object]
            if parts.path == "/search" and query.get("format") == "json":
                status, body = 200, {"query": query.get("q"), "results": RESULTS}
            elif parts.path == "/bing":
                value = [{"name": "Bing hit", "url": "https://bing.example/x", "snippet": "b"}]
                status, body = 200, {"webPages": {"value": value}}
            else:
                status, body = 500, {"error": "broken"}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with threaded_server(Handler) as server:
        fake.port = server.server_address[1]
        yield fake


@pytest.fixture(scope="module")
def search() -> Iterator[FakeSearch]:
    with fake_search() as fake:
        yield fake


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Agent]:
    with agent_kernel(tmp_path_factory.mktemp("websearch")) as running:
        yield running


def settings(search: FakeSearch, **extra: Any) -> dict[str, Any]:
    """SearXNG (the default) and Bing with a key, both on the fake."""
    return {
        "enabled": True,
        "default_provider": "sx",
        "providers": [
            {"id": "sx", "kind": "searxng", "enabled": True, "endpoint": search.base},
            {
                "id": "bing",
                "kind": "bing",
                "enabled": True,
                "api_key": KEY,
                "endpoint": f"{search.base}/bing",
            },
        ],
        **extra,
    }


def put(agent: Agent, body: dict[str, Any]) -> Any:
    return agent.client.put("/web-search", json=body)


def stored(agent: Agent) -> dict[str, Any]:
    return dict(json.loads((agent.data_dir / "web-search.json").read_text()))


def test_settings_start_empty_and_keys_are_write_only(agent: Agent, search: FakeSearch) -> None:
    first = agent.client.get("/web-search")
    assert first.status_code == 200 and first.json() == {"enabled": True, "providers": []}
    answer = put(agent, settings(search))
    assert answer.status_code == 200, answer.text
    sx, bing = answer.json()["providers"]
    assert sx == {
        "id": "sx",
        "kind": "searxng",
        "name": "SearXNG",
        "enabled": True,
        "endpoint": search.base,
    }
    assert bing["has_api_key"] is True and "api_key" not in bing and bing["name"] == "Bing"
    assert agent.client.get("/web-search").json() == answer.json()
    path = agent.data_dir / "web-search.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stored(agent)["providers"][1]["api_key"] == KEY
    # What a client read back, sent again with an empty key, keeps the key.
    again = answer.json()
    again["providers"][1]["api_key"] = ""
    assert put(agent, again).json() == answer.json()
    assert stored(agent)["providers"][1]["api_key"] == KEY


def test_a_new_endpoint_without_a_key_drops_the_key(agent: Agent, search: FakeSearch) -> None:
    put(agent, settings(search))
    moved = settings(search)
    moved["providers"][1].update(api_key="", endpoint=f"{search.base}/elsewhere")
    bing = put(agent, moved).json()["providers"][1]
    assert "has_api_key" not in bing
    assert stored(agent)["providers"][1]["api_key"] == ""
    put(agent, settings(search))


@pytest.mark.parametrize(
    ("change", "status", "code", "message"),
    [
        ({"default_provider": "nope"}, 400, "web_search_update_failed", "'nope' not found"),
        ({"providers": [{"id": "a", "kind": "altavista"}]}, 400, "web_search_update_failed", ""),
        (
            {"providers": [{"id": "a", "kind": "baidu"}, {"id": "a", "kind": "baidu"}]},
            400,
            "web_search_update_failed",
            "duplicate search provider id 'a'",
        ),
        ({"providers": [{"kind": "searxng"}]}, 400, "web_search_update_failed", "SearXNG"),
        (
            {"providers": [{"kind": "bing", "endpoint": "ftp://x"}]},
            400,
            "web_search_update_failed",
            "endpoint",
        ),
        ({"providers": [{"kind": "bing", "api_key": "é"}]}, 400, "web_search_update_failed", ""),
        ({"providers": [{"kind": "bing", "enabled": [1]}]}, 400, "bad_request", "enabled"),
    ],
)
def test_bad_settings_are_refused_and_change_nothing(
    agent: Agent, search: FakeSearch, change: dict[str, Any], status: int, code: str, message: str
) -> None:
    put(agent, settings(search))
    before_file = (agent.data_dir / "web-search.json").read_bytes()
    before = agent.client.get("/web-search").json()
    response = put(agent, {**settings(search), "default_provider": "", **change})
    assert_error(response, status, code)
    assert message in response.json()["message"]
    assert agent.client.get("/web-search").json() == before
    assert (agent.data_dir / "web-search.json").read_bytes() == before_file


def test_a_provider_can_be_tested(agent: Agent, search: FakeSearch) -> None:
    put(agent, settings(search))
    search.requests.clear()
    answer = agent.client.post("/web-search/test", json={"provider_id": "sx", "query": "foya"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == [
        {
            "title": "Foya kernel",
            "url": "https://example.com/foya",
            "snippet": "An agent kernel.",
            "source": "example.com",
            "rank": 1,
        },
        {
            "title": "Same again",
            "url": "https://example.com/foya",
            "snippet": "duplicate",
            "source": "example.com",
            "rank": 2,
        },
        {
            "title": "Not the web",
            "url": "ftp://example.com/file",
            "snippet": "skipped",
            "source": "example.com",
            "rank": 3,
        },
    ]
    ((path, query, _),) = search.requests
    assert (path, query) == ("/search", {"q": "foya", "format": "json"})


def test_a_keyed_provider_gets_its_key_and_no_answer_or_log_shows_it(
    agent: Agent, search: FakeSearch
) -> None:
    put(agent, settings(search))
    search.requests.clear()
    answer = agent.client.post("/web-search/test", json={"provider_id": "bing", "query": "q"})
    assert answer.status_code == 200, answer.text
    assert answer.json()[0]["url"] == "https://bing.example/x"
    ((path, query, headers),) = search.requests
    assert (path, query["q"], headers["ocp-apim-subscription-key"]) == ("/bing", "q", KEY)
    broken = settings(search)
    broken["providers"][1]["endpoint"] = f"{search.base}/broken/search"
    broken["providers"][1]["api_key"] = KEY
    put(agent, broken)
    failed = agent.client.post("/web-search/test", json={"provider_id": "bing", "query": "q"})
    assert_error(failed, 502, "web_search_test_failed")
    assert failed.json()["message"] == "Bing Web Search returned HTTP 500"
    for response in (answer, failed, agent.client.get("/web-search")):
        assert KEY not in response.text
    logs = agent.served.kernel.stdout() + agent.served.kernel.stderr()
    assert KEY not in logs
    put(agent, settings(search))


def test_test_errors(agent: Agent, search: FakeSearch) -> None:
    put(agent, settings(search))
    missing = agent.client.post("/web-search/test", json={"provider_id": "x", "query": "q"})
    assert_error(missing, 404, "web_search_test_failed")
    empty = agent.client.post("/web-search/test", json={"provider_id": "sx", "query": " "})
    assert_error(empty, 400, "bad_request")
    broken = settings(search)
    broken["providers"][0]["endpoint"] = f"{search.base}/broken"
    put(agent, broken)
    failed = agent.client.post("/web-search/test", json={"provider_id": "sx", "query": "q"})
    assert_error(failed, 502, "web_search_test_failed")
    assert failed.json()["message"] == "SearXNG returned HTTP 500"
    put(agent, settings(search))


def test_the_tool_searches_with_the_default_provider(agent: Agent, search: FakeSearch) -> None:
    put(agent, settings(search))
    s = agent.session()
    frames = s.tool_turn(call("w1", "web_search", {"query": "foya kernel", "limit": 2}))
    (end,) = payloads(frames, "tool_end")
    assert not end.get("is_error"), end
    assert json.loads(end["output"]) == {
        "provider": "sx",
        "query": "foya kernel",
        "results": [
            {
                "title": "Foya kernel",
                "url": "https://example.com/foya",
                "snippet": "An agent kernel.",
                "source": "example.com",
                "rank": 1,
            }
        ],
    }
    offered = s.chats()[0].body["tools"]
    (spec,) = [t["function"] for t in offered if t["function"]["name"] == "web_search"]
    assert spec["parameters"]["required"] == ["query"]


def test_the_tool_reports_a_disabled_search_or_a_failing_provider(
    agent: Agent, search: FakeSearch
) -> None:
    put(agent, settings(search, enabled=False))
    s = agent.session()
    frames = s.tool_turn(call("w1", "web_search", {"query": "x"}))
    assert only(frames, "tool_end")["output"] == "web search failed: web search is disabled"
    broken = settings(search)
    broken["providers"][0]["endpoint"] = f"{search.base}/broken"
    put(agent, broken)
    frames = s.tool_turn(call("w2", "web_search", {"query": "x"}))
    end = only(frames, "tool_end")
    assert end["is_error"] and end["output"] == "web search failed: SearXNG returned HTTP 500"
    put(agent, settings(search))


def test_the_tool_asks_for_network_approval(agent: Agent, search: FakeSearch) -> None:
    put(agent, settings(search))
    s = agent.session(approval_mode="manual")
    s.push(tools(call("w1", "web_search", {"query": "approve me"})), answer("ok"))
    with s.events() as events:
        s.submit("search")
        asked = only(events.until_kind("approval_request"), "approval_request")
        assert (asked["tool_name"], asked["action"]) == ("web_search", "network")
        assert (asked["detail"], asked["resource"]) == ("Web search: approve me", "approve me")
        decided = agent.client.post(
            f"/sessions/{s.id}/approvals/{asked['id']}", json={"decision": "denied"}
        )
        assert decided.status_code == 204
        frames = events.until_kind("turn_complete")
    assert only(frames, "tool_end")["output"] == "user denied web search"


def test_result_pages_are_parsed_as_foya_parses_them() -> None:
    lite = """<table><tr><td><a class="result-link"
        href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.com%2Fa">First</a></td></tr>
        <tr><td class="result-snippet">One result</td></tr>
        <tr><td><a class="result-link" href="https://example.org/b">Second</a></td></tr>
        <tr><td class="result-snippet">Two result</td></tr></table>"""
    first, second = parse_duckduckgo(lite, 10)
    assert (first["url"], first.get("snippet")) == ("https://example.com/a", "One result")
    assert (second["rank"], second.get("source")) == (2, "example.org")
    baidu = """<div class="result"><h3><a href="https://example.com/a">First</a></h3>
        <div>First snippet</div></div>
        <div class="result"><h3><a href="https://example.org/b">Second</a></h3>
        <div>Second snippet</div></div>"""
    one, two = parse_baidu(baidu, 10)
    assert (one["title"], one.get("snippet"), two["rank"]) == ("First", "First snippet", 2)


# ------------------------------------------------------------------------------------ the CLI


def foya_web_search(agent: Agent, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`foya web-search <args> --socket <the module's kernel>`, a real subprocess."""
    socket = str(agent.served.kernel.uds)
    return subprocess.run(
        [*FOYA, "web-search", *args, "--socket", socket],
        cwd=REPO,
        env=base_env(),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_cli_sets_shows_and_tests(agent: Agent, search: FakeSearch) -> None:
    done = foya_web_search(agent, "set-searxng", "mine", search.base)
    assert done.returncode == 0, done.stderr
    assert agent.client.get("/web-search").json()["default_provider"] == "mine"
    shown = foya_web_search(agent, "show")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[:2] == ["web search: enabled", "default provider: mine"]
    assert f"mine  searxng  SearXNG  yes      -    {search.base}" in shown.stdout
    found = foya_web_search(agent, "test", "foya", "kernel", "--json")
    assert found.returncode == 0, found.stderr
    answer = json.loads(found.stdout)
    assert answer["provider"] == "mine" and answer["results"][0]["title"] == "Foya kernel"
    assert search.requests[-1][1] == {"q": "foya kernel", "format": "json"}
    text = foya_web_search(agent, "test", "foya")
    assert text.stdout.splitlines()[:3] == [
        "provider: mine",
        "1. Foya kernel",
        "   https://example.com/foya",
    ]
    put(agent, settings(search))


def test_the_cli_takes_a_key_from_stdin_and_never_prints_it(agent: Agent) -> None:
    done = foya_web_search(agent, "set-google", "g", "cx-1", "-", "--json", stdin=KEY + "\n")
    assert done.returncode == 0, done.stderr
    (google,) = json.loads(done.stdout)["providers"]
    assert google["has_api_key"] is True and google["search_engine_id"] == "cx-1"
    assert KEY not in done.stdout + done.stderr
    assert stored(agent)["providers"][0]["api_key"] == KEY
    bad = foya_web_search(agent, "set-searxng", "s", "ftp://nowhere")
    assert bad.returncode == 1
    assert "web_search_update_failed" in bad.stderr
