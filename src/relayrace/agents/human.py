"""`human(...)`: a person as a handoff target (a support desk's "talk to a human").

A transfer to a human agent stops the run with a pending takeover (``PendingRun.takeover``)
instead of calling a model. The person's replies join the conversation as that agent's
messages (``Runner.resume(pending, reply=...)``), and the user's next messages go to the
person, until the person hands the conversation back to an agent (``hand_back=``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..core.exceptions import UserError
from .agent import Agent

__all__ = ["HumanAgent", "human"]


class HumanAgent(Agent[Any, str]):
    """A person in the team: a handoff target whose turns a person takes.

    It calls no model and has no tools. It keeps the conversation over the user's next turns
    (it is ``sticky``) until the person hands it back.
    """

    is_human: ClassVar[bool] = True

    def __init__(self, name: str, *, description: str = "") -> None:
        super().__init__(name, instructions="", description=description, sticky=True)

    def clone(self, **changes: Any) -> HumanAgent:
        """A copy, still a person's: only ``name`` and ``description`` may change (a person
        has no model, tools or transfers of their own, so a swarm's ``transfer_policy`` for
        its members has nothing to apply to)."""
        unknown = sorted(set(changes) - {"name", "description", "transfer_policy"})
        if unknown:
            raise UserError(f"Human agent {self.name!r} cannot take {', '.join(unknown)}: a "
                            "person has no model, tools or sub-agents; only name and "
                            "description change.")
        return HumanAgent(changes.get("name", self.name),
                          description=changes.get("description", self.description))


def human(name: str, *, description: str = "") -> HumanAgent:
    """A person as a handoff target: list it in an agent's ``sub_agents`` and the model
    transfers to it with ``transfer_to_<name>`` like to any agent. ``description`` tells the
    model when to (e.g. "a person at the support desk, for refunds over 100 EUR")."""
    return HumanAgent(name, description=description)
