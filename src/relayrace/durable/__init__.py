"""Durable, distributed runs on DBOS: a queue of runs, workers, and steps that happen once.
Entry points: they may import the runner, the engine, declarations, ports and `core`.
Needs ``relayrace[durable]``.
"""

from .results import DurableResult, RunInfo, RunStatus, SubmittedRun
from .runs import DurableRunner

__all__ = ["DurableResult", "DurableRunner", "RunInfo", "RunStatus", "SubmittedRun"]
