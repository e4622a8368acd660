"""Cost in every summary: the CLI's own figure, else an estimate from the bundled price data, else why not."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import spoolparse
from spoolparse import cost
from spoolparse.parser import StreamParser

from .helpers import FIXTURES, ROOT, jl

genai_prices = pytest.importorskip("genai_prices", reason="needs the cost extra: pip install 'spoolparse[cost]'")


def summary(data: bytes, provider: str = "auto") -> dict[str, Any]:
    sp = StreamParser(provider)
    sp.feed(data)
    return dict(sp.finish(args=None).summary())


def list_price(model: str, provider_id: str | None, **counts: int) -> float:
    """genai-prices' own figure for its ``Usage`` fields, as its docs spell them."""
    return float(genai_prices.calc_price(genai_prices.Usage(**counts), model, provider_id=provider_id).total_price)


def claude_stream(model: str, usage: dict[str, int], **extra: Any) -> bytes:
    return jl(
        {"type": "system", "subtype": "init", "session_id": "s", "model": model},
        {"type": "result", "subtype": "success", "is_error": False, "result": "done", "session_id": "s",
         "usage": usage, **extra},
    )


# -- where the figure comes from -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["claude/success.jsonl", "opencode/success.jsonl", "kilo/success.jsonl"])
def test_a_cost_the_cli_prints_is_reported_as_it_is(name: str) -> None:
    s = spoolparse.parse(FIXTURES / name).summary()
    assert s["cost_source"] == "reported" and s["cost_note"] is None
    assert s["cost_usd"] == s["usage"]["cost_usd"] and s["cost_usd"] > 0  # type: ignore[operator]


def test_claude_per_model_costs_are_the_clis_own() -> None:
    s = spoolparse.parse(FIXTURES / "claude/success.jsonl").summary()
    assert s["usage_by_model"]
    for per in s["usage_by_model"].values():
        assert per["cost_source"] == "reported" and isinstance(per["cost_usd"], float)


def test_a_reported_cost_wins_over_an_estimate_the_model_would_allow() -> None:
    usage = {"input_tokens": 1000, "output_tokens": 100}
    s = summary(claude_stream("claude-sonnet-4-5", usage, total_cost_usd=12.5))
    assert (s["cost_usd"], s["cost_source"]) == (12.5, "reported")
    s = summary(claude_stream("claude-sonnet-4-5", usage))
    assert s["cost_source"] == "estimated"
    assert s["cost_usd"] == pytest.approx(list_price("claude-sonnet-4-5", "anthropic", input_tokens=1000,
                                                     output_tokens=100))


#: Normalized usage (every prompt token in input_tokens, cache reads and writes parts of it) of one run.
COUNTS = [
    {"input_tokens": i, "cached_input_tokens": r, "cache_write_input_tokens": w, "output_tokens": o,
     "reasoning_output_tokens": t}
    for i, r, w, o, t in itertools.product((5_000, 120_000), (0, 1_000), (0, 700), (0, 300), (0, 200))
    if t <= o
]


@pytest.mark.parametrize("counts", COUNTS, ids=lambda c: "-".join(str(v) for v in c.values()))
@pytest.mark.parametrize(("cli", "model", "pid"), [
    ("claude", "claude-sonnet-4-5-20250929", "anthropic"),
    ("codex", "gpt-5", "openai"),
    ("gemini", "gemini-2.5-pro", "google"),
])
def test_normalized_usage_maps_onto_genai_prices_usage_one_to_one(
    counts: dict[str, int], cli: str, model: str, pid: str
) -> None:
    got = cost.estimate(cli, model, counts)
    assert got.source == "estimated" and got.note is None
    want = list_price(model, pid, input_tokens=counts["input_tokens"], cache_read_tokens=counts["cached_input_tokens"],
                      cache_write_tokens=counts["cache_write_input_tokens"], output_tokens=counts["output_tokens"],
                      output_reasoning_tokens=counts["reasoning_output_tokens"])
    assert got.usd == pytest.approx(want, rel=1e-12)
    if counts["cached_input_tokens"] or counts["cache_write_input_tokens"]:
        # input_tokens is the whole prompt: read as the uncached part only, the cache would be priced twice
        fresh = counts["input_tokens"] - counts["cached_input_tokens"] - counts["cache_write_input_tokens"]
        double = list_price(model, pid, input_tokens=counts["input_tokens"] + counts["cached_input_tokens"]
                            + counts["cache_write_input_tokens"], cache_read_tokens=counts["cached_input_tokens"],
                            cache_write_tokens=counts["cache_write_input_tokens"],
                            output_tokens=counts["output_tokens"])
        assert fresh >= 0 and got.usd != pytest.approx(double)


def test_claude_usage_is_priced_from_its_anthropic_counts() -> None:
    # Anthropic's input_tokens leaves out the cache: spoolparse adds it back, so the price counts each token once
    s = summary(claude_stream("claude-sonnet-4-5-20250929", {"input_tokens": 40, "cache_read_input_tokens": 4000,
                                                             "cache_creation_input_tokens": 600, "output_tokens": 90}))
    assert s["cost_source"] == "estimated"
    assert s["cost_usd"] == pytest.approx(list_price("claude-sonnet-4-5-20250929", "anthropic", input_tokens=4640,
                                                     cache_read_tokens=4000, cache_write_tokens=600,
                                                     output_tokens=90))


def test_gemini_models_are_priced_each_and_summed() -> None:
    s = spoolparse.parse(FIXTURES / "gemini/success.jsonl").summary()
    per = s["usage_by_model"]
    assert per and all(u["cost_source"] == "estimated" for u in per.values())
    assert s["cost_source"] == "estimated"
    assert s["cost_usd"] == pytest.approx(sum(u["cost_usd"] for u in per.values()))  # type: ignore[misc]


def test_one_model_without_a_price_leaves_the_runs_cost_unknown() -> None:
    per = {"gemini-2.5-pro": {"input_tokens": 1000, "output_tokens": 10},
           "no-such-model-7": {"input_tokens": 5, "output_tokens": 1}}
    run, by_model = cost.price("gemini", "auto", {"input_tokens": 1005, "output_tokens": 11}, per)
    assert run.usd is None and run.source is None and run.note is not None and "'no-such-model-7'" in run.note
    assert by_model is not None
    assert by_model["gemini-2.5-pro"]["cost_source"] == "estimated"
    assert by_model["no-such-model-7"]["cost_usd"] is None and by_model["no-such-model-7"]["cost_source"] is None
    assert per["gemini-2.5-pro"] == {"input_tokens": 1000, "output_tokens": 10}  # the provider's dicts untouched


@pytest.mark.parametrize(("provider", "model", "usage", "says"), [
    ("claude", "<synthetic>", {"input_tokens": 1, "output_tokens": 1}, "no price for model '<synthetic>'"),
    ("codex", None, {"input_tokens": 1, "output_tokens": 1}, "no model reported"),
    ("copilot", "gpt-5", {"output_tokens": 112}, "no input_tokens reported"),
    ("claude", "claude-sonnet-4-5", {"input_tokens": 10}, "no output_tokens reported"),
    ("cursor", "claude-4-sonnet", {}, "no usage reported"),
    ("claude", "claude-sonnet-4-5", {"input_tokens": 10, "cached_input_tokens": 50, "output_tokens": 1},
     "cannot exceed"),
])
def test_an_unknown_cost_says_why_in_one_line(
    provider: str, model: str | None, usage: dict[str, int], says: str
) -> None:
    run, _ = cost.price(provider, model, usage, None)
    assert run.usd is None and run.source is None
    assert run.note is not None and says in run.note and "\n" not in run.note


def test_every_fixture_summary_carries_a_cost_or_the_reason() -> None:
    names = sorted(p.relative_to(FIXTURES) for p in FIXTURES.glob("*/*.json*") if p.parent.name != "published")
    assert len(names) > 30
    for name in names:
        s = spoolparse.parse(FIXTURES / name).summary()
        assert list(s)[list(s).index("usage_by_model") + 1:][:3] == ["cost_usd", "cost_source", "cost_note"]
        assert (s["cost_usd"] is None) == (s["cost_source"] is None) == (s["cost_note"] is not None), name


def test_the_cli_provider_ids_are_price_data_providers() -> None:
    from genai_prices import data

    known = {p.id for p in data.providers}
    assert set(cost.PROVIDER_IDS.values()) <= known


def test_a_cli_provider_picks_between_lists_and_a_provider_prefix_is_read() -> None:
    # copilot's own price list is tried first; a model it does not list is looked up by its name alone
    assert cost._lookups("copilot", "gpt-5")[:1] == [("github-copilot", "gpt-5")]
    assert cost.estimate("copilot", "gpt-5", {"input_tokens": 100, "output_tokens": 10}).source == "estimated"
    prefixed = cost.estimate("opencode", "anthropic/claude-sonnet-4-5", {"input_tokens": 100, "output_tokens": 10})
    assert prefixed.usd == pytest.approx(list_price("claude-sonnet-4-5", "anthropic", input_tokens=100,
                                                    output_tokens=10))


# -- the extra, and the network ------------------------------------------------------------------------


def test_without_the_extra_reported_costs_stay_and_estimates_say_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cost, "_prices", cost._Prices())
    monkeypatch.setitem(sys.modules, "genai_prices", None)  # import genai_prices: ImportError
    est = summary(claude_stream("claude-sonnet-4-5", {"input_tokens": 10, "output_tokens": 1}))
    assert (est["cost_usd"], est["cost_source"], est["cost_note"]) == (None, None, cost.INSTALL_HINT)
    rep = spoolparse.parse(FIXTURES / "claude/success.jsonl").summary()
    assert rep["cost_source"] == "reported" and rep["cost_usd"] is not None
    assert cost.price_data_version() is None


def test_prices_fetched_by_another_library_are_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from genai_prices import data_snapshot

    before = cost.estimate("codex", "gpt-5", {"input_tokens": 1000, "output_tokens": 100}).usd
    fetched = data_snapshot.DataSnapshot(providers=[], from_auto_update=True)  # what UpdatePrices would install
    monkeypatch.setattr(data_snapshot, "_custom_snapshot", fetched)
    with pytest.raises(LookupError):
        genai_prices.calc_price(genai_prices.Usage(input_tokens=1), "gpt-5")  # genai-prices' own calls now see it
    assert cost.estimate("codex", "gpt-5", {"input_tokens": 1000, "output_tokens": 100}).usd == before


NO_NETWORK = textwrap.dedent("""
    import socket, sys
    tried = []
    def refuse(*a, **k):
        tried.append(a[:2])
        raise OSError("network refused by the test")
    socket.socket.connect = socket.socket.connect_ex = refuse
    socket.create_connection = socket.getaddrinfo = refuse
    import spoolparse
    from spoolparse import cost
    s = spoolparse.parse(sys.argv[1]).summary()
    print(s["cost_source"], s["cost_usd"], cost.price_data_version(), len(tried))
""")


def test_pricing_reaches_no_network() -> None:
    # a fresh interpreter: importing the price data happens under the guard too
    out = subprocess.run([sys.executable, "-c", NO_NETWORK, str(FIXTURES / "amp/success.jsonl")],
                         capture_output=True, text=True, check=True, cwd=ROOT, timeout=120)
    source, usd, version, tried = out.stdout.split()
    assert (source, tried) == ("estimated", "0"), out.stderr
    assert float(usd) > 0 and version == genai_prices.__version__


# -- live ---------------------------------------------------------------------------------------------


def test_the_progress_line_sums_tokens_and_cost_so_far() -> None:
    from spoolparse.progress import Spend

    spend = Spend()
    assert spend.text() == ""
    spend.add(spoolparse.parse(FIXTURES / "claude/success.jsonl").summary())  # reported
    spend.add(spoolparse.parse(FIXTURES / "amp/success.jsonl").summary())  # estimated
    spend.add(spoolparse.parse(FIXTURES / "qwen/success.jsonl").summary())  # no price
    spend.add(None)  # a task that never ran
    assert spend.tokens == 2588 + 112 + 2468 + 112 + 2468 + 112
    assert spend.reported == pytest.approx(0.01514) and spend.estimated > 0 and spend.unpriced == 1
    text = spend.text()
    assert text.startswith(" | 7.9k tokens | $0.0") and " est.)" in text and text.endswith(" +1 unpriced")


def test_batch_progress_shows_tokens_and_cost_beside_the_counts(tmp_path: Path) -> None:
    tasks = tmp_path / "t.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "cmd": ["cat", str(FIXTURES / name)]}) + "\n"
                             for i, name in enumerate(["claude/success.jsonl", "amp/success.jsonl"])))
    p = subprocess.run([sys.executable, "-m", "spoolparse", "batch", str(tasks), "-j", "1", "--progress"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert re.search(r"done 2/2 \| running 0 \| queued 0 \| failed 0 \| memory [\d.]+/[\d.]+ GiB \| 5\.3k tokens "
                     r"\| \$0\.0\d \(\$0\.0\d est\.\)", p.stderr), p.stderr
