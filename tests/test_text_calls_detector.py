"""What the detector of tool calls written as text holds to, for any call and any text: each
written form of any call of an offered tool is found whole, and nothing else is a call; a
streamed answer is held back while it may be calls, and no text is lost by holding it."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from relayrace._engine.textcalls import HeldText, TextCall, find_text_calls, may_be_calls

OFFERED = frozenset({"get_weather", "transfer_to_billing", "submit_report", "final_result"})

_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=12) | \
    st.floats(allow_nan=False, allow_infinity=False)
_json: st.SearchStrategy[Any] = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=3) |
    st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
calls = st.builds(TextCall, st.sampled_from(sorted(OFFERED)),
                  st.dictionaries(st.text(max_size=8), _json, max_size=4))
space = st.text(" \t\n", max_size=3)


def _object(call: TextCall, key: str, args_first: bool) -> dict[str, Any]:
    pairs = [("name", call.name), (key, call.arguments)]
    return dict(reversed(pairs) if args_first else pairs)


@st.composite
def written(draw: st.DrawFn) -> tuple[str, list[TextCall]]:
    """Some calls, written in one of the forms, and the calls."""
    form = draw(st.sampled_from(["fenced", "doubled", "hermes", "bare"]))
    many = form != "doubled" and draw(st.booleans())
    written_calls = draw(st.lists(calls, min_size=1, max_size=3 if many else 1))
    key = draw(st.sampled_from(["arguments", "parameters"]))
    indent = draw(st.none() | st.just(2))
    objects = [_object(c, key, draw(st.booleans())) for c in written_calls]

    def dump(value: Any) -> str:
        return json.dumps(value, indent=indent, ensure_ascii=draw(st.booleans()))

    if form == "hermes":
        body = "\n".join(f"<tool_call>\n{dump(o)}\n</tool_call>" for o in objects)
    else:
        inner = dump(objects) if len(objects) > 1 and draw(st.booleans()) else \
            "\n".join(dump(o) for o in objects)
        if form == "fenced":
            body = f"```{draw(st.sampled_from(['json', '', 'tool_call']))}\n{inner}\n```"
        elif form == "doubled":
            body = "{" + inner + "}"
        else:
            body = inner
    return draw(space) + body + draw(space), written_calls


@given(written())
@example(('```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
          [TextCall("get_weather", {"city": "Paris"})]))
@example(('{{"name": "transfer_to_billing", "arguments": {"reason": "refund"}}}',
          [TextCall("transfer_to_billing", {"reason": "refund"})]))
@example(('{{"name": "submit_report", "arguments": {"gaps": []}}',  # as a 1.5B model wrote it
          [TextCall("submit_report", {"gaps": []})]))
def test_every_written_form_of_offered_calls_is_found_whole(
        case: tuple[str, list[TextCall]]) -> None:
    text, expected = case
    assert list(find_text_calls(text, OFFERED)) == expected


@given(written())
def test_a_call_of_a_tool_not_offered_is_an_answer(case: tuple[str, list[TextCall]]) -> None:
    text, expected = case
    offered = OFFERED - {expected[0].name}
    assert find_text_calls(text, offered) == ()


@given(written(), st.data())
def test_a_written_call_cut_short_is_an_answer(case: tuple[str, list[TextCall]],
                                             data: st.DataObject) -> None:
    text = case[0].strip()
    # A doubled call without its last brace is the call with only its opening one doubled.
    last = len(text) - (2 if text.startswith("{{") else 1)
    cut = data.draw(st.integers(1, last))
    assert find_text_calls(text[:cut], OFFERED) == ()


@given(written(), st.text(min_size=1).filter(lambda t: t.strip() != ""))
def test_prose_around_a_written_call_makes_it_an_answer(case: tuple[str, list[TextCall]],
                                                        prose: str) -> None:
    text = case[0]
    assert find_text_calls(f"Here is the call: {prose} {text}", OFFERED) == ()
    assert find_text_calls(f"{text}\n\nI hope this helps{prose}", OFFERED) == ()


@given(st.text())
@example("[" * 100_000)
@example('{"name": "get_weather", "arguments": ' + "[" * 100_000)
def test_any_text_is_read_without_a_crash_and_only_offered_names_come_out(text: str) -> None:
    found = find_text_calls(text, OFFERED)
    assert all(c.name in OFFERED and isinstance(c.arguments, dict) for c in found)


@given(calls, st.sampled_from(['"Paris"', "[1]", "null", "3"]))
def test_arguments_that_are_no_object_make_no_call(call: TextCall, arguments: str) -> None:
    text = f'{{"name": "{call.name}", "arguments": {arguments}}}'
    assert find_text_calls(text, OFFERED) == ()


@given(written())
def test_nothing_is_a_call_when_nothing_is_offered(case: tuple[str, list[TextCall]]) -> None:
    assert find_text_calls(case[0], frozenset()) == ()


@given(written(), st.data())
def test_a_streamed_written_call_is_held_back_to_its_end(case: tuple[str, list[TextCall]],
                                                         data: st.DataObject) -> None:
    text = case[0]
    assert may_be_calls(text[:data.draw(st.integers(0, len(text)))])


@given(st.text(), st.text())
def test_text_that_opens_no_call_is_never_held(head: str, rest: str) -> None:
    opening = head.lstrip()[:1]
    assert opening in ("", "`", "<", "{", "[") or not may_be_calls(head + rest)


@given(st.lists(st.text(max_size=6), max_size=10))
@example(["```py", "thon\nprint(1)", "\n```"])
@example(['{"', 'verdict": "sunny"}'])
def test_holding_a_stream_loses_no_text_and_lets_go_for_good(deltas: list[str]) -> None:
    held = HeldText()
    passed = [held.feed(d) for d in deltas]
    assert "".join(passed) + held.held == "".join(deltas)
    first = next((i for i, text in enumerate(passed) if text), None)
    if first is not None:  # once let go, every later delta passes as it comes
        assert not held.holding and held.held == "" and passed[first + 1:] == deltas[first + 1:]
