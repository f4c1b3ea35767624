"""One implementation per orchestration shape: sequence, fan-out, loop and debate, and the
options each front-end chooses (`Shape`); workflow agents, patterns, meta-tools and YAML are
front-ends. Imports `agents`, `core`, the ports and `teams.routing`; never the front-ends.
"""

from .debate import run_debate
from .driver import Composite, Driver, SpeakerTurn
from .fanout import FanOutOnError, fan_out
from .loop import run_loop
from .options import ChildPolicy, Shape, StepFailed
from .sequence import SequenceOnError, steps_as_children, steps_in_session

__all__ = ["ChildPolicy", "Composite", "Driver", "FanOutOnError", "SequenceOnError", "Shape",
           "SpeakerTurn", "StepFailed", "fan_out", "run_debate", "run_loop",
           "steps_as_children", "steps_in_session"]
