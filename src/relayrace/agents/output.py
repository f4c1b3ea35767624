"""Structured output: an agent's final answer validated as a Python type.

``Agent(..., output_type=T)`` takes anything pydantic's ``TypeAdapter`` takes. How the model is
asked for it is the *output mode*:

``"native"``
    the provider constrains the answer to the schema (OpenAI-compatible ``response_format``);
    the answer's text is the JSON.
``"tool"``
    a ``final_result`` tool whose arguments are the answer, and the model must call a tool
    (Anthropic's way; it works with every model that calls tools).
``"prompted"``
    the schema goes in the instructions and the JSON is read from the answer's text, for
    models with neither.

Unless the agent names a mode, its model's ``output_mode`` decides. A value that fails
validation is told to the model, which tries again, ``output_retries`` times at most; then the
run ends with `OutputValidationError`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, TypeAdapter, ValidationError, WithJsonSchema, create_model
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError
from pydantic_core import from_json

from ..core.exceptions import UserError
from ..models.interface import OutputMode, OutputSchema
from .tools import describe_validation_error

__all__ = ["DEFAULT_OUTPUT_RETRIES", "OUTPUT_TOOL", "OutputMode", "OutputSpec",
           "json_schema_type"]

OUTPUT_TOOL = "final_result"
"""The tool an agent in ``"tool"`` output mode calls to give its final answer."""
DEFAULT_OUTPUT_RETRIES = 2
"""How many times a model may give an invalid output again, by default."""

_MODES = ("native", "tool", "prompted")
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```$", re.DOTALL)
_PROMPT = ("Give your final answer as one JSON value matching this JSON schema, and nothing "
           "else (no prose, no code fence):\n{schema}")


def json_schema_type(schema: dict[str, Any]) -> Any:
    """An ``output_type`` for a plain JSON Schema: values are checked with ``jsonschema`` and
    come back as JSON data (dicts, lists, ...); the schema is what the model is shown."""
    import jsonschema  # only a plain JSON Schema output needs it

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise UserError(f"Invalid output schema: {exc.message}.") from exc
    validator = jsonschema.Draft202012Validator(schema)

    def check(value: Any) -> Any:
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
        if errors:
            raise ValueError("; ".join(
                f"{'.'.join(map(str, e.path)) or 'value'}: {e.message}" for e in errors[:5]))
        return value

    return Annotated[Any, WithJsonSchema(schema), AfterValidator(check)]


@dataclass(slots=True, frozen=True)
class Checked:
    """One output checked: the value and its canonical JSON, or what was wrong."""

    value: Any = None
    text: str = ""
    """The value as JSON (what the run's final answer holds)."""
    error: str = ""
    """Why the output is invalid, for the model; empty when it is valid."""


class OutputSpec:
    """An agent's ``output_type``, ready to ask for and validate (built once per agent)."""

    __slots__ = ("_outer", "adapter", "mode", "name", "retries", "schema", "type", "wrapped")

    def __init__(self, output_type: Any, *, mode: OutputMode | None, retries: int,
                 agent: str) -> None:
        if mode is not None and mode not in _MODES:
            raise UserError(f"Agent {agent!r}: output_mode={mode!r}; use 'native', 'tool' or "
                            "'prompted' (or leave it unset for the model's default).")
        if retries < 0:
            raise UserError(f"Agent {agent!r}: output_retries must be >= 0, got {retries}.")
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(output_type)
            inner = adapter.json_schema()
        except (PydanticSchemaGenerationError, PydanticUserError, TypeError) as exc:
            raise UserError(f"Agent {agent!r}: output_type={output_type!r} is not a type "
                            f"pydantic can validate ({exc}); use a BaseModel, a dataclass, a "
                            "TypedDict, a list, a union or a plain type.") from None
        self.type = output_type
        # The schema's name, as providers want it (letters, digits, "_", "-"): the class's.
        title = output_type.__name__ if isinstance(output_type, type) else "output"
        self.name = re.sub(r"[^A-Za-z0-9_-]", "_", title)[:64]
        self.adapter = adapter
        self.mode = mode
        self.retries = retries
        # Providers want an object at the top: other types travel as {"response": value}.
        self.wrapped = inner.get("type") != "object"
        if self.wrapped:
            self._outer: TypeAdapter[Any] = TypeAdapter(
                create_model("Response", response=(output_type, ...)))
            self.schema = self._outer.json_schema()
        else:
            self._outer, self.schema = adapter, inner
        self.schema.pop("title", None)

    def request(self, mode: OutputMode) -> OutputSchema:
        """What a model request carries for this output in ``mode``."""
        return OutputSchema(name=self.name, schema=self.schema, mode=mode,
                            tool_name=OUTPUT_TOOL, wrapper="response" if self.wrapped else None)

    def prompt(self) -> str:
        """The instructions' addition in ``"prompted"`` mode."""
        return _PROMPT.format(schema=json.dumps(self.schema, ensure_ascii=False))

    def check(self, raw: str, *, prompted: bool = False) -> Checked:
        """Validate the model's ``raw`` JSON (a text answer read tolerantly when
        ``prompted``)."""
        text = _json_text(raw) if prompted else raw
        try:
            value = self._outer.validate_json(text)
        except ValidationError as exc:
            return Checked(error=describe_validation_error(exc))
        if self.wrapped:
            value = value.response
        return Checked(value, self.adapter.dump_json(value).decode())

    def partial(self, raw: str, prompted: bool) -> Any:
        """The value ``raw`` holds so far (a prefix of the answer's JSON), or ``None``."""
        text = _json_text(raw, partial=True) if prompted else raw
        try:
            data = from_json(text, allow_partial="trailing-strings")
        except ValueError:
            return None
        validate = self._outer.validate_python
        try:
            value = validate(data, experimental_allow_partial="trailing-strings")
        except ValidationError:
            # A strict native schema makes the model write null for an optional field (the
            # adapter drops those from the complete answer): so far, read without them.
            try:
                value = validate(_without_nulls(data),
                                 experimental_allow_partial="trailing-strings")
            except ValidationError:
                return None
        return value.response if self.wrapped else value

    def parse(self, text: str) -> Any:
        """The value of a run's final answer (the canonical JSON ``check`` made)."""
        return self.adapter.validate_json(text)


def _without_nulls(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _without_nulls(v) for k, v in data.items() if v is not None}
    if isinstance(data, list):
        return [_without_nulls(v) for v in data]
    return data


def _json_text(raw: str, partial: bool = False) -> str:
    """The JSON in a prompted answer: the text itself, in a code fence, or between the first
    opening and last closing bracket."""
    text = raw.strip()
    fenced = _FENCE.match(text)
    if fenced is not None:
        return fenced.group(1)
    if partial and text.startswith("```"):
        return text.partition("\n")[2]
    if text[:1] in "{[" or not text:
        return text
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        return text
    end = max(text.rfind("}"), text.rfind("]"))
    if partial or end < start:
        return text[start:]
    candidate = text[start:end + 1]
    try:
        from_json(candidate)
    except ValueError:
        return text
    return candidate
