"""GitHub Copilot CLI under spoolparse: the command line, and what you read from the outcome.

    python examples/clis/copilot.py "fix the failing test"

Copilot prints output tokens only (no prompt tokens).
"""

import sys

import spoolparse

prompt = " ".join(sys.argv[1:]) or "Say hello."
argv = ["copilot", "-p", prompt, "--output-format", "json", "--allow-all-tools"]

with spoolparse.run(argv, timeout=900) as r:
    if not r.ok:
        sys.exit(f"copilot failed: {r.error}")
    print(r.text)
    print(f"model {r.model}, session {r.session_id}")
    print(f"{r.usage.get('output_tokens', 0)} tokens out")
