"""Gemini CLI under spoolparse: the command line, and what you read from the outcome.

    python examples/clis/gemini.py "fix the failing test"

Gemini's model is `auto` unless you pass `-m`; its usage includes the routing call.
"""

import sys

import spoolparse

prompt = " ".join(sys.argv[1:]) or "Say hello."
argv = ["gemini", "-p", prompt, "-o", "stream-json", "--yolo"]

with spoolparse.run(argv, timeout=900) as r:
    if not r.ok:
        sys.exit(f"gemini failed: {r.error}")
    print(r.text)
    print(f"model {r.model}, session {r.session_id}")
    print(f"{r.usage.get('input_tokens', 0)} tokens in, {r.usage.get('output_tokens', 0)} out")
