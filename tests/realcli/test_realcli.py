"""Conformance: the real codex, claude, gemini, opencode, Qwen Code, Kilo and Droid, run offline against the mock
model server through ``spoolparse run``; the summary must say exactly what the mock told each CLI."""

from __future__ import annotations

import re

import pytest

from tests.realcli import harness, mockserver
from tests.realcli.mockserver import BIG_BYTES, USAGE, final_text

pytestmark = pytest.mark.realcli

CLIS = harness.CLIS

#: Kilo prints opencode's stream unchanged (auto-detection names the family it assumed, ``opencode``) and
#: offers the mock opencode's tools (so the mock answers as it answers opencode).
FAMILY = {"kilo": "opencode"}


def family(cli: str) -> str:
    return FAMILY.get(cli, cli)


#: Model responses each CLI folds into the usage it prints for scenario A:
#: codex and claude sum the turn's two requests, gemini adds its routing call,
#: opencode prints each step and spoolparse sums the two steps.
RESPONSES_COUNTED = {"codex": 2, "claude": 2, "gemini": 3, "opencode": 2, "qwen": 2, "kilo": 2, "droid": 2}

#: What the mock answered, in order, for a successful turn. opencode's title
#: request runs beside the turn (it may come at any point, or not at all when
#: the turn ends first), so it is left out of the comparison.
EXPECTED_REQUESTS = {
    "codex": ["tool_call", "final"],
    "claude": ["head", "tool_call", "final"],
    "gemini": ["route", "tool_call", "final"],
    "opencode": ["tool_call", "final"],
    "qwen": ["tool_call", "final"],
    "kilo": ["tool_call", "final"],
    "droid": ["tool_call", "final"],
}
UNORDERED = {"title"}

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-{v}[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
SESSION_ID = {
    "codex": re.compile(_UUID.replace("{v}", "7")),  # UUIDv7 thread id
    "claude": re.compile(_UUID.replace("{v}", "4")),
    "gemini": re.compile(_UUID.replace("{v}", "[1-8]")),
    "opencode": re.compile(r"ses_[0-9A-Za-z]{20,}"),
    "qwen": re.compile(_UUID.replace("{v}", "4")),
    "kilo": re.compile(r"ses_[0-9A-Za-z]{20,}"),
    "droid": re.compile(_UUID.replace("{v}", "4")),
}

#: The smallest stdout a CLI writes for Abig: codex inlines 1 MiB of the output,
#: gemini all 2,000,000 bytes; claude and opencode persist it and inline a 30 KB
#: preview (opencode adds a tail whose size depends on how the output was chunked:
#: 17 KB to 51 KB were seen).
ABIG_MIN_STDOUT = {"codex": 1_000_000, "claude": 30_000, "gemini": BIG_BYTES, "opencode": 30_000, "qwen": 30_000,
                   "kilo": 30_000, "droid": 3_000}  # droid keeps the output aside and shows a few lines

#: The child's exit code in the failure scenarios (gemini exits 0 on a stream error).
FAILURE_RETURNCODE = {
    ("codex", "B"): 1,
    ("codex", "Bevent"): 1,
    ("claude", "B"): 1,
    ("claude", "Bevent"): 1,
    ("gemini", "B"): 244,
    ("gemini", "Bevent"): 0,
    ("opencode", "B"): 1,
    ("opencode", "Bevent"): 1,
    ("qwen", "B"): 1,
    ("qwen", "Bevent"): 1,
    ("kilo", "B"): 1,
    ("kilo", "Bevent"): 1,
}

#: What the reported error must contain: the mock's message where the CLI passes it on.
FAILURE_MESSAGE = {
    ("codex", "B"): "We\u2019re currently experiencing high demand",  # codex replaces the mock's text
    ("codex", "Bevent"): f"stream disconnected before completion: {mockserver.STREAM_ERROR_MESSAGE}",
    ("claude", "B"): mockserver.HTTP_ERROR_MESSAGE,
    ("claude", "Bevent"): mockserver.HTTP_ERROR_MESSAGE,  # its non-streaming fallback got the 500
    ("gemini", "B"): mockserver.HTTP_ERROR_MESSAGE,
    ("gemini", "Bevent"): "Model stream ended without a finish reason.",
    ("opencode", "B"): mockserver.HTTP_ERROR_MESSAGE,
    ("opencode", "Bevent"): mockserver.STREAM_ERROR_MESSAGE,
    ("qwen", "B"): mockserver.HTTP_ERROR_MESSAGE,
    ("qwen", "Bevent"): mockserver.STREAM_ERROR_MESSAGE,
    ("kilo", "B"): mockserver.HTTP_ERROR_MESSAGE,
    ("kilo", "Bevent"): mockserver.STREAM_ERROR_MESSAGE,
}

CODEX_METADATA_WARNING = "Model metadata for `mock-model` not found"

#: The terminal event each CLI's verdict waits for (the README's table of what ``ok`` means).
TERMINAL = {
    "codex": "turn.completed",
    "claude": "result",
    "gemini": "result",
    "opencode": "step_finish",
    "qwen": "result",
    "kilo": "step_finish",
    "droid": "completion",
}

#: stdout lines of a successful turn (every one a complete JSON object).
LINES = {"codex": 7, "claude": 5, "gemini": 6, "opencode": 6, "qwen": 6, "kilo": 6, "droid": 6}


def _context(run: harness.OfflineRun) -> str:
    summary = dict(run.summary or {})
    tail = summary.pop("stderr_tail", "")
    return (
        f"{run.cli}-{run.scenario}: exit {run.exit_status}, summary {summary}, "
        f"mock answers {run.answers()}, stderr tail {tail[-1500:]!r}, wrapper stderr {run.stderr[-1500:]!r}"
    )


def _summary(run: harness.OfflineRun) -> dict[str, object]:
    assert run.summary is not None, _context(run)
    if harness.network_isolation():
        assert run.isolated, "runs must use the loopback-only namespace where one can be made"
    return run.summary


@pytest.mark.parametrize("scenario", ["A", "Abig"])
@pytest.mark.parametrize("cli", CLIS)
def test_tool_call_then_answer(offline_runs, cli: str, scenario: str) -> None:
    run = offline_runs.get(cli, scenario)
    s = _summary(run)
    why = _context(run)
    assert s["provider"] == family(cli), why
    assert s["ok"] is True and s["error"] is None, why
    assert s["returncode"] == 0 and run.exit_status == 0, why
    assert s["timed_out"] is False and s["spool_full"] is False, why
    assert s["text"] == final_text(family(cli)), why
    n = RESPONSES_COUNTED[cli]
    usage = s["usage"]
    assert isinstance(usage, dict), why
    assert (usage.get("input_tokens"), usage.get("output_tokens")) == (n * USAGE[0], n * USAGE[1]), why
    assert isinstance(s["session_id"], str) and SESSION_ID[cli].fullmatch(s["session_id"]), why
    assert s["dropped"] == [] and s["dropped_count"] == 0 and s["invalid_lines"] == 0, why
    assert s["lines"] == LINES[cli], why
    by_model = s["usage_by_model"]
    if cli in ("claude", "gemini"):  # per-model usage, summing to the totals
        assert isinstance(by_model, dict) and by_model, why
        for key in ("input_tokens", "output_tokens"):
            assert sum(u[key] for u in by_model.values()) == usage[key], why
    else:
        assert by_model is None, why
    assert run.stderr == "", why
    assert [a for a in run.answers() if a not in UNORDERED] == EXPECTED_REQUESTS[cli], why
    if scenario == "Abig":
        stdout_bytes = s["stdout_bytes"]
        assert isinstance(stdout_bytes, int) and stdout_bytes > ABIG_MIN_STDOUT[cli], why
    if cli == "codex":
        warnings = s["warnings"]
        assert isinstance(warnings, list) and any(CODEX_METADATA_WARNING in w for w in warnings), why


#: Droid has no setting that ends its retries: it retries a failing model for minutes (0, 5, 19, 53, 85, 120 s
#: … apart), so its failures are checked as runs that spoolparse's timeout ends (below).
RETRIES_ON = ("droid",)


@pytest.mark.parametrize("scenario", ["B", "Bevent"])
@pytest.mark.parametrize("cli", [c for c in CLIS if c not in RETRIES_ON])
def test_model_failure_is_reported(offline_runs, cli: str, scenario: str) -> None:
    run = offline_runs.get(cli, scenario)
    s = _summary(run)
    why = _context(run)
    assert s["provider"] == family(cli), why
    assert s["ok"] is False, why
    assert s["timed_out"] is False, why
    assert s["returncode"] == FAILURE_RETURNCODE[(cli, scenario)], why
    # a run that is not ok exits 1 whatever the CLI's own code (that stays in the summary's returncode)
    assert run.exit_status == 1, why
    assert s["text"] != final_text(family(cli)), why
    error = s["error"]
    assert isinstance(error, str) and FAILURE_MESSAGE[(cli, scenario)] in error, why
    assert f"stream ended before {TERMINAL[cli]}" not in error, why  # each failure is a finished run
    assert isinstance(s["session_id"], str) and SESSION_ID[cli].fullmatch(s["session_id"]), why
    assert s["dropped_count"] == 0 and s["invalid_lines"] == 0, why
    assert "final" not in run.answers(), why
    assert run.stderr == "", why
    if cli == "codex":
        warnings = s["warnings"]
        assert isinstance(warnings, list) and any(CODEX_METADATA_WARNING in w for w in warnings), why


@pytest.mark.parametrize(
    ("cli", "scenario", "options"),
    [("claude", "A", {"extra_args": ("--include-partial-messages",)})],
    ids=["claude-A-partial-messages"],
)
def test_claude_partial_messages(offline_runs, cli: str, scenario: str, options: dict[str, object]) -> None:
    """With ``--include-partial-messages`` claude interleaves raw stream events and writes each
    ``assistant`` line before its usage is final; the answer and usage must not change."""
    run = offline_runs.get(cli, scenario, **options)
    s = _summary(run)
    why = _context(run)
    assert s["provider"] == "claude" and s["ok"] is True and s["error"] is None, why
    assert s["text"] == final_text("claude"), why
    usage = s["usage"]
    assert isinstance(usage, dict), why
    assert (usage.get("input_tokens"), usage.get("output_tokens")) == (2 * USAGE[0], 2 * USAGE[1]), why
    assert isinstance(s["lines"], int) and s["lines"] > LINES["claude"], why
    assert s["dropped_count"] == 0 and s["invalid_lines"] == 0, why


#: spoolparse's timeout for the runs below, far shorter than the CLIs' default retry schedules.
RETRY_TIMEOUT = 12.0


@pytest.mark.parametrize("options", [{"cut_retries": False, "timeout": RETRY_TIMEOUT}], ids=["default-retries"])
@pytest.mark.parametrize(
    ("cli", "scenario"),
    [("codex", "B"), ("claude", "B"), ("gemini", "B"), *((c, s) for c in RETRIES_ON for s in ("B", "Bevent"))],
)
def test_default_retries_are_cut_by_the_timeout(
    offline_runs, cli: str, scenario: str, options: dict[str, object]
) -> None:
    """With their default retry policies these CLIs keep retrying a 500 for minutes; spoolparse's
    timeout ends the process group and the summary says so, with what was seen until then."""
    run = offline_runs.get(cli, scenario, **options)
    s = _summary(run)
    why = _context(run)
    assert s["provider"] == family(cli), why
    assert s["timed_out"] is True and s["ok"] is False and run.exit_status == 124, why
    # the verdict names both reasons: the timeout, and the terminal event that never came
    error = s["error"]
    assert isinstance(error, str) and error.startswith(f"timed out after {RETRY_TIMEOUT:g} s"), why
    assert f"stream ended before {TERMINAL[cli]}" in error, why
    assert s["text"] is None, why
    assert isinstance(s["session_id"], str) and SESSION_ID[cli].fullmatch(s["session_id"]), why
    failures = run.answers().count("http_500" if scenario == "B" else "stream_error")
    if cli == "gemini":
        # gemini's first backoff is seconds long and its start-up slow on a loaded host: one 500 and its
        # "Retrying with backoff" on stderr show the retry policy at work as surely as a second request
        tail = s.get("stderr_tail")
        assert failures >= 2 or (failures == 1 and isinstance(tail, str) and "Retrying with backoff" in tail), why
    else:
        assert failures >= 2, why
    warnings = s["warnings"]
    assert isinstance(warnings, list), why
    if cli == "claude":
        # Each retry is a system/api_retry line.
        assert any("retry" in w.lower() for w in warnings), why
