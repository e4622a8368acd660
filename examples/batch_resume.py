"""Run a batch with a job log, then resume it: the tasks already done are not run again.

    python examples/batch_resume.py [JOBLOG]

The agent is the bundled fake Codex (fixtures/fake_codex.py); put your CLI's command line in its place.
"""

import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import spoolparse

FAKE_CODEX = Path(__file__).resolve().parent.parent / "fixtures" / "fake_codex.py"
joblog = sys.argv[1] if len(sys.argv) > 1 else str(Path(tempfile.mkdtemp()) / "jobs.ndjson")


def tasks(count: int) -> Iterator[spoolparse.Task]:
    for n in range(count):
        argv = [sys.executable, str(FAKE_CODEX), "--size", "64K"]
        yield spoolparse.Task(id=f"issue-{n}", argv=argv, timeout=600)


# The first run is cut short: two of the four tasks reach the job log.
for outcome in spoolparse.run_many(tasks(2), max_concurrent=2, joblog=joblog):
    print("first run:", outcome.id, outcome.verdict)

# --resume skips every id with a final line in the job log, and runs the rest.
for outcome in spoolparse.run_many(tasks(4), max_concurrent=2, joblog=joblog, resume=True):
    print("resumed:  ", outcome.id, outcome.verdict)
