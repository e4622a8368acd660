"""What a run cost, and how that is known: the CLI's own figure, else an estimate from bundled price data.

:func:`price` is called once per result, where its summary is finished
(:meth:`spoolparse.StreamParser.finish`), and by ``spoolparse report`` for an
outcome written before summaries carried a cost. Its answer is ``cost_usd``,
``cost_source`` and ``cost_note``:

* ``"reported"`` — the CLI printed the cost itself (Claude Code's
  ``total_cost_usd`` and per-model ``costUSD``, opencode's and Kilo's summed
  ``cost``; any provider whose normalized usage carries ``cost_usd``).
* ``"estimated"`` — the normalized token counts priced with the price data
  the installed ``genai-prices`` package ships (the ``spoolparse[cost]``
  extra). Its live updates are never started: nothing here reaches the network.
* ``None`` — ``cost_note`` says why in one line: no token counts, no model, a
  model the price data does not know, or the extra is not installed.

genai-prices counts input the way spoolparse normalizes it: ``input_tokens``
is every prompt token, and the cache reads and writes are parts of it, so the
counts map one to one (:data:`USAGE_KEYS`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, get_args

from .types import CostSource

__all__ = [
    "Cost",
    "CostSource",
    "COST_SOURCES",
    "INSTALL_HINT",
    "USAGE_KEYS",
    "PROVIDER_IDS",
    "price",
    "estimate",
    "reported",
    "preload",
    "loaded",
    "price_data_version",
]

#: Where a cost comes from (:data:`spoolparse.types.CostSource`).
COST_SOURCES: tuple[CostSource, ...] = get_args(CostSource)

#: The note of an estimate that could not be made because the price data is not installed.
INSTALL_HINT = "cost not estimated: the price data is not installed (pip install 'spoolparse[cost]')"

#: spoolparse's normalized usage key → genai-prices' ``Usage`` field. Both count ``input_tokens`` as every
#: prompt token with the cache reads and writes inside it, and ``output_tokens`` with the reasoning inside it.
USAGE_KEYS: dict[str, str] = {
    "input_tokens": "input_tokens",
    "cached_input_tokens": "cache_read_tokens",
    "cache_write_input_tokens": "cache_write_tokens",
    "output_tokens": "output_tokens",
    "reasoning_output_tokens": "output_reasoning_tokens",
}

#: The price-data provider a CLI's models are billed by, tried first where a model's name alone could match
#: another provider's entry (GitHub Copilot's and Cursor's own price lists; the Gemini CLIs' models at Google).
#: A model that provider does not list is then looked up by its name alone.
PROVIDER_IDS: dict[str, str] = {
    "claude": "anthropic",
    "codex": "openai",
    "gemini": "google",
    "antigravity": "google",
    "kimi": "moonshotai",
    "copilot": "github-copilot",
    "cursor": "cursor",
}


@dataclass(frozen=True, slots=True)
class Cost:
    """A cost in US dollars and its source; ``usd`` is ``None`` when unknown, and ``note`` then says why."""

    usd: float | None
    source: CostSource | None
    note: str | None = None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def reported(usage: Mapping[str, Any] | None) -> Cost | None:
    """The cost the CLI itself printed, where its usage carries one (``cost_usd``)."""
    usd = _number(usage.get("cost_usd")) if isinstance(usage, Mapping) else None
    return Cost(usd, "reported") if usd is not None else None


class _Prices:
    """The price data of the installed genai-prices, loaded once (importing it takes about a third of a second
    and 27 MiB): its bundled snapshot, built here rather than taken from genai-prices' current one, which its
    live updater (``UpdatePrices``, started by any other library in the process) would replace with prices
    fetched from the network."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.loaded = False
        self.snapshot: Any = None
        self.usage: Any = None
        self.version: str | None = None

    def load(self) -> bool:
        """Whether the price data is there (loaded on the first call)."""
        if self.loaded:
            return self.snapshot is not None
        with self._lock:
            if not self.loaded:
                try:
                    import genai_prices
                    from genai_prices import data as bundled
                    from genai_prices.data_snapshot import DataSnapshot
                except ImportError:
                    pass
                else:
                    self.snapshot = DataSnapshot(providers=bundled.providers, from_auto_update=False)
                    self.usage = genai_prices.Usage
                    self.version = str(getattr(genai_prices, "__version__", "")) or None
                self.loaded = True
        return self.snapshot is not None


_prices = _Prices()


def preload() -> bool:
    """Load the price data now (a batch does before its first task, so no summary waits for it)."""
    return _prices.load()


def loaded() -> bool:
    """Whether the price data was looked for already (then pricing never waits for an import)."""
    return _prices.loaded


def price_data_version() -> str | None:
    """The installed genai-prices version, or ``None`` without the ``cost`` extra (read from its metadata:
    the price data is not loaded for this)."""
    if _prices.loaded:
        return _prices.version
    from importlib import metadata

    try:
        return metadata.version("genai-prices")
    except metadata.PackageNotFoundError:
        return None


def _lookups(provider: str | None, model: str) -> list[tuple[str | None, str]]:
    """The (price-data provider, model name) pairs to look ``model`` up by, in turn: the provider a
    ``provider/model`` name gives, then the CLI's (:data:`PROVIDER_IDS`), then the model's name alone."""
    head, sep, rest = model.partition("/")
    names = [model, rest] if sep and head and rest else [model]
    pairs: list[tuple[str | None, str]] = [(head, rest)] if len(names) == 2 else []
    mapped = PROVIDER_IDS.get(provider or "")
    if mapped is not None:
        pairs += [(mapped, n) for n in names]
    pairs += [(None, n) for n in names]
    return list(dict.fromkeys(pairs))


def estimate(provider: str | None, model: str | None, usage: Mapping[str, Any] | None) -> Cost:
    """The cost of ``usage`` at ``model``'s list price in the bundled price data, or why there is none."""
    counts = {k: v for k, v in (usage or {}).items() if k in USAGE_KEYS and type(v) is int and v >= 0}
    missing = [k for k in ("input_tokens", "output_tokens") if k not in counts]
    if missing:
        # an estimate from half the counts would be a figure too low, not an estimate
        return Cost(None, None, f"cost not estimated: no {' or '.join(missing)} reported")
    if not model:
        return Cost(None, None, "cost not estimated: no model reported")
    if not _prices.load():
        return Cost(None, None, INSTALL_HINT)
    try:
        tokens = _prices.usage(**{USAGE_KEYS[k]: v for k, v in counts.items()})
    except (ValueError, TypeError) as e:
        return Cost(None, None, f"cost not estimated: {_first_line(e)}")
    found = _found(provider, model)
    if found is None:
        return Cost(None, None, f"cost not estimated: no price for model {model!r} in genai-prices {_prices.version}")
    try:
        calc = _prices.snapshot.calc(tokens, found[1], found[0], None, None)
    except (LookupError, ValueError, TypeError, ArithmeticError) as e:  # counts it refuses (cache above input)
        return Cost(None, None, f"cost not estimated for {model!r}: {_first_line(e)}")
    usd = _number(float(calc.total_price))
    if usd is None:
        return Cost(None, None, f"cost not estimated for {model!r}: the price data gave {calc.total_price}")
    return Cost(usd, "estimated")


#: Models looked up so far, by (CLI, model): the pair that finds each, or ``None``; emptied when this full.
MAX_LOOKUPS = 1024
_lookups_done: dict[tuple[str | None, str], tuple[str | None, str] | None] = {}


def _found(provider: str | None, model: str) -> tuple[str | None, str] | None:
    """The first of :func:`_lookups` that the price data knows (a model not known costs five lookups once)."""
    key = (provider, model)
    if key in _lookups_done:
        return _lookups_done[key]
    hit: tuple[str | None, str] | None = None
    for pid, ref in _lookups(provider, model):
        try:
            _prices.snapshot.find_provider_model(ref, None, pid, None)
        except LookupError:
            continue
        hit = (pid, ref)
        break
    if len(_lookups_done) >= MAX_LOOKUPS:
        _lookups_done.clear()
    _lookups_done[key] = hit
    return hit


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:200] if text else type(e).__name__


def price(
    provider: str | None,
    model: str | None,
    usage: Mapping[str, Any] | None,
    usage_by_model: Mapping[str, Mapping[str, Any]] | None,
) -> tuple[Cost, dict[str, dict[str, Any]] | None]:
    """A run's cost, and its per-model usage with each model's ``cost_usd`` and ``cost_source`` added.

    The run's own reported cost comes first; else the sum of its models' costs (``"estimated"`` if any
    part is), which is unknown when one model's is; else the estimate of its usage at its model.
    """
    by_model: dict[str, dict[str, Any]] | None = None
    parts: list[Cost] = []
    if usage_by_model:
        by_model = {}
        for name, per in usage_by_model.items():
            c = reported(per) or estimate(provider, name, per)
            parts.append(c)
            by_model[name] = {**per, "cost_usd": c.usd, "cost_source": c.source}
    run = reported(usage)
    if run is not None:
        return run, by_model
    if parts:
        unknown = next((c for c in parts if c.usd is None), None)
        if unknown is not None:
            return Cost(None, None, unknown.note), by_model
        source: CostSource = "reported" if all(c.source == "reported" for c in parts) else "estimated"
        return Cost(math.fsum(c.usd or 0.0 for c in parts), source), by_model
    if not usage:
        return Cost(None, None, "cost unknown: no usage reported"), by_model
    return estimate(provider, model, usage), by_model
