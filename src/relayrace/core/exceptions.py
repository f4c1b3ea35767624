"""Errors raised by relayrace.

Every error derives from one root, so ``except RelayraceError`` catches them all::

    RelayraceError
    ├── UserError                     the program using relayrace is wrong (config, API misuse)
    │   ├── ConfigError               a team definition (YAML, agent tree) is invalid
    │   │   └── CircularReferenceError    agents reference each other in a cycle
    │   └── AnswerError               a resume's answers do not fit the questions it waits for
    ├── ModelBehaviorError            the model produced something the run cannot continue from
    │   ├── ModelRefused              the model declined to answer (a FallbackModel's failure)
    │   └── OutputValidationError     no valid structured output after ``output_retries`` tries
    ├── ModelProviderError            the provider failed (HTTP error, timeout) after its retries
    │   ├── ModelTimeout              the request timed out or passed its deadline
    │   └── AllModelsFailed           every model of a FallbackModel failed; ``failures`` says how
    ├── MaxTurnsExceeded              the run used more model turns than allowed
    ├── RunTimeout                    an agent's run took longer than its ``timeout``
    ├── UsageLimitExceeded            a UsageLimits budget was used up
    ├── HandoffError                  control cannot move between agents as asked
    │   ├── MaxHandoffsExceeded       more handoffs than ``max_handoffs``
    │   └── HandoffLoopError          agents pass control back and forth without doing work
    ├── GuardrailTripwireTriggered    a guardrail wrapped in ``Tripwire`` blocked something
    ├── MCPServerError                an MCP server could not be started or reached, or broke a call
    ├── DurableRunError               a durable run cannot be submitted, found or waited for
    ├── PatternStepFailed             a fan-out subtask (``on_error="cancel"``), pipeline stage or
    │                                 chain link (``on_error="fail"``) failed
    └── SessionError              a session's store refused a run or a write (``retryable``)
        ├── SessionInUseError     another run holds the session's lease
        ├── SessionConflictError  another writer appended since this one last read the log
        ├── SessionStoreBusy      the store stayed locked longer than its busy timeout
        └── SessionStoreUnavailable  the store (a database server) could not be reached

Mistakes the *model* makes (bad tool arguments, unknown tools or agents, forbidden transfers,
a crashing tool) are not errors: the model is told in a tool result and the run goes on.
Errors never log themselves; they carry what happened and what would be right.
"""

from __future__ import annotations

__all__ = [
    "AllModelsFailed",
    "AnswerError",
    "CircularReferenceError",
    "ConfigError",
    "DurableRunError",
    "GuardrailTripwireTriggered",
    "HandoffError",
    "HandoffLoopError",
    "MCPServerError",
    "MaxHandoffsExceeded",
    "MaxTurnsExceeded",
    "ModelBehaviorError",
    "ModelProviderError",
    "ModelRefused",
    "ModelTimeout",
    "OutputValidationError",
    "PatternStepFailed",
    "RelayraceError",
    "RunTimeout",
    "SessionConflictError",
    "SessionError",
    "SessionInUseError",
    "SessionStoreBusy",
    "SessionStoreUnavailable",
    "UnknownOptionError",
    "UsageLimitExceeded",
    "UserError",
]


class RelayraceError(Exception):
    """The root of every error relayrace raises."""


class UserError(RelayraceError):
    """The calling program used relayrace wrongly: the message says what to change."""


class UnknownOptionError(UserError, TypeError):
    """A keyword option that the constructor does not take; a ``TypeError`` too, as Python's
    own unknown-keyword error is, and its message lists the options there are."""


class AnswerError(UserError):
    """``Runner.resume`` got answers that do not fit the questions the run waits for: one
    missing (``missing`` lists the ids), an unknown id, or an answer outside a question's
    choices. Nothing was written: resume again with the right answers."""

    def __init__(self, message: str, *, missing: list[str] | None = None) -> None:
        super().__init__(message)
        self.missing = missing or []


class ConfigError(UserError):
    """A team or agent definition is invalid (unknown key, undefined agent, bad value)."""


class CircularReferenceError(ConfigError):
    """Agents reference each other in a cycle; ``cycle`` lists it, first name repeated last."""

    def __init__(self, cycle: list[str]) -> None:
        self.cycle = cycle
        super().__init__("Circular agent reference detected: " + " -> ".join(cycle))


class ModelBehaviorError(RelayraceError):
    """The model answered with something the run cannot continue from (e.g. an empty turn, or
    an answer cut off at its ``max_tokens``)."""


class ModelProviderError(RelayraceError):
    """The model provider failed after its retries: HTTP error, rate limit, timeout, the
    request's deadline, or a reply that was unreadable or cut short."""

    def __init__(self, message: str, *, status_code: int | None = None, provider: str = "") -> None:
        self.status_code = status_code
        self.provider = provider
        super().__init__(message)


class ModelRefused(ModelBehaviorError):
    """The model declined to answer (its provider's refusal signal), and a ``FallbackModel``
    told to move on from refusals had already streamed its text, so could not ask another."""

    def __init__(self, model: str, refusal: str) -> None:
        self.model = model
        self.refusal = refusal
        super().__init__(f"{model} declined to answer: {refusal!r}; rephrase the request or "
                         "ask another model.")


class OutputValidationError(ModelBehaviorError):
    """An agent's model gave no valid structured output within its ``output_retries``:
    ``raw_output`` is what it gave last, ``errors`` what was wrong with it."""

    def __init__(self, agent: str, expected: str, attempts: int, raw_output: str,
                 errors: str) -> None:
        self.agent = agent
        self.raw_output = raw_output
        self.errors = errors
        shown = raw_output if len(raw_output) <= 300 else raw_output[:300] + "..."
        super().__init__(
            f"Agent {agent!r} gave no valid {expected} in {attempts} attempt(s); the last was "
            f"{shown!r}: {errors}. Raise its output_retries, simplify the output type, or use "
            "a model that follows schemas better (output_mode='native' or 'tool').")


class ModelTimeout(ModelProviderError):
    """The model request timed out (after its retries) or passed its ``deadline``."""


class AllModelsFailed(ModelProviderError):
    """Every model of a ``FallbackModel`` failed; ``failures`` pairs each model's name with
    its error (``ModelRefused`` for a refusal), in the order they were asked."""

    def __init__(self, failures: list[tuple[str, Exception]]) -> None:
        self.failures = failures
        lines = "".join(f"\n  - {name}: {type(e).__name__}: {e}" for name, e in failures)
        super().__init__(
            f"All {len(failures)} models failed:{lines}\nFix the failure of one of them, or "
            "add another model to the FallbackModel.")


class MaxTurnsExceeded(RelayraceError):
    """The run reached its turn limit; the session holds every completed step."""

    def __init__(self, max_turns: int, agent: str | None = None) -> None:
        self.max_turns = max_turns
        self.agent = agent
        """The agent whose own ``max_turns`` was reached, or ``None`` for the run's limit."""
        who = "The run" if agent is None else f"Agent {agent!r}"
        super().__init__(
            f"{who} used its {max_turns} model turns without a final answer; "
            "raise max_turns or give the agents a clearer stopping point."
        )


class RunTimeout(RelayraceError):
    """A run took longer than its entry agent's ``timeout``; the session holds what was done."""

    def __init__(self, agent: str, timeout: float) -> None:
        self.agent = agent
        self.timeout = timeout
        super().__init__(f"Agent {agent!r} did not finish within its timeout of {timeout:g} s; "
                         "raise the timeout or narrow the task.")


class UsageLimitExceeded(RelayraceError):
    """A ``UsageLimits`` budget shared by the whole delegation tree was used up."""

    def __init__(self, limit: str, value: int, maximum: int) -> None:
        self.limit = limit
        self.value = value
        self.maximum = maximum
        super().__init__(f"Usage limit {limit}={maximum} reached (would be {value}).")


class HandoffError(RelayraceError):
    """Control cannot move between agents as requested."""


class MaxHandoffsExceeded(HandoffError):
    """More handoffs happened in one run than ``max_handoffs`` allows."""

    def __init__(self, max_handoffs: int) -> None:
        self.max_handoffs = max_handoffs
        super().__init__(
            f"The run made more than {max_handoffs} handoffs; raise max_handoffs "
            "or tighten the agents' instructions on when to transfer."
        )


class HandoffLoopError(HandoffError):
    """Agents handed control back and forth with no work in between (ping-pong)."""

    def __init__(self, hops: list[str]) -> None:
        self.hops = hops
        super().__init__(
            "Handoff loop: " + " -> ".join(hops) + " with no tool call or answer in between; "
            "the agents' instructions disagree on who owns this request."
        )


class GuardrailTripwireTriggered(RelayraceError):
    """A guardrail wrapped in ``relayrace.agents.guardrails.Tripwire`` blocked input or output."""

    def __init__(self, guardrail: str, message: str) -> None:
        self.guardrail = guardrail
        super().__init__(f"Guardrail {guardrail!r} tripped: {message}")


class PatternStepFailed(RelayraceError):
    """A step of a coordination pattern failed and the pattern cannot go on: a
    ``parallel_fan_out`` subtask with ``on_error="cancel"`` (the other subtasks were
    cancelled), a ``pipeline`` stage (the next stage has no input), or a chain link with
    ``on_error="fail"`` (after its retries)."""

    def __init__(self, pattern: str, step: str, error: str) -> None:
        super().__init__(f"{pattern}: {step} failed: {error}")
        self.pattern = pattern
        """The pattern agent's name."""
        self.step = step
        """Which step failed, e.g. ``subtask 2 of 3`` or ``stage 'review'``."""
        self.error = error
        """Why it failed, as its child run reported."""


class SessionError(RelayraceError):
    """A session's store refused a run or a write; nothing of the refused write was stored.

    ``retryable`` says whether the same call can succeed later as it is: the session's log
    is intact and a later run on it continues from what it holds.
    """

    retryable = True

    def __init__(self, session_id: str, message: str) -> None:
        self.session_id = session_id
        """The session concerned."""
        super().__init__(message)


class SessionInUseError(SessionError):
    """Another run holds the session's lease: one run writes to a session at a time."""

    def __init__(self, session_id: str, *, waited: float | None = None,
                 holder: str = "") -> None:
        self.waited = waited
        """How long the run waited for the lease (``None``: it did not wait)."""
        self.holder = holder
        """Who holds the lease: process, host, since when and when it lapses (if known)."""
        how = (f"it stayed busy for the {waited:g} s this run waited" if waited
               else "this run did not wait")
        held = f"; its lease is {holder}" if holder else ""
        super().__init__(session_id, (
            f"Session {session_id!r} has a run in progress ({how}{held}). Let that run end "
            "first, or queue this one with Runner.run(..., wait_for_session=SECONDS)."))


class SessionConflictError(SessionError):
    """Another writer appended to the session since this session object last read its log."""

    def __init__(self, session_id: str, *, expected: int, found: int) -> None:
        self.expected = expected
        """How many events this writer expected the log to hold before its batch."""
        self.found = found
        """How many it held."""
        super().__init__(session_id, (
            f"Session {session_id!r} was appended to by another writer: this one expected "
            f"{expected} events before its batch, the log holds {found}. Nothing of the batch "
            "was written. Run again on the session (a new run reads the log afresh), and let "
            "one run at a time write to a session (Runner holds a lease for that)."))


class SessionStoreBusy(SessionError):
    """The session's store stayed busy longer than the write would wait: locked by another
    writer past its ``busy_timeout``, or (PostgreSQL) every connection of the process's pool
    in use past its ``pool_timeout``. Nothing of the write was stored."""

    def __init__(self, session_id: str, *, timeout: float, store: str,
                 setting: str = "busy_timeout", waiting: str = "stayed locked by another writer",
                 also: str = "") -> None:
        self.timeout = timeout
        """The wait that ran out, in seconds."""
        self.setting = setting
        """The store's setting that bounds that wait (``busy_timeout``, ``pool_timeout``)."""
        named = "busy timeout" if setting == "busy_timeout" else setting
        super().__init__(session_id, (
            f"Session {session_id!r}: {store} {waiting} for the {timeout:g} s {named}. Nothing "
            f"of this write was stored; run again on the session later, or raise the store's "
            f"{setting}{also}."))


class SessionStoreUnavailable(SessionError):
    """The session's store could not be reached (its database server was down, or dropped the
    connection mid-write and again on a fresh one), or it refused the connection (no such
    database, user or password: then not ``retryable``). Nothing of the write was stored (a
    transaction the server did not confirm is rolled back)."""

    def __init__(self, session_id: str, *, store: str, reason: str,
                 refused: bool = False) -> None:
        if refused:  # reached, and it said no: trying again changes nothing
            self.retryable = False
            super().__init__(session_id, (
                f"Session {session_id!r}: {store} refused the connection ({reason}). Nothing "
                "of this write was stored; create the database, or fix the user, password or "
                "database name in the URL, then run again on the session."))
            return
        super().__init__(session_id, (
            f"Session {session_id!r}: {store} could not be reached ({reason}). Nothing of this "
            "write was stored; check that the database is up and the URL is right, then run "
            "again on the session."))


class DurableRunError(RelayraceError):
    """A durable run (``relayrace.durable``) cannot be submitted, found or waited for: the
    database cannot be reached, no worker runs its team in this process, its run id names no
    run, its workflow failed, or a wait for its result timed out. ``run_id`` names the run,
    when there is one."""

    def __init__(self, message: str, *, run_id: str | None = None) -> None:
        super().__init__(f"Durable run {run_id!r}: {message}" if run_id else message)
        self.run_id = run_id


class MCPServerError(RelayraceError):
    """An MCP server could not be started or reached, or a call to it broke off (the server
    died, the connection dropped, no answer within the timeout). A failing call reaches the
    model as its tool's error; a server whose tools cannot be listed fails the run."""
