"""The test models' token counts: each request counted whole, whichever model served the last."""

from __future__ import annotations

from relayrace.core.messages import Message, ToolCall
from relayrace.models import ModelRequest
from relayrace.testing import FunctionModel, text


def tokens(model: FunctionModel, messages: list[Message]) -> int:
    """The input tokens ``model`` reports for one request of ``messages``."""
    import asyncio

    request = ModelRequest(instructions="Be brief.", messages=messages)
    return asyncio.run(model.request(request)).usage.input_tokens


def fresh(messages: list[Message]) -> int:
    """The count of a request whose list no model has seen (a copy): counted from scratch."""
    return tokens(FunctionModel(lambda r: text("ok"), record=False), list(messages))


def test_models_sharing_one_growing_conversation_each_count_it_whole() -> None:
    first = FunctionModel(lambda r: text("ok"), record=False)
    second = FunctionModel(lambda r: text("ok"), record=False)
    conversation = [Message("user", "x" * 40)]
    assert tokens(first, conversation) == fresh(conversation)
    conversation += [Message("assistant", "", (ToolCall("c1", "transfer_to_b", "{}" * 30),)),
                     Message("tool", "y" * 80, tool_call_id="c1")]
    assert tokens(second, conversation) == fresh(conversation) > tokens(first, conversation[:1])
    conversation.append(Message("user", "z" * 400))
    assert tokens(first, conversation) == fresh(conversation)
    # Another list (a filtered view, another session) is counted from its own start.
    other = [Message("user", "short")]
    assert tokens(second, other) == fresh(other)
    assert tokens(first, conversation) == fresh(conversation)
