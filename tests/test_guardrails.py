"""Tests for relayrace.agents.guardrails: detectors, built-in guardrails, composition and config."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relayrace.agents.guardrails import (
    FunctionGuardrail,
    Guardrail,
    GuardrailResult,
    MaxLengthGuardrail,
    PIIGuardrail,
    TopicDenyListGuardrail,
    apply_guardrails,
    block_message,
    find_pii,
    guardrail,
    guardrail_from_config,
    iban_valid,
    luhn_valid,
)
from relayrace.core.exceptions import ConfigError, UserError

VISA = "4111 1111 1111 1111"  # Luhn-valid test number
VISA_BROKEN = "4111 1111 1111 1112"  # the same with its last digit changed
GB_IBAN = "GB82 WEST 1234 5698 7654 32"
DE_IBAN = "DE89 3704 0044 0532 0130 00"


def kinds_found(text: str) -> list[tuple[str, str]]:
    return [(m.kind, text[m.start : m.end]) for m in find_pii(text)]


def redact(text: str) -> str:
    return PIIGuardrail().check(text, None).text


# --- detectors -----------------------------------------------------------------------------


def test_luhn_valid() -> None:
    assert luhn_valid("4111111111111111")
    assert luhn_valid(VISA)
    assert luhn_valid("3782-822463-10005")
    assert not luhn_valid("4111111111111112")
    assert not luhn_valid("")
    assert not luhn_valid("4111a11111111111")


def test_iban_valid() -> None:
    assert iban_valid(GB_IBAN)
    assert iban_valid(DE_IBAN.replace(" ", ""))
    assert iban_valid(GB_IBAN.lower())
    assert not iban_valid("GB82 WEST 1234 5698 7654 33")  # checksum broken
    assert not iban_valid("GB82 WEST 1234 5698 7654 3")  # wrong length for GB
    assert not iban_valid("GB82 WEST")
    assert not iban_valid("")


def test_valid_card_is_redacted_and_one_changed_digit_is_not() -> None:
    assert redact(f"My card is {VISA}, thanks") == "My card is [CARD], thanks"
    assert redact(f"My card is {VISA_BROKEN}, thanks") == f"My card is {VISA_BROKEN}, thanks"
    assert redact("pay with 4111-1111-1111-1111.") == "pay with [CARD]."
    assert redact("amex 3782 822463 10005") == "amex [CARD]"


@pytest.mark.parametrize(
    "text",
    [
        "00004111111111111111",  # too long: a card number inside a longer id is not a card
        "ref4111111111111111",  # glued to a word
        "scores 3 5 7 2 8 1 9 4 6 2 3 5 7 8",  # Luhn-valid by chance, but not card-shaped
        "pi is 3.4111111111111111",
    ],
)
def test_digit_strings_that_are_not_cards(text: str) -> None:
    assert [m for m in find_pii(text) if m.kind == "card"] == []


def test_card_followed_by_other_number_in_same_run() -> None:
    assert redact(f"{VISA} 123") == "[CARD] 123"


def test_ibans_are_redacted_and_checksum_broken_one_is_not() -> None:
    text = f"Send to {GB_IBAN} or {DE_IBAN}. Not GB82 WEST 1234 5698 7654 33."
    assert redact(text) == "Send to [IBAN] or [IBAN]. Not GB82 WEST 1234 5698 7654 33."
    assert redact("IBAN: DE89370400440532013000") == "IBAN: [IBAN]"


def test_iban_followed_by_upper_case_words() -> None:
    assert redact(f"{GB_IBAN} IS MY ACCOUNT") == "[IBAN] IS MY ACCOUNT"


def test_iban_digits_are_never_taken_for_a_card_or_phone() -> None:
    assert kinds_found(f"x {DE_IBAN} y") == [("iban", DE_IBAN)]
    assert find_pii(f"x {DE_IBAN} y", kinds=["card", "phone"]) == []


@pytest.mark.parametrize(
    "phone",
    [
        "+44 20 7946 0958",
        "+1 (415) 555-0132",
        "415-555-0132",
        "(415) 555 0132",
        "415.555.0132",
        "+14155550132",
        "1 415 555 0132",
        "020 7946 0958",
        "+44 (0)20 7946 0958",
    ],
)
def test_phone_numbers_are_redacted(phone: str) -> None:
    assert kinds_found(f"Call me on {phone} today.") == [("phone", phone)]
    assert redact(f"Call me on {phone} today.") == "Call me on [PHONE] today."


@pytest.mark.parametrize(
    "text",
    [
        "Due 2024-01-15 at 10:30.",
        "Meeting 15.01.2024 from 09:00 to 17:45:30",
        "Invoice INV-2024-0042 is paid",
        "order 2024-0042 shipped",
        "PIN 1234, room 4021, year 2024",
        "timestamp 1700000000",
        "host 192.168.1.100 port 8080",
        "version 1.2.3, pi 3.14159",
        "+5",
        "call 555 0132",
    ],
)
def test_things_that_are_not_phone_numbers(text: str) -> None:
    assert find_pii(text) == []


def test_card_detection_runs_before_phone_detection() -> None:
    assert kinds_found(f"+ {VISA}") == [("card", VISA)]
    assert find_pii(VISA, kinds=["phone"]) == []


@pytest.mark.parametrize(
    "email", ["jane.doe@example.com", "a+tag@mail.example.co.uk", "x_y-z@sub-domain.io"]
)
def test_emails_are_redacted(email: str) -> None:
    assert redact(f"Write to <{email}>.") == "Write to <[EMAIL]>."


@pytest.mark.parametrize("text", ["jane at example dot com", "@handle", "a@b", "x@y.c"])
def test_things_that_are_not_emails(text: str) -> None:
    assert find_pii(text) == []


def test_find_pii_filters_kinds_and_sorts() -> None:
    text = f"{VISA} jane@example.com +44 20 7946 0958"
    assert [m.kind for m in find_pii(text)] == ["card", "email", "phone"]
    assert [m.kind for m in find_pii(text, kinds={"email"})] == ["email"]


def test_unknown_pii_kind_is_rejected_with_suggestion() -> None:
    with pytest.raises(UserError, match=r"'emial'.*Did you mean 'email'"):
        find_pii("x", kinds=["emial"])
    with pytest.raises(UserError, match="not a string"):
        PIIGuardrail(kinds="email")


# --- built-in guardrails -------------------------------------------------------------------


def test_pii_message_counts_without_the_sensitive_content() -> None:
    text = f"a@example.com, b@example.com, card {VISA}"
    result = PIIGuardrail().check(text, None)
    assert result.action == "redact"
    assert result.message == "2 e-mail addresses, 1 card number"
    assert result.guardrail == "pii"
    assert "example.com" not in result.message and "4111" not in result.message


def test_pii_block_keeps_sensitive_content_out_of_the_result() -> None:
    result = PIIGuardrail(action="block", kinds=["card"]).check(f"card {VISA}", None)
    assert result.action == "block"
    assert result.text == "card [CARD]"
    assert block_message(result) == (
        "I can't help with that: the request was blocked by the pii guardrail (1 card number)."
    )


def test_pii_allows_clean_text() -> None:
    result = PIIGuardrail().check("Nothing to see on 2024-01-15.", None)
    assert (result.action, result.text, result.message) == (
        "allow",
        "Nothing to see on 2024-01-15.",
        "",
    )


def test_max_length_block_and_truncate() -> None:
    assert MaxLengthGuardrail(5).check("12345", None).action == "allow"
    blocked = MaxLengthGuardrail(5_000).check("x" * 7_000, None)
    assert blocked.action == "block"
    assert blocked.message == "7,000 characters, over the 5,000-character limit"
    cut = MaxLengthGuardrail(5, action="truncate").check("abcdefgh", None)
    assert (cut.action, cut.text, cut.guardrail) == ("redact", "abcde", "max_length")
    with pytest.raises(UserError, match="positive integer"):
        MaxLengthGuardrail(0)
    with pytest.raises(UserError, match="Did you mean 'truncate'"):
        MaxLengthGuardrail(5, action="trunc")  # type: ignore[arg-type]


def test_topic_filter_matches_whole_words_and_phrases_case_insensitively() -> None:
    rail = TopicDenyListGuardrail(["crypto", "credit card fraud", "C++"])
    assert rail.check("Tell me about CRYPTO prices", None).message == 'denied topic "crypto"'
    assert rail.check("is Credit  Card\nFraud easy?", None).action == "block"
    assert rail.check("I love c++ templates", None).action == "block"
    assert rail.check("cryptocurrency and credit cards", None).action == "allow"
    both = rail.check("crypto or credit card fraud, crypto again", None)
    assert both.message == 'denied topics "crypto", "credit card fraud"'
    with pytest.raises(UserError, match="non-empty list"):
        TopicDenyListGuardrail("crypto")
    with pytest.raises(UserError, match="non-empty string"):
        TopicDenyListGuardrail(["ok", " "])


# --- composition ---------------------------------------------------------------------------


class Recorder(Guardrail):
    """Records the texts it sees and allows them."""

    def __init__(self) -> None:
        self.name = "recorder"
        self.seen: list[str] = []

    def check(self, text: str, context: Any) -> GuardrailResult:
        self.seen.append(text)
        return GuardrailResult(action="allow", text=text, guardrail=self.name)


def test_apply_guardrails_composes_redactions_in_order() -> None:
    recorder = Recorder()

    @guardrail
    def shout(text: str, context: Any) -> str:
        return text.upper()

    final, results = apply_guardrails(
        [PIIGuardrail(), recorder, shout], "mail bob@example.com", None
    )
    assert recorder.seen == ["mail [EMAIL]"]
    assert final == "MAIL [EMAIL]"
    assert [(r.guardrail, r.action) for r in results] == [("pii", "redact"), ("shout", "redact")]


def test_apply_guardrails_stops_at_first_block() -> None:
    recorder = Recorder()
    rails = [PIIGuardrail(), TopicDenyListGuardrail(["refund"]), recorder]
    final, results = apply_guardrails(rails, "refund to bob@example.com", None)
    assert recorder.seen == []
    assert [r.action for r in results] == ["redact", "block"]
    assert final == "refund to [EMAIL]"
    assert block_message(results[-1]) == (
        "I can't help with that: the request was blocked by the topic_filter guardrail "
        '(denied topic "refund").'
    )


def test_apply_guardrails_with_nothing_to_do() -> None:
    assert apply_guardrails([], "hi", None) == ("hi", [])
    assert apply_guardrails([PIIGuardrail(), MaxLengthGuardrail(10)], "hi", None) == ("hi", [])


# --- custom guardrails ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("returned", "action", "text"),
    [
        (True, "allow", "hello"),
        (None, "allow", "hello"),
        (False, "block", "hello"),
        ("HELLO", "redact", "HELLO"),
        ("hello", "allow", "hello"),
    ],
)
def test_function_guardrail_return_forms(returned: object, action: str, text: str) -> None:
    rail = FunctionGuardrail(lambda t, c: returned, name="custom")  # type: ignore[arg-type,return-value]
    result = rail.check("hello", None)
    assert (result.action, result.text, result.guardrail) == (action, text, "custom")


def test_function_guardrail_result_and_context() -> None:
    @guardrail(name="vip_only")
    def check(text: str, context: Any) -> GuardrailResult:
        if context["vip"]:
            return GuardrailResult(action="allow", text=text)
        return GuardrailResult(action="block", text=text, message="not a VIP")

    assert check.name == "vip_only"
    assert check.check("hi", {"vip": True}).action == "allow"
    blocked = check.check("hi", {"vip": False})
    assert (blocked.action, blocked.guardrail) == ("block", "vip_only")
    assert block_message(blocked, stage="output") == (
        "I'm sorry, I can't share that answer: it was blocked by the vip_only guardrail "
        "(not a VIP)."
    )


def test_function_guardrail_name_defaults_to_function_name() -> None:
    @guardrail
    def no_secrets(text: str, context: Any) -> bool:
        return "secret" not in text

    assert isinstance(no_secrets, FunctionGuardrail)
    assert no_secrets.name == "no_secrets"
    result = no_secrets.check("my secret", None)
    assert block_message(result) == (
        "I can't help with that: the request was blocked by the no_secrets guardrail."
    )


def test_function_guardrail_misuse() -> None:
    bad = FunctionGuardrail(lambda t, c: 42, name="bad")  # type: ignore[arg-type,return-value]
    with pytest.raises(UserError, match="returned int"):
        bad.check("x", None)

    async def slow(text: str, context: Any) -> bool:
        return True

    with pytest.raises(UserError, match="synchronous"):
        FunctionGuardrail(slow)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="allow, redact or block"):
        GuardrailResult(action="warn", text="x")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="needs a block result"):
        block_message(GuardrailResult(action="allow", text="x"))


# --- configuration -------------------------------------------------------------------------


def test_guardrail_from_config_builds_each_type() -> None:
    pii = guardrail_from_config({"type": "pii_detection", "action": "block"})
    assert isinstance(pii, PIIGuardrail) and pii.action == "block"
    length = guardrail_from_config({"type": "max_length", "max_chars": 5000, "action": "truncate"})
    assert isinstance(length, MaxLengthGuardrail)
    assert (length.max_chars, length.action) == (5000, "truncate")
    topics = guardrail_from_config(
        {"type": "topic_filter", "blocked_topics": ["politics"], "name": "no_politics"}
    )
    assert topics.check("Politics today", None).guardrail == "no_politics"


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        ({"type": "pii_detect"}, r"'pii_detect'.*Did you mean 'pii_detection'.*Valid types"),
        ({"type": "max_length", "max_char": 10}, r"'max_char'.*Did you mean 'max_chars'"),
        ({"type": "topic_filter", "topics": ["x"]}, r"'topics'.*Valid keys: .*blocked_topics"),
        ({"action": "redact"}, "needs a 'type'"),
        ({"type": "max_length"}, "needs 'max_chars'"),
        ({"type": "max_length", "max_chars": "10"}, "positive integer"),
        ({"type": "pii_detection", "action": "mask"}, "'redact' or 'block'"),
        ({"type": "pii_detection", "kinds": ["ssn"]}, "Unknown PII kind 'ssn'"),
        ({"type": "topic_filter", "blocked_topics": []}, "non-empty list"),
    ],
)
def test_guardrail_from_config_errors(spec: dict[str, Any], pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        guardrail_from_config(spec)


def test_guardrail_from_config_rejects_non_mapping() -> None:
    with pytest.raises(ConfigError, match="mapping"):
        guardrail_from_config(["pii_detection"])  # type: ignore[arg-type]


# --- properties ----------------------------------------------------------------------------

_alnum = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8)
emails = st.builds(
    lambda local, domain, tld: f"{local}@{domain}.{tld}",
    _alnum,
    _alnum,
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=6),
)


def _with_luhn_digit(body: str) -> str:
    total = 0
    for i, char in enumerate(reversed(body)):
        value = int(char) * (1 if i % 2 else 2)  # doubled from the right once the check is added
        total += value - 9 if value > 9 else value
    return body + str(-total % 10)


cards = st.builds(
    lambda body, sep: sep.join(_with_luhn_digit(body)[i : i + 4] for i in range(0, 16, 4)),
    st.text(alphabet="0123456789", min_size=15, max_size=15),
    st.sampled_from(["", " ", "-"]),
)


@given(before=st.text(max_size=40), email=emails, card=cards, after=st.text(max_size=40))
def test_redacted_text_never_contains_the_email_or_card(
    before: str, email: str, card: str, after: str
) -> None:
    assert luhn_valid(card)
    redacted = redact(f"{before} {email} and {card} {after}")
    assert email not in redacted
    assert card not in redacted


@given(st.text(max_size=300))
def test_apply_guardrails_never_raises_and_spans_are_disjoint(text: str) -> None:
    rails = [
        PIIGuardrail(),
        TopicDenyListGuardrail(["crypto", "credit card"]),
        MaxLengthGuardrail(200, action="truncate"),
    ]
    final, results = apply_guardrails(rails, text, None)
    assert isinstance(final, str)
    assert all(r.action in ("redact", "block") for r in results)
    matches = find_pii(text)
    assert all(a.end <= b.start for a, b in zip(matches, matches[1:], strict=False))


@given(st.text(alphabet="0123456789 -+().:/", max_size=60))
def test_detectors_on_digit_soup(text: str) -> None:
    for m in find_pii(text):
        assert 0 <= m.start < m.end <= len(text)
        if m.kind == "card":
            assert luhn_valid(text[m.start : m.end])
