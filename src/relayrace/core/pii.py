"""Finding personal data in text: e-mail addresses, phone numbers, card numbers (Luhn) and
IBANs (mod 97), for ``PIIGuardrail``; linear-time scans, so hostile text costs no more than its
length."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass

from ._suggest import closest
from .exceptions import UserError

__all__ = ["PII_KINDS", "PIIMatch", "find_pii", "iban_valid", "luhn_valid"]


def suggestion(word: object, options: Collection[str]) -> str:
    close = closest(str(word), options)
    return f" Did you mean {close!r}?" if close else ""


# --- PII detection -------------------------------------------------------------------------

PII_KINDS: tuple[str, ...] = ("email", "phone", "card", "iban")
"""Every kind ``find_pii`` knows, in the order messages list them."""

PII_LABELS = {
    "email": "e-mail address",
    "phone": "phone number",
    "card": "card number",
    "iban": "IBAN",
}

# Start only where a run of local-part characters starts, so failing scans stay linear.
_EMAIL_RE = re.compile(r"(?<![\w.%+\-])[\w.%+\-]+@[^\W_][\w\-]*(?:\.[^\W_][\w\-]*)*\.[^\W\d_]{2,}")
# Upper case only: lower-case "ab12 ..." tokens are common in prose and mod-97 passes 1 in 97.
_IBAN_RE = re.compile(r"(?<!\w)[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){11,30}")
_IBAN_FORMAT_RE = re.compile(r"[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}")
# Lengths from the SWIFT IBAN registry; a country missing here only gets the checksum test.
_IBAN_REGISTRY = (
    "AD24 AE23 AL28 AT20 AZ28 BA20 BE16 BG22 BH22 BI27 BR29 BY28 CH21 CR22 CY28 CZ24 DE22 DJ27 "
    "DK18 DO28 EE20 EG29 ES24 FI18 FK18 FO18 FR27 GB22 GE22 GI23 GL18 GR27 GT28 HR21 HU28 IE22 "
    "IL23 IQ23 IS26 IT27 JO30 KW30 KZ20 LB28 LC32 LI21 LT20 LU20 LV21 LY25 MC27 MD24 ME22 MK19 "
    "MN20 MR27 MT31 MU30 NI28 NL18 NO15 OM23 PK24 PL28 PS29 PT25 QA29 RO24 RS22 RU33 SA24 SC31 "
    "SD18 SE24 SI19 SK24 SM27 SO23 ST25 SV28 TL23 TN24 TR26 UA29 VA22 VG24 XK20 YE30"
)
_IBAN_LENGTHS = {entry[:2]: int(entry[2:]) for entry in _IBAN_REGISTRY.split()}
# Digit groups joined by single spaces or dashes; not glued to a word, sign or decimal point.
_DIGIT_RUN_RE = re.compile(r"(?<![\w+.])[0-9]+(?:[ \-][0-9]+)*")
_DIGITS_RE = re.compile(r"[0-9]+")
# Separators between digit groups are required (")" counts), so the pattern cannot backtrack
# exponentially; whether the candidate really is a phone number is decided in _is_phone.
_PHONE_RE = re.compile(r"(?<![\w+\-./])\+?\(?[0-9]+(?:(?:\)[ .\-]?|[ .\-]\(?)[0-9]+)*")


@dataclass(frozen=True, slots=True)
class PIIMatch:
    """Personal data found in a text: ``text[start:end]`` is of ``kind`` (one of PII_KINDS)."""

    kind: str
    start: int
    end: int


def luhn_valid(digits: str) -> bool:
    """True if ``digits`` (spaces and dashes allowed) pass the Luhn checksum of card numbers."""
    compact = digits.replace(" ", "").replace("-", "")
    if not compact or not compact.isascii() or not compact.isdigit():
        return False
    total = 0
    for i, char in enumerate(reversed(compact)):
        value = int(char) * (2 if i % 2 else 1)
        total += value - 9 if value > 9 else value
    return total % 10 == 0


def iban_valid(s: str) -> bool:
    """True if ``s`` (spaces allowed) is an IBAN with a valid ISO 13616 mod-97 checksum.

    Countries in the IBAN registry must also have their registered length.
    """
    compact = s.replace(" ", "").upper()
    if not _IBAN_FORMAT_RE.fullmatch(compact) or not 2 <= int(compact[2:4]) <= 98:
        return False
    if _IBAN_LENGTHS.get(compact[:2], len(compact)) != len(compact):
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(char, 36)) for char in rearranged)) % 97 == 1


def _word_char_at(text: str, i: int) -> bool:
    return i < len(text) and (text[i].isalnum() or text[i] == "_")


def _iban_spans(text: str) -> Iterator[tuple[int, int]]:
    for m in _IBAN_RE.finditer(text):
        # The greedy pattern can run into following upper-case words ("... 32 IS MINE"): take
        # the longest prefix that ends at a word boundary and validates.
        for end in range(m.end(), m.start() + 14, -1):
            if not _word_char_at(text, end) and iban_valid(text[m.start() : end]):
                yield m.start(), end
                break


def _card_windows(groups: Sequence[str], i: int) -> Iterator[int]:
    """Ends ``j`` (longest first) such that ``groups[i:j]`` is shaped like a card number."""
    if 13 <= len(groups[i]) <= 19:
        yield i + 1
    # Separated cards print in groups of 3-6 digits (4-4-4-4, 4-6-5); refusing 1-2 digit
    # groups keeps lists of small numbers from passing Luhn by chance.
    ends, total, j = [], 0, i
    while j < len(groups) and 3 <= len(groups[j]) <= 6 and total + len(groups[j]) <= 19:
        total += len(groups[j])
        j += 1
        if total >= 13:
            ends.append(j)
    yield from reversed(ends)


def _card_spans(text: str) -> Iterator[tuple[int, int]]:
    for run in _DIGIT_RUN_RE.finditer(text):
        found = list(_DIGITS_RE.finditer(text, run.start(), run.end()))
        if _word_char_at(text, run.end()):
            found.pop()  # "...1111abc": the last group is part of a word, not of a number
        groups = [g.group() for g in found]
        i = 0
        while i < len(groups):
            # Two numbers may share a run ("4111 1111 1111 1111 123"): take the longest
            # Luhn-valid window of whole groups, then continue after it.
            j = next((j for j in _card_windows(groups, i) if luhn_valid("".join(groups[i:j]))), 0)
            if j:
                yield found[i].start(), found[j - 1].end()
            i = max(j, i + 1)


def _is_phone(candidate: str) -> bool:
    digits = "".join(_DIGITS_RE.findall(candidate))
    if not 7 <= len(digits) <= 15:
        return False
    # At most one "(...)" pair, in that order.
    if candidate.count("(") > 1 or candidate.count(")") > 1:
        return False
    if (candidate.find("(") < 0) != (candidate.find(")") < 0) or "(" in candidate.split(")")[-1]:
        return False
    if candidate.startswith("+"):
        return True  # international: "+" and a plausible digit count is a strong signal
    lengths = [len(g) for g in _DIGITS_RE.findall(candidate)]
    # North American "415-555-0132", "(415) 555 0132", "1 415 555 0132". Dates (4-2-2),
    # times and order numbers fail here; unseparated runs stay unflagged (IDs, timestamps).
    if lengths == [3, 3, 4] or (lengths == [1, 3, 3, 4] and digits[0] == "1"):
        return True
    # National numbers with a trunk "0": "020 7946 0958", "07700 900123".
    return digits[0] == "0" and len(lengths) >= 2 and 9 <= len(digits) <= 12


def _phone_spans(text: str) -> Iterator[tuple[int, int]]:
    for m in _PHONE_RE.finditer(text):
        if not _word_char_at(text, m.end()) and _is_phone(m.group()):
            yield m.span()


# Order matters: an IBAN contains digit runs that could pass Luhn, and card numbers look
# like long phone numbers, so the more specific detector claims the text first.
_DETECTORS: tuple[tuple[str, Callable[[str], Iterator[tuple[int, int]]]], ...] = (
    ("email", lambda text: (m.span() for m in _EMAIL_RE.finditer(text))),
    ("iban", _iban_spans),
    ("card", _card_spans),
    ("phone", _phone_spans),
)


def splice(text: str, edits: Iterable[tuple[int, int, str]]) -> str:
    """``text`` with each (start, end) span, sorted and disjoint, replaced by its string."""
    pieces, last = [], 0
    for start, end, new in edits:
        pieces += [text[last:start], new]
        last = end
    return "".join(pieces) + text[last:]


def check_kinds(kinds: Collection[str]) -> tuple[str, ...]:
    if isinstance(kinds, str) or not isinstance(kinds, Collection):
        raise UserError(f"kinds must be a collection of kinds such as [{kinds!r}], not a string.")
    for kind in kinds:
        if kind not in PII_KINDS:
            raise UserError(
                f"Unknown PII kind {kind!r}.{suggestion(kind, PII_KINDS)} "
                f"Valid kinds: {', '.join(PII_KINDS)}."
            )
    return tuple(k for k in PII_KINDS if k in kinds)


def find_pii(text: str, kinds: Collection[str] = PII_KINDS) -> list[PIIMatch]:
    """Personal data of the given ``kinds`` in ``text``, sorted by position, never overlapping.

    Every detector runs whatever ``kinds`` asks for, so e.g. a card number is never reported
    as a phone number even when cards are not requested.
    """
    wanted = check_kinds(kinds)
    masked, found = text, list[PIIMatch]()
    for kind, detect in _DETECTORS:
        spans = list(detect(masked))
        found += [PIIMatch(kind, start, end) for start, end in spans]
        # Blank out claimed text (NUL is no word, digit or separator) so later detectors skip it.
        masked = splice(masked, ((start, end, "\0" * (end - start)) for start, end in spans))
    return sorted((m for m in found if m.kind in wanted), key=lambda m: m.start)
