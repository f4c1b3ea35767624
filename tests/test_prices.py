"""The server's price table (``relayrace serve --prices``): what it costs, and a wrong file
refused with a message that says what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from relayrace import ConfigError
from relayrace.server import PriceTable


def test_usage_is_priced_per_model_with_cached_input_cheaper(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text("currency: EUR\nmodels:\n  openai:gpt-4o:\n    input: 2.5\n    output: 10\n"
                    "    cached_input: 1.25\n  other:\n    input: 1\n    output: 2\n")
    table = PriceTable.load(path)
    cost = table.cost({"openai:gpt-4o": {"input_tokens": 1_000_000, "cached_tokens": 400_000,
                                         "output_tokens": 100_000},
                       "other": {"input_tokens": 0, "output_tokens": 0},
                       "unknown": {"input_tokens": 5, "output_tokens": 5}})
    assert cost["by_model"]["openai:gpt-4o"] == pytest.approx(0.6 * 2.5 + 0.4 * 1.25 + 1.0)
    assert cost["total"] == pytest.approx(3.0) and cost["currency"] == "EUR"
    assert cost["unpriced"] == ["unknown"]  # said, not counted as free


@pytest.mark.parametrize(("text", "message"), [
    ("models: [a]", "is a mapping with `models:`"),
    ("models: {m: {input: 1}}", r"models\.m needs `output`"),
    ("models: {m: {input: -1, output: 1}}", r"models\.m\.input is a price >= 0; got -1"),
    ("models: {m: {input: 1, output: 1, outptu: 2}}", "unknown key\\(s\\) outptu"),
    ("model: {}\nmodels: {}", "unknown key\\(s\\) model"),
    ("per: 0\nmodels: {}", "`per` is a whole number"),
    ("models: {m: {input: '1', output: 1}}", "input is a price >= 0; got '1'"),
    ("models: {: [", "is not valid YAML"),
])
def test_a_wrong_price_table_is_refused_saying_what_is_wrong(
        tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        PriceTable.load(path)
    with pytest.raises(ConfigError, match="cannot be read"):
        PriceTable.load(tmp_path / "missing.yaml")


def test_serve_refuses_a_wrong_price_table_before_it_starts(tmp_path: Path) -> None:
    from test_cli import TEAM, assert_clean_error, invoke

    path = tmp_path / "prices.yaml"
    path.write_text("models:\n  gpt:\n    input: 1\n")
    result = invoke("serve", f"{TEAM}:triage", "--prices", path, "--port", "0")
    assert_clean_error(result, "models.gpt needs `output`")
