"""Kilo under spoolparse: the command line, and what you read from the outcome.

    python examples/clis/kilo.py "fix the failing test"

Kilo prints opencode's stream: name the provider, or it reads as `opencode`.
"""

import sys

import spoolparse

prompt = " ".join(sys.argv[1:]) or "Say hello."
argv = ["kilo", "run", "--format", "json", "--auto", prompt]

with spoolparse.run(argv, timeout=900, provider="kilo") as r:
    if not r.ok:
        sys.exit(f"kilo failed: {r.error}")
    print(r.text)
    print(f"read as {r.summary()['provider']}, session {r.session_id}")
    print(f"{r.usage.get('input_tokens', 0)} tokens in, {r.usage.get('output_tokens', 0)} out")
