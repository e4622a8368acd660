"""Fixtures for the real-CLI conformance tests: install the pinned CLIs, run them offline in parallel."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.realcli import clis, harness

#: Parallel CLI runs (each is one node/native process tree waiting on the mock most of the time).
JOBS = int(os.environ.get("SPOOLPARSE_REALCLI_JOBS", "4"))
#: ``spoolparse run --timeout`` for each CLI run.
RUN_TIMEOUT = float(os.environ.get("SPOOLPARSE_REALCLI_TIMEOUT", "180"))
#: Scenarios started first: they wait out the CLIs' retries.
_SLOW_FIRST = {"B": 0, "Bevent": 1, "Abig": 2, "A": 3}

_timings: list[tuple[str, float]] = []
_module_wall: list[float] = []


@pytest.fixture(scope="session")
def real_clis() -> dict[str, Path | str]:
    """Each pinned CLI's executable (installed into the cache on first use), or why it cannot run here."""
    problem = clis.npm_problem()
    if problem is not None:
        pytest.skip(f"real agent CLIs unavailable: {problem}; needs Node >= 20 and npm (apt-get install nodejs npm)")
    exes: dict[str, Path | str] = {}
    for name, cli in clis.versions().items():
        node = clis.node_problem(cli) if cli.min_node else None
        if node is not None:
            exes[name] = node
            continue
        try:
            exes[name] = clis.install(cli)
        except clis.CliInstallError as e:
            pytest.fail(f"cannot install {cli.spec}: {e}", pytrace=False)
    return exes


class OfflineRuns:
    """Every (cli, scenario) the selected tests need, run concurrently and awaited by each test."""

    def __init__(self, exes: dict[str, Path | str], root: Path, wanted: list[tuple[str, str, dict[str, Any]]]) -> None:
        self.exes = exes
        self.root = root
        self.pool = ThreadPoolExecutor(max_workers=JOBS, thread_name_prefix="realcli")
        self.futures: dict[tuple[str, str, tuple[tuple[str, Any], ...]], Future[harness.OfflineRun]] = {}
        self.started = time.monotonic()
        for cli, scenario, options in sorted(wanted, key=lambda k: (_SLOW_FIRST.get(k[1], 9), k[0])):
            if isinstance(exes.get(cli), Path):
                self.submit(cli, scenario, **options)

    def submit(self, cli: str, scenario: str, **options: Any) -> Future[harness.OfflineRun]:
        """Start ``cli`` in ``scenario`` (options: those of :func:`harness.run_offline`) unless already started."""
        key = (cli, scenario, tuple(sorted(options.items())))
        if key not in self.futures:
            self.futures[key] = self.pool.submit(self._run, cli, scenario, options)
        return self.futures[key]

    def _run(self, cli: str, scenario: str, options: dict[str, Any]) -> harness.OfflineRun:
        tags = [f"{k}={v}" for k, v in sorted(options.items()) if k not in ("extra_args", "timeout")]
        tags += [a.lstrip("-") for a in options.get("extra_args", ())]
        name = "+".join([f"{cli}-{scenario}", *tags])
        scratch = self.root / name
        scratch.mkdir()
        exe = self.exes[cli]
        assert isinstance(exe, Path)
        run = harness.run_offline(cli, scenario, exe=exe, root=scratch, **{"timeout": RUN_TIMEOUT, **options})
        _timings.append((name, run.wall_s))
        return run

    def get(self, cli: str, scenario: str, **options: Any) -> harness.OfflineRun:
        """The run's outcome, waiting for it; skips the test when ``cli`` cannot run here."""
        exe = self.exes.get(cli)
        if not isinstance(exe, Path):
            pytest.skip(f"{cli} unavailable: {exe}; needs a newer Node (each CLI's minimum: tests/realcli/clis.py)")
        return self.submit(cli, scenario, **options).result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        if self.futures:
            _module_wall.append(time.monotonic() - self.started)


@pytest.fixture(scope="module")
def offline_runs(
    real_clis: dict[str, Path | str], tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[OfflineRuns]:
    # Start every run the selected tests of this module will ask for (parameters cli,
    # scenario and optionally options), so they overlap instead of running one by one.
    wanted = []
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.module is request.module and "cli" in params and "scenario" in params:
            wanted.append((params["cli"], params["scenario"], dict(params.get("options", {}))))
    runs = OfflineRuns(real_clis, tmp_path_factory.mktemp("realcli"), wanted)
    yield runs
    runs.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _timings:
        return
    isolation = "loopback-only network namespace" if harness.network_isolation() else "host loopback"
    versions = ", ".join(c.spec for c in clis.versions().values())
    terminalreporter.write_sep("-", "real agent CLIs")
    terminalreporter.write_line(f"versions: {versions}; {isolation}; {JOBS} parallel runs")
    for name, wall in sorted(_timings, key=lambda t: -t[1]):
        terminalreporter.write_line(f"  {name:<36} {wall:7.2f} s")
    total = sum(w for _, w in _timings)
    wall = sum(_module_wall)
    terminalreporter.write_line(f"{len(_timings)} runs: {total:.1f} s of run time, {wall:.1f} s wall clock")
