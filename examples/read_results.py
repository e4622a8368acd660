"""Keep the transcripts of the tasks that fail, then read one back.

    python examples/read_results.py [RESULTS_DIR]

One task succeeds, one fails. `results=` keeps the failed task's stdout and stderr as
RESULTS_DIR/<id>/stdout and RESULTS_DIR/<id>/stderr (`spoolparse batch --results DIR`).
"""

import sys
import tempfile
from pathlib import Path

import spoolparse

FAKE_CODEX = Path(__file__).resolve().parent.parent / "fixtures" / "fake_codex.py"
results = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp())

tasks = [
    spoolparse.Task(id="good", argv=[sys.executable, str(FAKE_CODEX), "--size", "64K"]),
    spoolparse.Task(id="bad", argv=[sys.executable, str(FAKE_CODEX), "--size", "64K", "--fail", "rate limited"]),
]

for outcome in spoolparse.run_many(tasks, results=results):
    print(outcome.id, outcome.verdict, outcome.error)

# The failed task's transcript is a plain file: parse it again, or read it with any tool.
kept = spoolparse.parse(results / "bad" / "stdout")
print("kept transcript:", kept.lines, "lines, error:", kept.error)
print("ok tasks keep nothing:", not (results / "good").exists())
