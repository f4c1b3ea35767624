"""Resolving a CLI target (``path/to/team.py:agent``) to the `Agent` it names.

Every command that runs a team goes through :func:`resolve_target`, so new kinds of target
(a YAML team directory picked with ``--agent NAME``) only need a branch there.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from ..agents.agent import Agent
from ..agents.delegation import AgentTool
from ..core._suggest import closest
from ..core.exceptions import UserError
from ..models import Model, infer_model
from ..testing import FunctionModel, ScriptedModel

__all__ = [
    "agent_variables",
    "check_credentials",
    "describe_models",
    "load_module",
    "model_attribute",
    "model_names",
    "resolve_model",
    "resolve_target",
]

_FORM = "path/to/team.py:agent_variable"
_counter = itertools.count(1)


def resolve_target(target: str, agent: str | None = None) -> Agent[Any]:
    """The agent ``target`` names.

    ``target`` is ``path/to/team.py:variable``, or a YAML team (a file or a directory).
    ``agent`` (``--agent``) selects an agent by name instead, within the team the target
    defines; a team with one entry point needs neither (a YAML team's agent nothing refers
    to, a Python file's one agent tree that no other of its agents reaches).
    """
    if Path(target).is_dir() or target.endswith((".yaml", ".yml")):
        return _yaml_agent(Path(target), agent)
    file_part, variable = _split(target)
    path = Path(file_part)
    if not path.is_file():
        raise UserError(f"Target file {file_part!r} does not exist (expected {_FORM}).")
    if path.suffix != ".py":
        raise UserError(f"Target file {file_part!r} is not a Python file (expected {_FORM}).")
    module = load_module(path)
    agents = agent_variables(module)
    if variable is None and agent is None:
        entries = _entry_points(agents)
        if len(entries) == 1:
            return entries[0]
        raise UserError(
            f"Target {target!r} names no agent and has {len(entries) or 'no'} entry points; use "
            f"{file_part}:VARIABLE with one of: {_names(agents)}."
        )
    found: Agent[Any] | None = None
    if variable is not None:
        found = _variable(module, path, variable, agents)
    if agent is not None:
        found = _by_name(found, agents, agent, path)
    assert found is not None
    return found


def resolve_model(spec: str) -> Model | str:
    """The model ``spec`` names: ``provider:model`` (checked, and kept as the string it is, so
    it is shown as given), ``file.py:VARIABLE`` holding a Model, or ``scripted:FILE.yaml``, a
    scripted model's answers (`relayrace.config.load_script`)."""
    if spec.startswith("scripted:"):
        from ..config import load_script

        return load_script(spec.removeprefix("scripted:"))
    file_part, _, variable = spec.rpartition(":")
    if not file_part.endswith(".py"):
        infer_model(spec)
        return spec
    module, value = model_attribute(file_part, variable)
    if not isinstance(value, Model):
        raise UserError(f"{spec} is {_describe(value)}, not a Model. {model_names(module)}")
    return value


def model_attribute(file_part: str, name: str) -> tuple[ModuleType, Any]:
    """The file ``file_part`` of a ``--model file.py:NAME``, loaded, and its ``name``.

    Raises ``UserError`` when the file does not exist or has no ``name``, naming the Model
    objects it has.
    """
    path = Path(file_part)
    if not path.is_file():
        raise UserError(f"Model file {file_part!r} does not exist.")
    module = load_module(path)
    if not name:
        raise UserError(f"--model {file_part}: names no variable; use {file_part}:NAME. "
                        f"{model_names(module)}")
    if not hasattr(module, name):
        raise UserError(f"{path.name} has no attribute {name!r}"
                        f"{_did_you_mean(name, _models_in(module))} {model_names(module)}")
    return module, getattr(module, name)


def model_names(module: ModuleType) -> str:
    """Which variables of a loaded ``--model`` file hold a Model, as a sentence."""
    names = _models_in(module)
    where = Path(module.__file__ or "").name
    return (f"Model objects in {where}: {', '.join(names)}." if names else
            f"{where} defines no Model object at its top level.")


def _models_in(module: ModuleType) -> list[str]:
    return [k for k, v in vars(module).items() if isinstance(v, Model) and not k.startswith("_")]


def describe_models(agent: Agent[Any], *, model: Model | str | None = None) -> str:
    """One line naming the models ``agent``'s team runs on, for a run's header.

    ``model`` overrides every agent's, as ``Runner.run``'s does. E.g. ``model
    openai:gpt-4o-mini``; a scripted test model is said to be one, with how to use a real one.
    """
    used = _models(agent, model)
    if not used:
        return "model: none (give the agents a model, or pass --model provider:model)"
    if len(used) == 1:
        line = f"model {next(iter(used))}"
    else:
        line = "models " + ", ".join(f"{label} ({', '.join(agents)})"
                                     for label, (_, agents) in used.items())
    if all(isinstance(m, ScriptedModel | FunctionModel) for m, _ in used.values()):
        line += (" · a scripted offline model (no API key, no network): give --model "
                 "provider:model and its key for a real one")
    return line


def check_credentials(agent: Agent[Any], *, model: Model | str | None = None) -> None:
    """Raise ``UserError`` if a model ``agent``'s team runs on has no API key.

    So a caller can check before it stores anything; ``model`` as in ``describe_models``.
    """
    for resolved, _ in _models(agent, model).values():
        _check_credentials(resolved)


def _models(
    agent: Agent[Any], model: Model | str | None
) -> dict[str, tuple[Model, list[str]]]:
    """The models the team uses, by label, with the agents using each."""
    used: dict[str, tuple[Model, list[str]]] = {}
    for member in _team(agent):
        spec = model if model is not None else member.model
        if spec is None:
            continue  # a workflow, or an agent the run itself reports as having no model
        resolved = infer_model(spec)
        # A "provider:model" string as given: an ollama model is served by the openai adapter.
        label = spec if isinstance(spec, str) else resolved.name
        used.setdefault(label, (resolved, []))[1].append(member.name)
    return used


def _entry_points(agents: dict[str, Agent[Any]]) -> list[Agent[Any]]:
    """The agents a run of the file would start with: the roots of its agent variables that
    no other of them reaches (by handoff, delegation or as a specialist)."""
    roots = list({id(a.root): a.root for a in agents.values()}.values())
    reached = {id(m) for r in roots for m in _team(r) if m is not r}
    return [r for r in roots if id(r) not in reached]


def _team(agent: Agent[Any]) -> list[Agent[Any]]:
    """Every agent a run of ``agent`` may ask a model: its tree, specialists and agent tools."""
    found: dict[int, Agent[Any]] = {}
    todo = [agent.root]
    while todo:
        member = todo.pop(0)
        if id(member) in found:
            continue
        found[id(member)] = member
        todo.extend(h.agent for h in member.handoffs)
        todo.extend(member.specialists)
        todo.extend(t.agent for t in member.tools if isinstance(t, AgentTool))
    return list(found.values())


def _check_credentials(model: Model) -> None:
    """Raise ``UserError`` now if a provider ``model`` has no API key.

    The provider modules are looked up, not imported: a model of theirs exists only if they
    were, and importing an SDK for nothing would slow every offline run down.
    """
    openai_models = sys.modules.get("relayrace.models.openai")
    if openai_models is not None and isinstance(model, openai_models.OpenAIChatModel):
        model.client  # noqa: B018 - built without a network; raises UserError without a key
    anthropic_models = sys.modules.get("relayrace.models.anthropic")
    if anthropic_models is not None and isinstance(model, anthropic_models.AnthropicModel):
        client = model.client  # built without a network
        if client.api_key is None and client.auth_token is None:
            raise UserError(f"{model.name} needs an API key: set ANTHROPIC_API_KEY.")


def _yaml_agent(path: Path, agent: str | None) -> Agent[Any]:
    """The agent ``agent`` of the YAML team at ``path`` (a directory or one file)."""
    from ..config import load_team

    if not path.exists():
        raise UserError(f"Team path {str(path)!r} does not exist.")
    team = load_team(path)
    if agent is None and len(team.entry_points) == 1:
        agent = team.entry_points[0]  # the one agent nothing else refers to: what is run
    if agent is None:
        raise UserError(f"{path} is a YAML team with several entry points; pick the agent to "
                        f"run with --agent NAME, one of: "
                        f"{', '.join(team.entry_points or list(team))}.")
    if agent not in team:
        raise UserError(f"The team at {path} has no agent {agent!r}{_did_you_mean(agent, team)}"
                        f" Agents: {', '.join(team)}.")
    return team[agent]


def _split(target: str) -> tuple[str, str | None]:
    """``("team.py", "triage")`` from ``team.py:triage``; a drive letter is not a separator."""
    head, sep, tail = target.rpartition(":")
    if not sep or not head or "/" in tail or "\\" in tail:
        return target, None
    if not tail:
        return head, None
    return head, tail


def load_module(path: Path) -> ModuleType:
    """Import the file at ``path`` as a fresh module (its directory on ``sys.path`` meanwhile).

    Each call gets a new module name, so module-level objects (scripted test models, counters)
    are created anew and never shared between loads.
    """
    path = path.resolve()
    name = f"_relayrace_target_{path.stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"Cannot load {str(path)!r} as a Python module.")
    module = importlib.util.module_from_spec(spec)
    directory = str(path.parent)
    added = directory not in sys.path
    if added:
        sys.path.insert(0, directory)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except UserError:
        sys.modules.pop(name, None)
        raise
    except Exception as exc:
        sys.modules.pop(name, None)
        raise UserError(f"Error while loading {path.name}: {type(exc).__name__}: {exc}") from exc
    finally:
        if added:
            try:
                sys.path.remove(directory)
            except ValueError:
                pass
    return module


def agent_variables(module: ModuleType) -> dict[str, Agent[Any]]:
    """The module's top-level variables that hold an `Agent`, in definition order."""
    return {
        k: v for k, v in vars(module).items() if isinstance(v, Agent) and not k.startswith("_")
    }


def _names(agents: dict[str, Agent[Any]]) -> str:
    return ", ".join(agents) if agents else "(none: the file defines no Agent variables)"


def _variable(
    module: ModuleType, path: Path, variable: str, agents: dict[str, Agent[Any]]
) -> Agent[Any]:
    if not hasattr(module, variable):
        raise UserError(
            f"{path.name} has no variable {variable!r}{_did_you_mean(variable, agents)} Agent "
            f"variables in {path.name}: {_names(agents)}."
        )
    value = getattr(module, variable)
    if not isinstance(value, Agent):
        raise UserError(
            f"{path.name}:{variable} is {_describe(value)}, not an Agent. Agent variables in "
            f"{path.name}: {_names(agents)}."
        )
    return value


def _by_name(
    found: Agent[Any] | None, agents: dict[str, Agent[Any]], name: str, path: Path
) -> Agent[Any]:
    candidates = [found] if found is not None else list(agents.values())
    for candidate in candidates:
        match = candidate.find_agent(name)
        if match is not None:
            return match
    known = sorted({a.name for c in candidates for a in c.root.walk()})
    raise UserError(f"No agent named {name!r} in {path.name}{_did_you_mean(name, known)} "
                    f"Agents: {', '.join(known) or 'none'}.")


def _did_you_mean(name: str, names: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the name most like ``name``, else ``"."``."""
    close = closest(name, names)
    return f"; did you mean {close!r}?" if close else "."


def _describe(value: object) -> str:
    kind = type(value).__name__
    if isinstance(value, ModuleType):
        return f"a module ({value.__name__})"
    if isinstance(value, type):
        return f"a class ({value.__name__})"
    if callable(value):
        return f"a {kind} ({getattr(value, '__name__', '?')})"
    text = repr(value)
    if len(text) > 40:
        text = text[:39] + "…"
    article = "an" if kind[:1].lower() in "aeiou" else "a"
    return f"{article} {kind} ({text})"
