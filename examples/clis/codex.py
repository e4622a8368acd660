"""Codex under spoolparse: the command line, and what you read from the outcome.

    python examples/clis/codex.py "fix the failing test"

Codex prints no model; its usage is summed over the turn's model requests.
"""

import sys

import spoolparse

prompt = " ".join(sys.argv[1:]) or "Say hello."
argv = ["codex", "exec", "--json", prompt]

with spoolparse.run(argv, timeout=900) as r:
    if not r.ok:
        sys.exit(f"codex failed: {r.error}")
    print(r.text)
    print(f"session {r.session_id}")
    print(f"{r.usage.get('input_tokens', 0)} tokens in, {r.usage.get('output_tokens', 0)} out")
