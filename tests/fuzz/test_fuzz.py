"""The CI part of the fuzz harness: a short hypothesis-driven budget, the seeds, and every saved crash.

The long run is ``python tests/fuzz/fuzz_parser.py --minutes N`` (atheris when
installed); this budget runs with the test suite and needs no atheris. Its
size follows the hypothesis profile (``tests/conftest.py``): ``FUZZ_FACTOR``
times the profile's ``max_examples`` raw-byte inputs, plus as many structured
streams as the profile gives.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from . import harness
from .fuzz_parser import SEEDS, seed_inputs

REGRESSIONS = Path(__file__).resolve().parent / "regressions"
FUZZ_FACTOR = 10  # raw bytes are cheap (about 2 ms an input); structured streams cost about 25 times that
_NAMES = [*harness.provider_names(), "auto"]


@settings(max_examples=FUZZ_FACTOR * settings().max_examples)
@given(blob=st.binary(max_size=4096))
def test_fuzz_budget_raw_bytes(blob: bytes) -> None:
    harness.fuzz_one(blob)


@given(header=st.binary(min_size=2, max_size=2), stream=harness.streams(oversize=True))
def test_fuzz_budget_structured_streams(header: bytes, stream: bytes) -> None:
    harness.fuzz_one(header + stream)


def test_seed_corpus_keeps_every_invariant() -> None:
    seeds = seed_inputs(len(_NAMES))
    assert len(seeds) >= 2 * len(_NAMES) * 4 and len(list(SEEDS.glob("*.jsonl"))) >= 4
    for blob in seeds:
        harness.fuzz_one(blob)


@pytest.mark.parametrize("path", sorted(REGRESSIONS.glob("*")), ids=lambda p: p.name)
def test_saved_crash_stays_fixed(path: Path) -> None:
    blob = path.read_bytes()
    for first in (*range(len(_NAMES)), *range(0x80, 0x80 + 2 * len(_NAMES))):  # every provider, both ceilings
        harness.fuzz_one(bytes([first]) + blob[1:])
