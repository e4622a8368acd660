"""Droid under spoolparse: the command line, and what you read from the outcome.

    python examples/clis/droid.py "fix the failing test"

Droid counts tokens as Anthropic does; cached ones are in `input_tokens` too.
"""

import sys

import spoolparse

prompt = " ".join(sys.argv[1:]) or "Say hello."
argv = ["droid", "exec", "--output-format", "stream-json", "--auto", "high", prompt]

with spoolparse.run(argv, timeout=900) as r:
    if not r.ok:
        sys.exit(f"droid failed: {r.error}")
    print(r.text)
    print(f"model {r.model}, session {r.session_id}")
    print(f"{r.usage.get('input_tokens', 0)} tokens in, {r.usage.get('output_tokens', 0)} out")
