"""Kimi Code under spoolparse: the command line, and what you read from the outcome.

    python examples/clis/kimi.py "fix the failing test"

Kimi prints no usage, model or session: the answer is what you get.
"""

import sys

import spoolparse

prompt = " ".join(sys.argv[1:]) or "Say hello."
argv = ["kimi", "--print", "-p", prompt, "--output-format", "stream-json"]

with spoolparse.run(argv, timeout=900) as r:
    if not r.ok:
        sys.exit(f"kimi failed: {r.error}")
    print(r.text)
