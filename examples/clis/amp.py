"""Amp under spoolparse: the command line, and what you read from the outcome.

    python examples/clis/amp.py "fix the failing test"

Amp's session is its thread id (`T-…`).
"""

import sys

import spoolparse

prompt = " ".join(sys.argv[1:]) or "Say hello."
argv = ["amp", "--execute", prompt, "--stream-json", "--dangerously-allow-all"]

with spoolparse.run(argv, timeout=900) as r:
    if not r.ok:
        sys.exit(f"amp failed: {r.error}")
    print(r.text)
    print(f"model {r.model}, thread {r.session_id}")
    print(f"{r.usage.get('input_tokens', 0)} tokens in, {r.usage.get('output_tokens', 0)} out")
