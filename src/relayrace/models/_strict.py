"""Tool schemas made fit for OpenAI's strict mode, and the model's arguments mapped back.

Strict mode wants every object closed (``additionalProperties: false``) with all its
properties required, and no ``default``. An optional property therefore becomes required but
nullable, and a ``null`` the model sends for it is dropped again before the tool sees the
arguments, so the tool's own default applies. (The openai SDK's helper for this works on
pydantic models only and leaves optional properties non-nullable, so it does not fit here.)
"""

from __future__ import annotations

import copy
import json
from typing import Any

from pydantic_core import from_json

__all__ = ["drop_added_nulls", "strict_schema"]


class _Unfit(Exception):
    """The schema uses something strict mode cannot express (an open map, an outside $ref)."""


# Expanding a $ref that has keywords beside it copies its definition in place; a definition
# that refers to itself that way would expand forever, so nesting stops here.
_MAX_DEPTH = 32


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """A strict-compatible copy of a tool's parameter schema; ``None`` if strict mode cannot
    express it (an object open to any keys, a ``$ref`` outside the schema), so the tool is
    offered without ``strict``. The schema passed in is not changed."""
    root = copy.deepcopy(schema)
    try:
        _make_strict(root, root)
    except _Unfit:
        return None
    return root


def _make_strict(node: dict[str, Any], root: dict[str, Any], depth: int = 0) -> None:
    if depth > _MAX_DEPTH:
        raise _Unfit
    depth += 1
    for key in ("$defs", "definitions"):
        defs = node.get(key)
        if isinstance(defs, dict):
            for sub in defs.values():
                if isinstance(sub, dict):
                    _make_strict(sub, root, depth)
    ref = node.get("$ref")
    if ref is not None and len(node) > 1:
        # Strict mode allows no keywords beside a $ref (pydantic adds a description there).
        resolved = copy.deepcopy(_resolve(ref, root))  # before the edit: it may be inside
        del node["$ref"]
        node.update({**resolved, **node})
    node.pop("default", None)
    if "oneOf" in node:  # strict mode knows anyOf only; for generation they say the same
        node["anyOf"] = node.pop("oneOf")
    properties = node.get("properties")
    if node.get("type") == "object" or isinstance(properties, dict):
        if node.get("additionalProperties") not in (None, False):
            raise _Unfit
        properties = properties if isinstance(properties, dict) else {}
        required = set(node.get("required", ()))
        node["properties"], node["required"] = properties, list(properties)
        node["additionalProperties"] = False
        for name, sub in list(properties.items()):
            if isinstance(sub, dict):
                _make_strict(sub, root, depth)
                if name not in required:
                    properties[name] = _nullable(sub)
    items = node.get("items")
    if isinstance(items, dict):
        _make_strict(items, root, depth)
    for key in ("anyOf", "allOf"):
        for sub in node.get(key, ()):
            if isinstance(sub, dict):
                _make_strict(sub, root, depth)


def _resolve(ref: object, root: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(ref, str) or not ref.startswith("#/"):
        raise _Unfit
    target: Any = root
    for part in ref[2:].split("/"):
        if not isinstance(target, dict) or part not in target:
            raise _Unfit
        target = target[part]
    if not isinstance(target, dict):
        raise _Unfit
    return target


def _accepts_null(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "null" or (isinstance(kind, list) and "null" in kind) or any(
        isinstance(v, dict) and _accepts_null(v) for v in schema.get("anyOf", ()))


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if _accepts_null(schema):
        return schema
    kind = schema.get("type")
    if isinstance(kind, str) and "enum" not in schema and "const" not in schema:
        return {**schema, "type": [kind, "null"]}
    if isinstance(schema.get("anyOf"), list):
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def drop_added_nulls(arguments: str, schema: dict[str, Any]) -> str:
    """``arguments`` without the ``null`` values strict mode made the model send for optional
    properties that do not accept ``null`` in the tool's own ``schema``; text that is not a
    JSON object, or that has no such value, is returned unchanged."""
    try:
        value = from_json(arguments)
    except ValueError:
        return arguments
    if not isinstance(value, dict) or not _drop(value, schema, schema):
        return arguments
    return json.dumps(value, ensure_ascii=False)


def _drop(value: object, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    """Drop the added nulls in ``value`` (in place) by ``schema``; whether any was dropped."""
    if "$ref" in schema:
        try:
            schema = {**_resolve(schema["$ref"], root), **schema}
        except _Unfit:
            return False
    dropped = False
    properties = schema.get("properties")
    if isinstance(value, dict) and isinstance(properties, dict):
        required = set(schema.get("required", ()))
        for name in list(value):
            sub = properties.get(name)
            if not isinstance(sub, dict):
                continue
            if value[name] is None and name not in required and not _accepts_null(sub):
                del value[name]
                dropped = True
            else:
                dropped = _drop(value[name], sub, root) or dropped
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, dict):
        for item in value:
            dropped = _drop(item, items, root) or dropped
    return dropped
