"""tether.pricing: a call's usage priced with genai-prices, cache tokens counted once, unknown
models without a price, overrides for private ones."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import genai_prices
import pytest

import tether.pricing as pricing_module
from tether.errors import ConfigError
from tether.pricing import Quote, asks_genai_prices, check_overrides, cost, quote


def list_price(model: str, provider: str) -> genai_prices.types.ModelPrice:
    return genai_prices.calc_price(
        genai_prices.Usage(input_tokens=1, output_tokens=1), model, provider_id=provider
    ).model_price


def rate(value: object) -> Decimal:
    """A per-million price; the base rate of a tiered one (these tests stay under the tiers)."""
    return Decimal(str(getattr(value, "base", value)))


def test_cache_reads_are_inside_input_tokens_and_counted_once() -> None:
    price = list_price("claude-sonnet-4-5", "anthropic")
    usage = {"input_tokens": 1000, "cache_read_tokens": 400, "output_tokens": 100}
    got = cost(usage, "anthropic:claude-sonnet-4-5")  # type: ignore[arg-type]
    expected = (
        600 * rate(price.input_mtok)
        + 400 * rate(price.cache_read_mtok)
        + 100 * rate(price.output_mtok)
    ) / 1_000_000
    assert got == expected
    # Not the double count of adding the cache reads to the input again.
    doubled = cost({"input_tokens": 1400, "output_tokens": 100}, "anthropic:claude-sonnet-4-5")
    assert got is not None and doubled is not None and got < doubled


def test_cache_writes_are_priced_as_writes() -> None:
    price = list_price("claude-sonnet-4-5", "anthropic")
    usage = {"input_tokens": 1000, "cache_creation_tokens": 1000, "output_tokens": 0}
    got = cost(usage, "anthropic:claude-sonnet-4-5")  # type: ignore[arg-type]
    assert got == 1000 * rate(price.cache_write_mtok) / 1_000_000


@pytest.mark.parametrize(
    ("model", "provider"),
    [
        ("openai:gpt-4o", "openai"),
        ("openai-responses:gpt-4o", "openai"),
        ("gemini:gemini-2.5-flash", "google"),
    ],
)
def test_each_provider_maps_to_its_prices(model: str, provider: str) -> None:
    price = list_price(model.split(":")[1], provider)
    got = cost({"input_tokens": 2000, "output_tokens": 300}, model)
    assert got == (2000 * rate(price.input_mtok) + 300 * rate(price.output_mtok)) / 1_000_000


def test_unknown_models_have_no_price() -> None:
    usage = {"input_tokens": 1000, "output_tokens": 100}
    assert cost(usage, "openai:my-finetune-that-does-not-exist") is None  # type: ignore[arg-type]
    assert cost(usage, "script") is None  # type: ignore[arg-type]
    assert cost(usage, "mystery:gpt-4o") is None  # type: ignore[arg-type]
    assert cost(usage, "openai:gpt-4o", base_url="https://api.openai.com/v1") is not None  # type: ignore[arg-type]
    assert cost({}, "openai:gpt-4o") is None


def test_an_override_prices_a_private_model() -> None:
    overrides = check_overrides(
        {"openai:mine": {"input_mtok": 1, "output_mtok": 2, "cache_read_mtok": 0.1}}
    )
    usage = {"input_tokens": 1000, "cache_read_tokens": 400, "output_tokens": 100}
    assert cost(usage, "openai:mine", overrides=overrides) == Decimal("0.00084")  # type: ignore[arg-type]
    # An override by bare model id, and one that wins over genai-prices.
    assert cost(usage, "openai:mine", overrides={"mine": {"input_mtok": 0, "output_mtok": 0}}) == 0  # type: ignore[arg-type]
    assert cost(
        {"input_tokens": 10**6, "output_tokens": 0},
        "openai:gpt-4o",
        overrides={"openai:gpt-4o": {"input_mtok": 7, "output_mtok": 7}},
    ) == Decimal(7)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ([], "must map model names"),
        ({"m": 3}, "must be a table"),
        ({"m": {"input_mtok": 1}}, "missing \\['output_mtok'\\]"),
        ({"m": {"input_mtok": 1, "output_mtok": 1, "cents": 2}}, "unknown keys \\['cents'\\]"),
        ({"m": {"input_mtok": -1, "output_mtok": 1}}, "0 or more"),
        ({"m": {"input_mtok": "1", "output_mtok": 1}}, "number of US dollars"),
    ],
)
def test_bad_overrides_are_config_errors(overrides: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_overrides(overrides)


def test_reasoning_tokens_are_inside_output_tokens_and_counted_once() -> None:
    # Every adapter counts reasoning inside output_tokens (Gemini's thoughts added in), and
    # reasoning_tokens only says how many of them were reasoning: it adds nothing to the price.
    price = list_price("gemini-2.5-flash", "google")
    with_reasoning = {"input_tokens": 500, "output_tokens": 900, "reasoning_tokens": 700}
    got = cost(with_reasoning, "gemini:gemini-2.5-flash")  # type: ignore[arg-type]
    assert got == (500 * rate(price.input_mtok) + 900 * rate(price.output_mtok)) / 1_000_000
    assert got == cost({"input_tokens": 500, "output_tokens": 900}, "gemini:gemini-2.5-flash")


def test_a_gemini_answer_prices_its_thoughts_as_output() -> None:
    # Gemini reports thoughts apart from the answer's tokens; the adapter adds them to
    # output_tokens, which is what genai-prices prices (thinking is billed as output).
    import json

    from tether._sse import ServerSentEvent
    from tether.llm.gemini import GeminiStream

    stream = GeminiStream()
    body = {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {
            "promptTokenCount": 500,
            "candidatesTokenCount": 200,
            "thoughtsTokenCount": 700,
        },
    }
    stream.handle(ServerSentEvent("message", json.dumps(body)))
    usage = stream.usage()
    assert usage == {"input_tokens": 500, "output_tokens": 900, "reasoning_tokens": 700}
    price = list_price("gemini-2.5-flash", "google")
    assert (
        cost(usage, "gemini:gemini-2.5-flash")
        == (500 * rate(price.input_mtok) + 900 * rate(price.output_mtok)) / 1_000_000
    )


@pytest.mark.parametrize(
    "base_url",
    ["https://llm-gateway.corp.example/v1", "http://127.0.0.1:4000", "https://x.openai.azure.com"],
)
def test_behind_a_gateway_a_call_is_priced_as_its_model_strings_provider(base_url: str) -> None:
    usage: Any = {"input_tokens": 2000, "output_tokens": 300}
    direct = cost(usage, "openai:gpt-4o-mini")
    assert direct is not None and direct > 0
    assert cost(usage, "openai:gpt-4o-mini", base_url=base_url) == direct
    assert cost(usage, "anthropic:claude-sonnet-4-5", base_url=base_url) == cost(
        usage, "anthropic:claude-sonnet-4-5"
    )
    # A self-hosted server that reuses the name: pricing=False, or an override of its own.
    off = quote(usage, "openai:gpt-4o-mini", base_url=base_url, pricing=False)
    assert off == Quote(None, off.unpriced) and "pricing=False" in (off.unpriced or "")
    own = check_overrides({"openai:gpt-4o-mini": {"input_mtok": 0.0, "output_mtok": 0.0}})
    assert cost(usage, "openai:gpt-4o-mini", base_url=base_url, overrides=own, pricing=False) == 0


def test_a_bare_model_id_through_an_unknown_url_is_not_guessed() -> None:
    usage: Any = {"input_tokens": 10, "output_tokens": 1}
    q = quote(usage, "gpt-4o-mini", base_url="http://127.0.0.1:8000/v1")
    assert q.usd is None and q.unpriced is not None and "127.0.0.1:8000" in q.unpriced


def test_every_unpriced_call_says_why() -> None:
    usage: Any = {"input_tokens": 10, "output_tokens": 1}
    assert quote({}, "openai:gpt-4o").unpriced == "the call reported no token usage"
    mystery = quote(usage, "mystery:gpt-4o").unpriced or ""
    assert "no provider 'mystery'" in mystery and "prices entry for 'mystery:gpt-4o'" in mystery
    unknown = quote(usage, "openai:my-finetune-xyz").unpriced or ""
    assert "no price for 'my-finetune-xyz' of provider 'openai'" in unknown
    assert quote(usage, "openai:gpt-4o").unpriced is None


@pytest.mark.parametrize(
    ("model", "pricing", "asks"),
    [
        ("openai:gpt-4o-mini", True, True),
        ("gpt-4o-mini", True, True),  # a bare model id: only genai-prices knows
        ("test:echo", True, False),  # a provider genai-prices has no prices for
        ("ollama:llama3", True, False),
        ("script", True, False),  # the scripted client's default model id
        ("openai:gpt-4o-mini", False, False),
    ],
)
def test_only_a_call_genai_prices_may_price_asks_it(
    model: str, pricing: bool, asks: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert asks_genai_prices(model, pricing=pricing) is asks
    if not asks:
        # ... and its quote says why without it, wherever the call went.
        def unasked() -> None:
            raise AssertionError(f"genai-prices was asked about {model!r}")

        monkeypatch.setattr(pricing_module, "_genai_prices", unasked)
        assert quote({"input_tokens": 1}, model, pricing=pricing).unpriced
        assert quote({"input_tokens": 1}, model, pricing=pricing, base_url="http://x/v1").unpriced
