"""Hypothesis profiles: ``dev`` (quick, the default), ``default`` and ``ci`` (more examples, chosen when
``$CI`` is set).

Pick one explicitly with ``HYPOTHESIS_PROFILE=ci python -m pytest``. No
deadline in any of them: the machine is shared, and speed is measured by the
benchmarks, never by a test's wall clock.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Batches read the estimates `spoolparse calibrate` recorded: the tests use a record of their own (empty until
# a test writes one), never the user's, and never write to it.
os.environ["SPOOLPARSE_CALIBRATIONS"] = os.path.join(tempfile.mkdtemp(prefix="spoolparse-tests-"), "calibrations.json")

# A shell without job control starts a background command with SIGINT ignored, and Python then installs no
# KeyboardInterrupt handler: the tests that interrupt a run with SIGINT would wait out their agents instead.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    "print_blob": True,
}
settings.register_profile("dev", max_examples=20, **_COMMON)  # type: ignore[arg-type]
settings.register_profile("default", max_examples=100, **_COMMON)  # type: ignore[arg-type]
settings.register_profile("ci", max_examples=300, **_COMMON)  # type: ignore[arg-type]
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


# -- another local user, for the tests of what she can make a root spoolparse do ---------------------------------


@pytest.fixture
def other_user() -> Iterator[tuple[int, int]]:
    """A second user, made for the test and removed after it: (uid, gid)."""
    import pwd

    if os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("userdel") is None:
        pytest.skip("needs root and useradd/userdel (passwd) to make a second user")
    name = f"spx{os.getpid() % 100000}"
    made = subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/false", name], capture_output=True,
                          check=False)
    if made.returncode != 0:
        pytest.skip(f"needs useradd to make a second user here ({made.stderr.decode().strip()})")
    try:
        pw = pwd.getpwnam(name)
        yield pw.pw_uid, pw.pw_gid
    finally:
        subprocess.run(["userdel", name], capture_output=True, check=False)


@pytest.fixture
def shared_base() -> Iterator[Path]:
    """A directory under the system temp dir that another user can reach (a test's tmp_path is root's alone)."""
    base = Path(tempfile.mkdtemp(prefix="spoolparse-attack-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)
