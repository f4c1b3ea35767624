"""A judge model scores a case run's answer against a rubric, from 1 to 5, with its reasons.

The judge is any relayrace model, run as a one-agent team with a typed answer. A judge that
fails, takes too long or scores outside 1-5 raises `JudgeError`, which the runner turns
into that case run's error, never the eval run's end.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic import BaseModel, Field

from relayrace import Agent, Model, RelayraceError, Runner

from .cases import Rubric

__all__ = ["JudgeError", "Verdict", "judge"]

_INSTRUCTIONS = (
    "You grade one answer of an AI assistant against a rubric. Score it from 1 to 5: 1 fails "
    "the rubric, 3 meets part of it, 5 meets all of it. Give the score and short reasons that "
    "name what is missing or wrong. Judge only what the rubric asks.")


class Verdict(BaseModel):
    """What the judge answers."""

    score: int = Field(description="1 (fails the rubric) to 5 (meets all of it)")
    reasons: str = Field(description="Why, naming what is missing or wrong")


class JudgeError(RelayraceError):
    """The judge could not score a case run: it failed, timed out, or scored out of range."""


async def judge(model: Model | str, rubric: Rubric, conversation: list[str], answer: Any, *,
                seconds: float = 60.0) -> Verdict:
    """``model``'s verdict on ``answer`` (after the user's ``conversation``) by ``rubric``,
    within ``seconds``."""
    agent: Agent[None, Verdict] = Agent("judge", model=model, instructions=_INSTRUCTIONS,
                                        output_type=Verdict)
    said = "\n".join(f"User: {m}" for m in conversation)
    shown = answer if isinstance(answer, str) else json.dumps(answer)
    prompt = f"Rubric:\n{rubric.criteria}\n\nConversation:\n{said}\n\nAnswer to grade:\n{shown}"
    try:
        result = await asyncio.wait_for(Runner.run(agent, prompt), seconds)
    except TimeoutError:
        raise JudgeError(f"the judge gave no verdict within {seconds:g} s") from None
    except Exception as exc:  # any failure of the judge is this case run's, not the eval's
        raise JudgeError(f"the judge failed: {type(exc).__name__}: {exc}") from None
    verdict = result.final_output
    if not 1 <= verdict.score <= 5:
        raise JudgeError(f"the judge scored {verdict.score}, outside 1-5 (reasons: "
                         f"{verdict.reasons})")
    return verdict
