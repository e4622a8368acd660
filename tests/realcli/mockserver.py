"""A local mock model server that the real agent CLIs can talk to offline.

It speaks just enough of four wire APIs for one agent turn:

* the OpenAI Responses API (``POST …/responses``, used by ``codex``),
* the Anthropic Messages API (``HEAD /`` and ``POST …/messages``, used by ``claude``),
* the Gemini API (``…:generateContent`` and ``…:streamGenerateContent?alt=sse``,
  used by ``gemini``, whose model-routing classifier call is answered with
  ``complexity_score`` 10),
* OpenAI chat completions (``POST …/chat/completions``, used by ``opencode``,
  whose title request is answered with a short title, by Kilo, and by Qwen Code,
  whose shell tool ``run_shell_command`` it calls instead of ``bash``).

Every answer is decided from the request alone (no state between requests),
so auxiliary calls such as titles and routing never disturb a turn. The
scenario comes from the marker ``mock scenario: NAME`` anywhere in the
request body (:func:`prompt` puts it in the prompt), else the server default:

``A``
    the first request gets a call to the CLI's own shell tool running
    ``echo hello``; once a request carries a tool result, the answer is
    ``FINAL-ANSWER-<cli>``. Every model response reports usage
    input=1234, output=56 (:data:`USAGE`).
``Abig``
    the same, with a command printing 2,000,000 bytes.
``B``
    every model request gets HTTP 500 with a provider-shaped JSON error.
``Bevent``
    streaming requests get HTTP 200 and an event stream carrying an error
    instead of a completion; Claude Code's non-streaming fallback gets the
    500 of ``B``; side calls that do not stream (Gemini's routing) succeed.

The server binds 127.0.0.1 only, on a free port unless told one, logs one
small record per request (never the body) and stops cleanly.

.. seealso:: :mod:`tests.realcli.harness` runs a real CLI against it.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar
from urllib.parse import urlsplit

__all__ = [
    "SCENARIOS",
    "USAGE",
    "BIG_COMMAND",
    "BIG_BYTES",
    "SMALL_COMMAND",
    "MockModelServer",
    "RequestRecord",
    "final_text",
    "prompt",
    "command_for",
]

SCENARIOS = ("A", "Abig", "B", "Bevent")
#: Input and output tokens reported by every model response.
USAGE = (1234, 56)
SMALL_COMMAND = "echo hello"
BIG_BYTES = 2_000_000
BIG_COMMAND = f"head -c {BIG_BYTES} /dev/zero | tr '\\0' x"
#: Error messages the mock sends (the CLIs may show them, or their own).
HTTP_ERROR_MESSAGE = "mock: simulated 500 failure"
STREAM_ERROR_MESSAGE = "mock: simulated stream failure"
#: Largest request body read; bigger requests get 413 (a 2 MB tool output fits).
MAX_BODY = 64 << 20
#: Request records kept; past it only ``dropped_records`` grows.
MAX_RECORDS = 10_000

_MARKER = re.compile(rb"mock scenario: ([A-Za-z]+)")


def command_for(scenario: str) -> str:
    """The shell command the mock asks the CLI to run in ``scenario``."""
    return BIG_COMMAND if scenario == "Abig" else SMALL_COMMAND


def final_text(cli: str) -> str:
    """The final answer the mock gives ``cli`` once its tool call was answered."""
    return f"FINAL-ANSWER-{cli}"


def prompt(scenario: str) -> str:
    """A prompt carrying the scenario marker the server decides by."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")
    return (
        f"Run the shell command `{command_for(scenario)}`, then reply with the final answer. "
        f"(mock scenario: {scenario})"
    )


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request the server answered (the body itself is not kept)."""

    t: float
    method: str
    path: str
    api: str
    scenario: str
    answer: str
    status: int
    body_bytes: int
    stream: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"{head}data: {payload}\n\n".encode()


def _event(kind: str, **fields: Any) -> bytes:
    """A named SSE event whose data repeats the name as ``type`` (Responses and Messages APIs)."""
    return _sse(kind, {"type": kind, **fields})


class _Turn:
    """What one request is, as far as the mock's decision goes."""

    def __init__(self, api: str, body: dict[str, Any], scenario: str) -> None:
        self.api = api
        self.body = body
        self.scenario = scenario

    @property
    def command(self) -> str:
        return command_for(self.scenario)


def _has_tool_result(api: str, body: dict[str, Any]) -> bool:
    if api == "responses":
        items = body.get("input")
        return isinstance(items, list) and any(
            isinstance(i, dict) and i.get("type") == "function_call_output" for i in items
        )
    if api == "messages":
        for m in body.get("messages") or ():
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, list) and any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content
            ):
                return True
        return False
    if api == "gemini":
        for c in body.get("contents") or ():
            parts = c.get("parts") if isinstance(c, dict) else None
            if isinstance(parts, list) and any(isinstance(p, dict) and "functionResponse" in p for p in parts):
                return True
        return False
    if api == "chat":
        return any(isinstance(m, dict) and m.get("role") == "tool" for m in body.get("messages") or ())
    return False


class _Server(ThreadingHTTPServer):
    """A client may close its connection as soon as it has the event it needs (claude resets it on the error
    event of Bevent, before the stream's last chunk): that is not a fault of the mock's, nothing to print."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class MockModelServer:
    """The mock model server; use as a context manager or call :meth:`start`/:meth:`stop`.

    ``scenario`` is the default for requests without a marker. ``port=0``
    picks a free port; :attr:`url` is ``http://127.0.0.1:PORT``.

    .. seealso:: :func:`prompt`, :data:`SCENARIOS`
    """

    def __init__(self, *, scenario: str = "A", port: int = 0) -> None:
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {scenario!r}; choose one of {', '.join(SCENARIOS)}")
        self.scenario = scenario
        self._port = port
        self._lock = threading.Lock()
        self._records: list[RequestRecord] = []
        self.dropped_records = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ids = 0

    # -- lifecycle -----------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the mock server is not running")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MockModelServer:
        if self._httpd is not None:
            return self
        handler = type("_BoundHandler", (_Handler,), {"mock": self})
        httpd = _Server(("127.0.0.1", self._port), handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        # A short poll interval makes stop() return promptly.
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="mock-model-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, close the socket and wait for the serving thread (idempotent)."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> MockModelServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- request log ---------------------------------------------------------------

    @property
    def requests(self) -> list[RequestRecord]:
        """A copy of the request log, oldest first."""
        with self._lock:
            return list(self._records)

    def _log(self, rec: RequestRecord) -> None:
        with self._lock:
            if len(self._records) < MAX_RECORDS:
                self._records.append(rec)
            else:
                self.dropped_records += 1

    def _next_id(self) -> int:
        with self._lock:
            self._ids += 1
            return self._ids

    # -- decisions -----------------------------------------------------------------

    def scenario_of(self, raw: bytes) -> str:
        m = _MARKER.search(raw)
        if m is not None:
            name = m.group(1).decode()
            if name in SCENARIOS:
                return name
        return self.scenario


class _Handler(BaseHTTPRequestHandler):
    mock: ClassVar[MockModelServer]
    protocol_version = "HTTP/1.1"
    server_version = "MockModelServer/1"

    def log_message(self, format: str, *args: Any) -> None:
        # The request log is the record; stderr stays quiet.
        return

    # -- plumbing ------------------------------------------------------------------

    # What the request being answered is: (api, scenario, body bytes, stream).
    _about: tuple[str, str, int, bool] = ("unknown", "A", 0, False)

    def _record(self, answer: str, status: int) -> None:
        # Logged before the response goes out, so a client that has its answer sees it in the log.
        api, scenario, size, stream = self._about
        self.mock._log(
            RequestRecord(
                t=time.time(),
                method=self.command,
                path=self.path,
                api=api,
                scenario=scenario,
                answer=answer,
                status=status,
                body_bytes=size,
                stream=stream,
            )
        )

    def _send_json(self, status: int, obj: Any, *, answer: str, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj, separators=(",", ":")).encode()
        self._record(answer, status)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def _send_sse(self, chunks: list[bytes], *, answer: str) -> None:
        self._record(answer, 200)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True

    def _read_body(self) -> bytes | None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._send_json(413, {"error": {"message": "mock: request too large"}}, answer="too_large")
            return None
        return self.rfile.read(length) if length else b""

    # -- routes --------------------------------------------------------------------

    def do_HEAD(self) -> None:
        # Claude Code probes its base URL with HEAD / before the first request.
        self._about = ("probe", self.mock.scenario, 0, False)
        self._record("head", 200)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def do_GET(self) -> None:
        self._about = ("unknown", self.mock.scenario, 0, False)
        path = urlsplit(self.path).path
        self._send_json(404, {"error": {"message": f"mock: no route for GET {path}"}}, answer="not_found")

    def do_POST(self) -> None:
        raw = self._read_body()
        if raw is None:
            return
        path = urlsplit(self.path).path
        api = _api_of(path)
        scenario = self.mock.scenario_of(raw)
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        if api is None or not isinstance(body, dict):
            self._about = (api or "unknown", scenario, len(raw), False)
            self._send_json(404, {"error": {"message": f"mock: no route for POST {path}"}}, answer="not_found")
            return
        turn = _Turn(api, body, scenario)
        stream = _is_stream(api, path, body)
        self._about = (api, scenario, len(raw), stream)
        # Claude Code falls back to a non-streaming request after stream errors;
        # in Bevent that fallback fails too, so the error is what the CLI reports.
        if scenario == "B" or (scenario == "Bevent" and api == "messages" and not stream):
            self._send_json(500, _http_error(api), answer="http_500", headers=_RETRY_NOW if api == "chat" else None)
            return
        getattr(self, f"_{api}")(turn, path, stream)

    # -- OpenAI Responses (codex) --------------------------------------------------

    def _responses(self, turn: _Turn, path: str, stream: bool) -> None:
        rid = f"resp_mock_{self.mock._next_id()}"
        model = str(turn.body.get("model") or "mock-model")
        usage = {
            "input_tokens": USAGE[0],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": USAGE[1],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": USAGE[0] + USAGE[1],
        }
        base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model}
        created = _event("response.created", response={**base, "status": "in_progress", "output": []})
        if turn.scenario == "Bevent":
            error = {"code": "server_error", "message": STREAM_ERROR_MESSAGE}
            failed = _event("response.failed", response={**base, "status": "failed", "error": error})
            self._send_sse([created, failed], answer="stream_error")
            return
        middle: list[bytes] = []
        if _has_tool_result("responses", turn.body):
            text = final_text("codex")
            item: dict[str, Any] = {
                "type": "message",
                "id": f"msg_{rid}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
            added = {**item, "status": "in_progress", "content": []}
            middle.append(
                _event("response.output_text.delta", item_id=item["id"], output_index=0, content_index=0, delta=text)
            )
            answer = "final"
        else:
            item = {
                "type": "function_call",
                "id": f"fc_{rid}",
                "call_id": f"call_{rid}",
                "name": "exec_command",
                "arguments": json.dumps({"cmd": turn.command}),
                "status": "completed",
            }
            added = {**item, "arguments": "", "status": "in_progress"}
            answer = "tool_call"
        done = {**base, "status": "completed", "output": [item], "usage": usage}
        self._send_sse(
            [
                created,
                _event("response.output_item.added", output_index=0, item=added),
                *middle,
                _event("response.output_item.done", output_index=0, item=item),
                _event("response.completed", response=done),
            ],
            answer=answer,
        )
        return

    # -- Anthropic Messages (claude) -----------------------------------------------

    def _messages(self, turn: _Turn, path: str, stream: bool) -> None:
        mid = f"msg_mock_{self.mock._next_id()}"
        model = str(turn.body.get("model") or "claude-mock")
        if _has_tool_result("messages", turn.body):
            block: dict[str, Any] = {"type": "text", "text": final_text("claude")}
            start_block: dict[str, Any] = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
            stop_reason, answer = "end_turn", "final"
        else:
            tool_input = {"command": turn.command, "description": "Run the requested command"}
            block = {"type": "tool_use", "id": f"toolu_{mid}", "name": "Bash", "input": tool_input}
            start_block = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(tool_input)}
            stop_reason, answer = "tool_use", "tool_call"
        message: dict[str, Any] = {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [block],
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": USAGE[0], "output_tokens": USAGE[1]},
        }
        if not stream:
            self._send_json(200, message, answer=answer)
            return
        # The stream starts with a snapshot: no content, no stop reason, 1 output token so far.
        first_usage = {"input_tokens": USAGE[0], "output_tokens": 1}
        snapshot = {**message, "content": [], "stop_reason": None, "usage": first_usage}
        start = _event("message_start", message=snapshot)
        if turn.scenario == "Bevent":
            error = _event("error", error={"type": "api_error", "message": STREAM_ERROR_MESSAGE})
            self._send_sse([start, error], answer="stream_error")
            return
        self._send_sse(
            [
                start,
                _event("content_block_start", index=0, content_block=start_block),
                _event("content_block_delta", index=0, delta=delta),
                _event("content_block_stop", index=0),
                _event(
                    "message_delta",
                    delta={"stop_reason": stop_reason, "stop_sequence": None},
                    usage={"output_tokens": USAGE[1]},
                ),
                _event("message_stop"),
            ],
            answer=answer,
        )
        return

    # -- Gemini (gemini) -----------------------------------------------------------

    def _gemini(self, turn: _Turn, path: str, stream: bool) -> None:
        model = path.rsplit("/", 1)[-1].split(":", 1)[0]
        usage = {
            "promptTokenCount": USAGE[0],
            "candidatesTokenCount": USAGE[1],
            "totalTokenCount": USAGE[0] + USAGE[1],
        }
        if not stream:
            # The model-routing classifier (and any other structured side call):
            # the highest complexity score routes to the default flash model.
            text = json.dumps({"complexity_reasoning": "mock", "complexity_score": 10})
            self._send_json(200, _gemini_chunk([{"text": text}], usage, model), answer="route")
            return
        if turn.scenario == "Bevent":
            error = {"code": 500, "message": STREAM_ERROR_MESSAGE, "status": "INTERNAL"}
            self._send_sse([_sse(None, {"error": error})], answer="stream_error")
            return
        if _has_tool_result("gemini", turn.body):
            parts: list[dict[str, Any]] = [{"text": final_text("gemini")}]
            answer = "final"
        else:
            args = {"command": turn.command, "description": "Run the requested command"}
            parts = [{"functionCall": {"name": "run_shell_command", "args": args}}]
            answer = "tool_call"
        self._send_sse([_sse(None, _gemini_chunk(parts, usage, model))], answer=answer)
        return

    # -- OpenAI chat completions (opencode) ----------------------------------------

    def _chat(self, turn: _Turn, path: str, stream: bool) -> None:
        cid = f"chatcmpl-mock-{self.mock._next_id()}"
        model = str(turn.body.get("model") or "mock-model")
        created = int(time.time())
        usage = {"prompt_tokens": USAGE[0], "completion_tokens": USAGE[1], "total_tokens": USAGE[0] + USAGE[1]}
        head = {"id": cid, "created": created, "model": model}

        def chunk(delta: dict[str, Any] | None, finish: str | None = None, **extra: Any) -> bytes:
            choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
            return _sse(None, {**head, "object": "chat.completion.chunk", "choices": choices, **extra})

        if not turn.body.get("tools"):
            # A side request without tools (opencode's title): a short text.
            content: dict[str, Any] = {"content": "Mock title"}
            finish, answer = "stop", "title"
        elif turn.scenario == "Bevent":
            # opencode retries (2 s to 30 s apart, 5 times) any error whose text looks
            # transient ("500", "server_error" …); this one does not, so it fails at once.
            error = {"error": {"message": STREAM_ERROR_MESSAGE, "type": "mock_stream_error"}}
            self._send_sse([chunk({"role": "assistant", "content": ""}), _sse(None, error)], answer="stream_error")
            return
        elif _has_tool_result("chat", turn.body):
            content = {"content": final_text(_chat_cli(turn.body)[0])}
            finish, answer = "stop", "final"
        else:
            cli, shell = _chat_cli(turn.body)
            args = {"command": turn.command, "description": "Run the requested command"}
            args.update(_CHAT_SHELL_ARGS.get(cli, {}))
            function = {"name": shell, "arguments": json.dumps(args)}
            content = {"tool_calls": [{"index": 0, "id": f"call_{cid}", "type": "function", "function": function}]}
            finish, answer = "tool_calls", "tool_call"
        if not stream:
            message: dict[str, Any] = {"role": "assistant", "content": content.get("content")}
            if "tool_calls" in content:
                message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in content["tool_calls"]]
            choice = {"index": 0, "message": message, "finish_reason": finish}
            whole = {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
            self._send_json(200, whole, answer=answer)
            return
        self._send_sse(
            [
                chunk({"role": "assistant", "content": ""}),
                chunk(content),
                chunk({}, finish),
                chunk(None, usage=usage),
                _sse(None, "[DONE]"),
            ],
            answer=answer,
        )
        return


#: The chat-completions CLIs, told apart by their shell tool: (answer label, tool name).
_CHAT_SHELLS = (("qwen", "run_shell_command"), ("droid", "Execute"))
#: Arguments a CLI's shell tool requires besides the command (Droid's Execute asks for a summary and a risk).
_CHAT_SHELL_ARGS: dict[str, dict[str, str]] = {
    "droid": {"summary": "Run the requested command", "riskLevelReason": "It only prints text.", "riskLevel": "low"},
}


def _chat_cli(body: dict[str, Any]) -> tuple[str, str]:
    """Which CLI sent a chat request, by the shell tool it offers (opencode's ``bash`` by default)."""
    names = {
        t["function"].get("name")
        for t in body.get("tools") or ()
        if isinstance(t, dict) and isinstance(t.get("function"), dict)
    }
    for cli, tool in _CHAT_SHELLS:
        if tool in names:
            return cli, tool
    return "opencode", "bash"


#: opencode honours ``retry-after-ms`` on API errors: its silent retries of B
#: (6 attempts, up to 30 s apart) then take no time.
_RETRY_NOW = {"retry-after-ms": "0"}


def _gemini_chunk(parts: list[dict[str, Any]], usage: dict[str, int], model: str) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": usage,
        "modelVersion": model,
    }


def _api_of(path: str) -> str | None:
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/messages"):
        return "messages"
    if path.endswith(":generateContent") or path.endswith(":streamGenerateContent"):
        return "gemini"
    if path.endswith("/chat/completions"):
        return "chat"
    return None


def _is_stream(api: str, path: str, body: dict[str, Any]) -> bool:
    if api == "gemini":
        return path.endswith(":streamGenerateContent")
    return body.get("stream") is True


def _http_error(api: str) -> dict[str, Any]:
    if api == "messages":
        return {"type": "error", "error": {"type": "api_error", "message": HTTP_ERROR_MESSAGE}}
    if api == "gemini":
        return {"error": {"code": 500, "message": HTTP_ERROR_MESSAGE, "status": "INTERNAL"}}
    return {"error": {"message": HTTP_ERROR_MESSAGE, "type": "server_error", "code": "server_error"}}
