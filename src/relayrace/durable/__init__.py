"""Durable, distributed runs on DBOS: a queue of runs, workers, and steps that happen once.
Entry points: they may import the runner, the engine, declarations, ports and `core`.
Needs ``relayrace[durable]``.
"""

from .runs import DurableResult, DurableRunner, RunInfo, RunStatus, SubmittedRun

__all__ = ["DurableResult", "DurableRunner", "RunInfo", "RunStatus", "SubmittedRun"]
