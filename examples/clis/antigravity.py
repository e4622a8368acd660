"""Antigravity under spoolparse: the command line, and what you read from the outcome.

    python examples/clis/antigravity.py "fix the failing test"

Antigravity reports thinking tokens apart; they are in `output_tokens` too.
"""

import sys

import spoolparse

prompt = " ".join(sys.argv[1:]) or "Say hello."
argv = ["agy", "-p", prompt, "--output-format", "stream-json"]

with spoolparse.run(argv, timeout=900) as r:
    if not r.ok:
        sys.exit(f"agy failed: {r.error}")
    print(r.text)
    print(f"model {r.model}, session {r.session_id}")
    print(f"{r.usage.get('input_tokens', 0)} tokens in, {r.usage.get('output_tokens', 0)} out")
