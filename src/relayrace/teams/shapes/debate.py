"""The debate shape: participants answer one question over rounds, each seeing the others'
answers, until their final answers agree. Each round is a fan-out that collects (a participant
that failed cannot agree that round). Front-end: the ``debate_ensemble`` meta-tool.

Consensus is judged on *normalized final answers*: every participant ends with a line
``FINAL ANSWER: ...``; answers are compared after case folding and stripping punctuation,
articles and extra spaces. With a ``judge``, that agent decides instead.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...agents.delegation import ChildResult
from ...agents.tools import ToolRetry, parse_arguments
from .fanout import fan_out
from .options import ChildPolicy

if TYPE_CHECKING:
    from ...agents.agent import Agent
    from ...agents.context import RunContext

__all__ = ["DEBATE_SUFFIX", "final_answer", "normalize_answer", "run_debate"]

_FINAL = re.compile(r"final\s+answer\s*[:\-–—]\s*(.+)", re.IGNORECASE)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation + "“”‘’*`")
DEBATE_SUFFIX = ("You are one participant in a debate. Answer the question with your reasoning, "
                 "then end with one line: FINAL ANSWER: <your answer in a few words>.")


def final_answer(text: str) -> str:
    """The answer a debate participant committed to: its last ``FINAL ANSWER:`` line."""
    found = _FINAL.findall(text)
    if found:
        return str(found[-1]).strip()
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def normalize_answer(answer: str) -> str:
    """An answer reduced for comparison: case, punctuation, articles and spacing removed."""
    return " ".join(_ARTICLES.sub(" ", answer.casefold().translate(_PUNCT)).split())


async def run_debate(ctx: RunContext[Any], participants: Mapping[str, Agent[Any]],
                     names: Sequence[str], question: str, *, rounds: int,
                     children: ChildPolicy, judge: Agent[Any] | None) -> str:
    """Debate ``question`` among ``names`` (keys of ``participants``) for at most ``rounds``
    rounds; the consensus with a confidence, or the best-supported answer and the dissent."""
    answers: dict[str, str] = {}

    async def speak(name: str, prompt: str, r: int) -> ChildResult:
        # One child session per participant and round: a resume finds each again.
        return await children.run(ctx, participants[name], prompt, suffix=DEBATE_SUFFIX,
                                  key=f"{name}.round{r}")

    for r in range(1, rounds + 1):
        prompts = {n: question if r == 1 else _rebuttal(r, n, question, answers) for n in names}
        said = await fan_out([speak(n, prompts[n], r) for n in names], on_error="collect",
                             limit=children.max_concurrency)
        failed = False
        for n, res in zip(names, said, strict=True):
            answers[n] = final_answer(res.output) if res.ok else f"(failed: {res.error})"
            failed = failed or not res.ok
        if failed:  # a participant that failed cannot agree: no consensus this round
            continue
        agreed, answer = await _consensus(ctx, question, answers, judge)
        if agreed:
            return (f"CONSENSUS after {r} round(s): {answer}\n"
                    f"CONFIDENCE: high — all {len(names)} participants agree.")
    return _no_consensus(rounds, answers)


def _rebuttal(r: int, name: str, question: str, answers: Mapping[str, str]) -> str:
    others = "\n".join(f"- {n}: {a}" for n, a in answers.items() if n != name)
    return (f"Round {r}. The question: {question}\nThe other participants answered:\n"
            f"{others}\nYour previous answer: {answers.get(name, '')}\nReconsider in light "
            "of theirs; keep your answer if you still hold it, change it if they convinced "
            "you. End with FINAL ANSWER: ...")

async def _consensus(ctx: RunContext[Any], question: str, answers: Mapping[str, str],
                     judge: Agent[Any] | None) -> tuple[bool, str]:
    """Whether the answers agree: ``judge`` says so, or else their normalized forms match."""
    if judge is not None:
        listing = "\n".join(f"- {n}: {a}" for n, a in answers.items())
        res = await ChildPolicy().run(ctx, judge, (
            f"Question: {question}\nAnswers:\n{listing}\nDo all answers agree in substance? "
            'Reply with JSON only: {"consensus": true|false, "answer": "<the agreed answer>"}'))
        verdict = _json_object(res.output) if res.ok else None
        if verdict is not None and isinstance(verdict.get("consensus"), bool):
            return verdict["consensus"], str(verdict.get("answer") or "")
    normalized = {normalize_answer(a) for a in answers.values()}
    agreed = len(normalized) == 1 and "" not in normalized
    return agreed, next(iter(answers.values())) if agreed else ""

def _no_consensus(rounds: int, answers: Mapping[str, str]) -> str:
    valid = {n: a for n, a in answers.items() if not a.startswith("(failed:")}
    if not valid:
        failures = "\n".join(f"- {n}: {a}" for n, a in answers.items())
        return f"NO CONSENSUS: every participant failed.\nCONFIDENCE: low\n{failures}"
    counts = Counter(normalize_answer(a) for a in valid.values())
    top, votes = counts.most_common(1)[0]
    majority = next(a for a in valid.values() if normalize_answer(a) == top)
    share = votes / len(answers)
    level = "medium" if share > 0.5 else "low"
    dissent = "\n".join(f"- {n}: {a}" for n, a in answers.items()
                        if normalize_answer(a) != top)
    return (f"NO CONSENSUS after {rounds} round(s). Best-supported answer: {majority} "
            f"({votes}/{len(answers)} participants)\nCONFIDENCE: {level}\nDISSENT:\n{dissent}")


def _json_object(text: str) -> dict[str, Any] | None:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:  # the tool parser: model text of any depth or number size is an object or nothing
        return parse_arguments(text[start : end + 1], "judge")
    except ToolRetry:
        return None
