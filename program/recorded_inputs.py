"""A registration's inputs and the mocks' answer, moved between Python and the request's protobuf ``Struct`` directly
where they are plain values, for the offline plan.

Pulumi's own reader and writer (``pulumi.runtime.rpc.deserialize_properties``, ``serialize_properties``) handle
secrets, assets, resource references, unknowns and Outputs, and the mock engine ran them three times for every
resource: most of a sweep's plan went there. Kubernetes objects and most AWS inputs hold none of those, so they
are read straight into dicts, lists, strings, numbers and booleans, and written straight back; any value that
carries Pulumi's special signature, an unknown, a null or anything else goes to Pulumi's own code, as before.
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import struct_pb2
from pulumi.runtime import rpc


class _Special(Exception):
    """A value only Pulumi's reader knows how to read."""


def _value(v: struct_pb2.Value) -> Any:
    kind = v.WhichOneof("kind")
    if kind == "string_value":
        if v.string_value == rpc.UNKNOWN:
            raise _Special
        return v.string_value
    if kind == "struct_value":
        fields = v.struct_value.fields
        if rpc._special_sig_key in fields:  # noqa: SLF001 - the signature Pulumi's wire format marks values with
            raise _Special
        return {k: _value(x) for k, x in fields.items()}
    if kind == "list_value":
        return [_value(x) for x in v.list_value.values]
    if kind == "number_value":
        return v.number_value
    if kind == "bool_value":
        return v.bool_value
    raise _Special  # null: Pulumi's reader drops it


def read_struct(struct: struct_pb2.Struct) -> tuple[Any, bool]:
    """(``struct`` as ``rpc.deserialize_properties(struct)`` reads it, whether it held only plain values: then it is
    also what ``recorded_inputs`` gives)."""
    try:
        return _fields(struct), True
    except _Special:
        return rpc.deserialize_properties(struct), False


def _fields(struct: struct_pb2.Struct) -> dict[str, Any]:
    if rpc._special_sig_key in struct.fields:  # noqa: SLF001
        raise _Special
    return {k: _value(x) for k, x in struct.fields.items()}


def write_struct(state: dict[str, Any]) -> struct_pb2.Struct | None:
    """``state`` as a ``Struct``, where it holds only dicts keyed by text, lists, text, numbers and booleans (then
    it is what ``rpc.serialize_properties`` would write); None where anything else is in it."""
    todo = [state]
    while todo:
        value = todo.pop()
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                return None
            todo += value.values()
        elif isinstance(value, list):
            todo += value
        elif not isinstance(value, (str, int, float)):  # bool is an int
            return None
    struct = struct_pb2.Struct()
    struct.update(state)
    return struct


def plain(value: Any) -> Any:
    """Inputs as JSON-friendly values (unknowns and secrets become markers)."""
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


def recorded_inputs(struct: struct_pb2.Struct) -> Any:
    """``struct`` as ``plain(rpc.deserialize_properties(struct))`` reads it, faster where nothing in it is special."""
    try:
        return _fields(struct)
    except _Special:
        return plain(rpc.deserialize_properties(struct))
