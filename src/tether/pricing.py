"""What a model call cost, in US dollars, from its `usage` (needs the `lab` extra).

```python
from tether.pricing import cost

cost({"input_tokens": 1200, "cache_read_tokens": 1000, "output_tokens": 80},
     "anthropic:claude-sonnet-4-5")                     # Decimal('0.0021')
cost(usage, "openai:my-private-model",
     overrides={"openai:my-private-model": {"input_mtok": 0.5, "output_mtok": 1.5}})
```

Prices come from the `genai-prices` package (the `lab` extra). A ``"provider:model"`` call is
priced as that provider's model (genai-prices' provider-id match) wherever it went: through a
custom `base_url` (a corporate gateway, a LiteLLM proxy, an Azure-style proxy) an
``openai:gpt-4o-mini`` call costs what OpenAI's gpt-4o-mini costs. A self-hosted server that
reuses a known name turns that off with ``pricing=False`` in its model config, or prices itself
with an `overrides` entry (checked first). A bare model id (no provider) through a `base_url` is
priced only when genai-prices recognises the URL. A model it does not know has no price: `cost`
returns None and nothing shows a number, rather than a wrong one; `quote` also says why.

Both tether's `Usage` and genai-prices count cache reads and cache writes *inside*
`input_tokens` (every adapter adds Anthropic's separate counts in), so they are passed through
unchanged and never counted twice; reasoning tokens are inside `output_tokens` the same way.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from types import ModuleType
from typing import Any, TypedDict, Unpack

from . import _extras
from .errors import ConfigError
from .events import Usage

__all__ = [
    "PriceOptions",
    "PriceOverride",
    "Quote",
    "asks_genai_prices",
    "check_overrides",
    "cost",
    "quote",
]

if importlib.util.find_spec("genai_prices") is None:  # pragma: no cover - without the extra
    raise _extras.missing_extra("tether.pricing needs the genai-prices package", "lab")
_GENAI: ModuleType | None = None
"""genai-prices, imported at the first call that asks it (importing it and its price data costs
about 0.35 s of CPU, which a call to a model it cannot price never needs)."""


def _genai_prices() -> ModuleType:
    global _GENAI
    if _GENAI is None:
        import genai_prices

        _GENAI = genai_prices
    return _GENAI


class PriceOverride(TypedDict, total=False):
    """The price of a model genai-prices does not know: US dollars per million tokens."""

    input_mtok: float
    """Input tokens that were neither read from nor written to a cache (required)."""
    output_mtok: float
    """Output tokens, reasoning included (required)."""
    cache_read_mtok: float
    """Input tokens read from a cache (default: `input_mtok`)."""
    cache_write_mtok: float
    """Input tokens written to a cache (default: `input_mtok`)."""


_PROVIDER_IDS = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai-responses": "openai",
    "gemini": "google",
    "google": "google",
}
"""tether's provider names -> genai-prices' provider ids."""
_OWN_IDS = frozenset({"script"})
"""Bare model ids of tether's own keyless clients (`tether.testing.script_client`'s default),
which no price table holds: unpriced without asking genai-prices."""
_UNKNOWN: set[tuple[str, str | None, str | None]] = set()
"""(model, provider id, base URL) that genai-prices has no price for."""


@dataclass(frozen=True, slots=True)
class Quote:
    """The price of one model call, or why it has none."""

    usd: Decimal | None
    """US dollars; None when not known."""
    unpriced: str | None = None
    """Why there is no price (None when there is one), worded for `tether runs show`."""


_OVERRIDE_KEYS = frozenset(PriceOverride.__annotations__)


def check_overrides(overrides: Any, where: str = "prices") -> dict[str, PriceOverride]:
    """`overrides` checked: `{model: {"input_mtok": float, "output_mtok": float, ...}}`.

    Raises:
        ConfigError: not that shape, naming the entry and what to write.
    """
    if not isinstance(overrides, Mapping):
        raise ConfigError(f"{where} must map model names to prices, got {overrides!r:.80}")
    out: dict[str, PriceOverride] = {}
    for model, entry in overrides.items():
        if not isinstance(model, str) or not isinstance(entry, Mapping):
            raise ConfigError(
                f"{where}[{model!r}] must be a table such as "
                "{input_mtok = 0.5, output_mtok = 1.5} (US dollars per million tokens)"
            )
        unknown = sorted(set(entry) - _OVERRIDE_KEYS)
        missing = sorted({"input_mtok", "output_mtok"} - set(entry))
        if unknown or missing:
            raise ConfigError(
                f"{where}[{model!r}]: "
                + (f"unknown keys {unknown}; " if unknown else "")
                + (f"missing {missing}; " if missing else "")
                + f"known keys: {sorted(_OVERRIDE_KEYS)}"
            )
        for key, value in entry.items():
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ConfigError(
                    f"{where}[{model!r}].{key} must be a number of US dollars per million "
                    f"tokens (0 or more), got {value!r}"
                )
        price: PriceOverride = {
            "input_mtok": entry["input_mtok"],
            "output_mtok": entry["output_mtok"],
        }
        if "cache_read_mtok" in entry:
            price["cache_read_mtok"] = entry["cache_read_mtok"]
        if "cache_write_mtok" in entry:
            price["cache_write_mtok"] = entry["cache_write_mtok"]
        out[model] = price
    return out


def asks_genai_prices(model: str, *, pricing: bool = True) -> bool:
    """Whether pricing a call to `model` may look it up in genai-prices (so its data is worth
    loading ahead): not for a provider genai-prices does not know (``"test:echo"``,
    ``"ollama:..."``) nor for the scripted client's default ``"script"``, and not with
    ``pricing=False``; overrides are checked first either way.
    """
    provider, name = _split(model)
    if provider is None:
        return pricing and name not in _OWN_IDS
    return pricing and provider in _PROVIDER_IDS


def _split(model: str) -> tuple[str | None, str]:
    provider, sep, name = model.partition(":")
    return (provider, name) if sep else (None, model)


def _override(usage: Usage, model: str, overrides: Mapping[str, PriceOverride]) -> Decimal | None:
    entry = overrides.get(model)
    if entry is None:
        entry = overrides.get(_split(model)[1])
    if entry is None:
        return None
    inp = usage.get("input_tokens", 0)
    read = usage.get("cache_read_tokens", 0)
    write = usage.get("cache_creation_tokens", 0)
    plain = max(inp - read - write, 0)
    in_price = Decimal(str(entry["input_mtok"]))
    total = (
        plain * in_price
        + read * Decimal(str(entry.get("cache_read_mtok", entry["input_mtok"])))
        + write * Decimal(str(entry.get("cache_write_mtok", entry["input_mtok"])))
        + usage.get("output_tokens", 0) * Decimal(str(entry["output_mtok"]))
    )
    return total / Decimal(1_000_000)


class PriceOptions(TypedDict, total=False):
    """What `cost` and `quote` take besides the usage and the model (each documented at
    `cost`; every one optional)."""

    base_url: str | None
    overrides: Mapping[str, PriceOverride] | None
    at: datetime | None
    pricing: bool
    """Default True."""


def cost(usage: Usage, model: str, **options: Unpack[PriceOptions]) -> Decimal | None:
    """The price of one model call in US dollars, or None when it is not known (`quote` says
    why).

    Args:
        usage: The call's `usage` (a `done` event's, a `FinishChunk`'s, a step's).
        model: ``"provider:model"`` (as in a model config) or the provider's model id.
        base_url: Where the call went, when not the provider's own API. A ``"provider:model"``
            is priced as that provider's model whatever the URL (a gateway or proxy in front of
            it); a bare model id is priced only if genai-prices recognises the URL.
        overrides: Prices by ``"provider:model"`` or model id, checked first.
        at: When the call was made (prices change over time); default now.
        pricing: False (the model config's ``pricing``) leaves a call without an override
            unpriced: a self-hosted server that reuses a known model name.
    """
    return quote(usage, model, **options).usd


def quote(usage: Usage, model: str, **options: Unpack[PriceOptions]) -> Quote:
    """`cost`, with the reason when there is no price (the arguments are `cost`'s)."""
    base_url = options.get("base_url")
    overrides = options.get("overrides")
    at = options.get("at")
    pricing = options.get("pricing", True)
    if not usage:
        return Quote(None, "the call reported no token usage")
    if overrides:
        own = _override(usage, model, overrides)
        if own is not None:
            return Quote(own)
    if not pricing:
        return Quote(
            None,
            f"pricing=False in the model config (a prices entry for {model!r} gives it a price)",
        )
    provider, name = _split(model)
    provider_id = _PROVIDER_IDS.get(provider) if provider is not None else None
    if provider is not None and provider_id is None:
        return Quote(
            None, f"genai-prices has no provider {provider!r}; add a prices entry for {model!r}"
        )
    # A provider's model is priced by the provider's id wherever it was sent; only a bare model
    # id goes by the URL (genai-prices knows the public endpoints of the providers it prices).
    url = base_url if provider_id is None else None
    unknown = (name, provider_id, url)
    if (at is None and unknown in _UNKNOWN) or (provider is None and name in _OWN_IDS):
        return _no_price(model, name, provider_id, url)
    genai_prices = _genai_prices()
    priced = genai_prices.Usage(
        input_tokens=usage.get("input_tokens", 0),
        output_tokens=usage.get("output_tokens", 0),
        cache_read_tokens=usage.get("cache_read_tokens") or None,
        cache_write_tokens=usage.get("cache_creation_tokens") or None,
    )
    try:
        if url is not None:
            result = genai_prices.calc_price(
                priced, name, provider_api_url=url, genai_request_timestamp=at
            )
        else:
            result = genai_prices.calc_price(
                priced, name, provider_id=provider_id, genai_request_timestamp=at
            )
    except LookupError:
        # Looked up once: a model genai-prices does not know (a local or scripted one) stays
        # unknown, and each of its calls would otherwise pay for a failed search.
        if at is None and len(_UNKNOWN) < 1024:
            _UNKNOWN.add(unknown)
        return _no_price(model, name, provider_id, url)
    return Quote(result.total_price)


def _no_price(model: str, name: str, provider_id: str | None, url: str | None) -> Quote:
    where = f" of provider {provider_id!r}" if provider_id else f" served at {url}" if url else ""
    return Quote(
        None, f"genai-prices has no price for {name!r}{where}; add a prices entry for {model!r}"
    )
