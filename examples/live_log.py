"""A live one-line-per-tool log of agent runs, from recorded transcripts (checked by mypy --strict)."""

import sys
from pathlib import Path

import spoolparse

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TRANSCRIPTS = [FIXTURES / "codex/realcli_A.jsonl", FIXTURES / "claude/realcli_A_partial.jsonl",
               FIXTURES / "gemini/realcli_A.jsonl"]


def log(ev: spoolparse.LiveEvent) -> None:
    d = ev.as_dict()
    if d["kind"] == "tool_start":
        print(f"  #{d['seq']:<3} ▶ {d['name']}: {d['title']}")
    elif d["kind"] == "tool_end":
        status = "ok" if d["ok"] else "failed" if d["ok"] is False else "?"
        print(f"  #{d['seq']:<3} ■ {d['name']}: {status}, exit {d['exit_code']}, {d['bytes']} bytes")
    elif d["kind"] == "text_delta":
        print(f"  #{d['seq']:<3} … {d['text']!r}")
    elif d["kind"] == "retry":
        print(f"  #{d['seq']:<3} ↻ {d['message']} ({d['attempt']}/{d['max_attempts']})")
    elif d["kind"] == "usage":
        print(f"  #{d['seq']:<3} Σ {d['usage'].get('input_tokens', 0)} in, {d['usage'].get('output_tokens', 0)} out")


for path in sys.argv[1:] or TRANSCRIPTS:
    result = spoolparse.parse(path, on_event=log)
    summary: spoolparse.Summary = result.summary()
    print(f"{summary['provider']}: ok={summary['ok']} text={summary['text']!r}")
