"""Hypothesis profiles: ``dev`` (quick, the default), ``default`` and ``ci`` (more examples, chosen when
``$CI`` is set).

Pick one explicitly with ``HYPOTHESIS_PROFILE=ci python -m pytest``. No
deadline in any of them: the machine is shared, and speed is measured by the
benchmarks, never by a test's wall clock.
"""

from __future__ import annotations

import os
import signal
import tempfile

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
