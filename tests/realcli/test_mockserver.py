"""The mock model server on its own: each API's answers per scenario, the request log, a clean stop."""

from __future__ import annotations

import http.client
import json
import socket
from typing import Any

import pytest

from tests.realcli import mockserver
from tests.realcli.mockserver import BIG_COMMAND, USAGE, MockModelServer, final_text, prompt

pytestmark = pytest.mark.realcli


@pytest.fixture
def mock():
    with MockModelServer() as server:
        yield server


def _post(server: MockModelServer, path: str, body: Any) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def _events(raw: bytes) -> list[tuple[str | None, Any]]:
    out: list[tuple[str | None, Any]] = []
    for block in raw.decode().split("\n\n"):
        if not block.strip():
            continue
        name = None
        data = ""
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        out.append((name, data if data == "[DONE]" else json.loads(data)))
    return out


def test_binds_loopback_on_a_free_port_and_stops_cleanly() -> None:
    server = MockModelServer().start()
    port = server.port
    assert server.url == f"http://127.0.0.1:{port}"
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    server.stop()
    server.stop()
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    with pytest.raises(RuntimeError):
        _ = server.port


def test_responses_api_tool_call_then_final(mock: MockModelServer) -> None:
    first = {"model": "m", "stream": True, "input": [{"type": "message", "role": "user", "content": prompt("A")}]}
    status, headers, raw = _post(mock, "/v1/responses", first)
    assert status == 200 and headers["content-type"] == "text/event-stream"
    events = _events(raw)
    assert [n for n, _ in events] == [
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    item = events[2][1]["item"]
    assert item["type"] == "function_call" and item["name"] == "exec_command"
    assert json.loads(item["arguments"]) == {"cmd": "echo hello"}
    usage = events[-1][1]["response"]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == USAGE

    second = {**first, "input": [*first["input"], {"type": "function_call_output", "call_id": "c", "output": "hello"}]}
    _, _, raw = _post(mock, "/v1/responses", second)
    events = _events(raw)
    assert events[-2][1]["item"]["content"][0]["text"] == final_text("codex")
    assert [r.answer for r in mock.requests] == ["tool_call", "final"]


def test_messages_api_stream_and_head_probe(mock: MockModelServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
    conn.request("HEAD", "/")
    assert conn.getresponse().status == 200
    conn.close()
    body = {"model": "claude-x", "stream": True, "messages": [{"role": "user", "content": prompt("Abig")}]}
    _, _, raw = _post(mock, "/v1/messages?beta=true", body)
    events = _events(raw)
    assert [n for n, _ in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert json.loads(events[2][1]["delta"]["partial_json"])["command"] == BIG_COMMAND
    assert events[0][1]["message"]["usage"]["input_tokens"] == USAGE[0]
    assert events[4][1]["usage"]["output_tokens"] == USAGE[1]
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}
    _, _, raw = _post(mock, "/v1/messages", {**body, "messages": [*body["messages"], result]})
    assert _events(raw)[2][1]["delta"] == {"type": "text_delta", "text": final_text("claude")}
    assert [(r.api, r.answer, r.scenario) for r in mock.requests] == [
        ("probe", "head", "A"),
        ("messages", "tool_call", "Abig"),
        ("messages", "final", "Abig"),
    ]


def test_gemini_routing_call_and_stream(mock: MockModelServer) -> None:
    contents = [{"role": "user", "parts": [{"text": prompt("A")}]}]
    status, _, raw = _post(mock, "/v1beta/models/gemini-lite:generateContent", {"contents": contents})
    routed = json.loads(raw)
    assert status == 200
    assert json.loads(routed["candidates"][0]["content"]["parts"][0]["text"])["complexity_score"] == 10
    _, _, raw = _post(mock, "/v1beta/models/gemini-flash:streamGenerateContent?alt=sse", {"contents": contents})
    (name, chunk), = _events(raw)
    assert name is None and chunk["modelVersion"] == "gemini-flash"
    assert chunk["candidates"][0]["content"]["parts"][0]["functionCall"]["name"] == "run_shell_command"
    reply = {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command", "response": {}}}]}
    _, _, raw = _post(mock, "/v1beta/models/gemini-flash:streamGenerateContent", {"contents": [*contents, reply]})
    (_, chunk), = _events(raw)
    assert chunk["candidates"][0]["content"]["parts"] == [{"text": final_text("gemini")}]
    assert chunk["usageMetadata"]["promptTokenCount"] == USAGE[0]


def test_chat_completions_title_tool_call_and_final(mock: MockModelServer) -> None:
    messages = [{"role": "user", "content": prompt("A")}]
    _, _, raw = _post(mock, "/v1/chat/completions", {"stream": True, "messages": messages})
    assert _events(raw)[1][1]["choices"][0]["delta"] == {"content": "Mock title"}
    body = {"stream": True, "messages": messages, "tools": [{"type": "function"}]}
    _, _, raw = _post(mock, "/v1/chat/completions", body)
    events = _events(raw)
    assert events[-1] == (None, "[DONE]")
    call = events[1][1]["choices"][0]["delta"]["tool_calls"][0]
    assert call["function"]["name"] == "bash"
    assert events[2][1]["choices"][0]["finish_reason"] == "tool_calls"
    assert events[3][1]["usage"]["prompt_tokens"] == USAGE[0]
    body["messages"] = [*messages, {"role": "tool", "tool_call_id": "c", "content": "hello"}]
    _, _, raw = _post(mock, "/v1/chat/completions", body)
    assert _events(raw)[1][1]["choices"][0]["delta"] == {"content": final_text("opencode")}
    assert [r.answer for r in mock.requests] == ["title", "tool_call", "final"]


@pytest.mark.parametrize(
    ("path", "body", "message_path"),
    [
        ("/v1/responses", {"stream": True}, ("error", "message")),
        ("/v1/messages", {"stream": True}, ("error", "message")),
        ("/v1beta/models/g:streamGenerateContent", {}, ("error", "message")),
        ("/v1/chat/completions", {"stream": True, "tools": [{}]}, ("error", "message")),
    ],
)
def test_scenario_b_is_an_http_500_with_a_provider_shaped_body(
    mock: MockModelServer, path: str, body: dict[str, Any], message_path: tuple[str, str]
) -> None:
    status, headers, raw = _post(mock, path, {**body, "messages": [{"content": prompt("B")}]})
    assert status == 500
    error = json.loads(raw)
    assert error[message_path[0]][message_path[1]] == mockserver.HTTP_ERROR_MESSAGE
    assert ("retry-after-ms" in headers) == path.endswith("/chat/completions")
    assert mock.requests[-1].answer == "http_500" and mock.requests[-1].status == 500


def test_scenario_bevent_errors_inside_a_200_stream(mock: MockModelServer) -> None:
    text = prompt("Bevent")
    status, _, raw = _post(mock, "/v1/responses", {"stream": True, "input": text})
    assert status == 200 and _events(raw)[-1][0] == "response.failed"
    status, _, raw = _post(mock, "/v1/messages", {"stream": True, "messages": [{"content": text}]})
    assert status == 200 and _events(raw)[-1][1]["error"]["message"] == mockserver.STREAM_ERROR_MESSAGE
    # Claude Code's non-streaming fallback fails like B; Gemini's routing call still succeeds.
    status, _, _ = _post(mock, "/v1/messages", {"messages": [{"content": text}]})
    assert status == 500
    status, _, _ = _post(mock, "/v1beta/models/g:generateContent", {"contents": [{"parts": [{"text": text}]}]})
    assert status == 200
    _, _, raw = _post(mock, "/v1beta/models/g:streamGenerateContent", {"contents": [{"parts": [{"text": text}]}]})
    assert "error" in _events(raw)[0][1]
    _, _, raw = _post(mock, "/v1/chat/completions", {"stream": True, "tools": [{}], "messages": [{"content": text}]})
    assert _events(raw)[-1][1]["error"]["message"] == mockserver.STREAM_ERROR_MESSAGE
    assert [r.answer for r in mock.requests] == [
        "stream_error", "stream_error", "http_500", "route", "stream_error", "stream_error"
    ]


def test_unknown_routes_and_bodies_get_404(mock: MockModelServer) -> None:
    status, _, _ = _post(mock, "/v1/unknown", {})
    assert status == 404
    conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=10)
    conn.request("POST", "/v1/responses", body=b"not json")
    assert conn.getresponse().status == 404
    conn.close()
    assert [r.answer for r in mock.requests] == ["not_found", "not_found"]


def test_default_scenario_and_bad_names() -> None:
    with MockModelServer(scenario="B") as server:
        status, _, _ = _post(server, "/v1/responses", {"stream": True, "input": "no marker"})
        assert status == 500
        assert server.requests[0].scenario == "B"
    with pytest.raises(ValueError):
        MockModelServer(scenario="C")
    with pytest.raises(ValueError):
        prompt("C")


def test_a_client_that_hangs_up_mid_stream_is_no_error(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.realcli.mockserver import _Server

    server = _Server.__new__(_Server)  # only its error hook is under test: no socket
    for exc in (ConnectionResetError(104, "Connection reset by peer"), BrokenPipeError(32, "Broken pipe")):
        try:
            raise exc
        except OSError:
            server.handle_error(None, ("127.0.0.1", 1))
    assert capsys.readouterr().err == ""
    try:
        raise ValueError("a real fault")
    except ValueError:
        server.handle_error(None, ("127.0.0.1", 1))
    assert "ValueError: a real fault" in capsys.readouterr().err
