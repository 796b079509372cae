"""Reading raw rows: fields that are JSON text in one source and decoded in another, tool lists in any
source's dialect (xLAM's ``{pname: {type: "str, optional"}}``, ToolACE's ``"type": "dict"``, OpenAI's
``{"type": "function", "function": ...}``) normalised to ``{name, description, parameters: JSON Schema}``,
and call lists. Every problem raises ``MalformedRow`` with a short reason.
"""

from __future__ import annotations

import json
import re

from toolcall_repro.data.schema import MalformedRow, validate_calls

# --------------------------------------------------------------------------------------------------------
_TYPE_ALIASES = {
    "str": "string",
    "string": "string",
    "int": "integer",
    "integer": "integer",
    "float": "number",
    "number": "number",
    "double": "number",
    "bool": "boolean",
    "boolean": "boolean",
    "dict": "object",
    "object": "object",
    "list": "array",
    "array": "array",
    "tuple": "array",
}


def _json_type(type_text: object) -> str | None:
    """Map a source's type word ("str", "List[int]", "dict", "float") onto a JSON-Schema type, or None."""
    if not isinstance(type_text, str):
        return None
    base = re.split(r"[\[,(\s]", type_text.strip().lower(), maxsplit=1)[0]
    return _TYPE_ALIASES.get(base)


def _schema_node(node: object) -> dict:
    """Normalise a (possibly non-standard) schema node: "dict" -> "object", "float" -> "number", ..."""
    if not isinstance(node, dict):
        return {}
    out = dict(node)
    if "type" in out:
        mapped = _json_type(out["type"])
        if mapped is None:
            out.pop("type")
        else:
            out["type"] = mapped
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _schema_node(v) for k, v in out["properties"].items()}
    if "items" in out:
        out["items"] = _schema_node(out["items"])
    return out


def _xlam_parameters(params: dict) -> dict:
    """xLAM's ``{pname: {type, description, default}}`` -> a JSON-Schema object; ", optional" or a
    default makes a parameter optional."""
    properties, required = {}, []
    for pname, spec in params.items():
        if not isinstance(spec, dict):
            raise MalformedRow("bad_tool", f"parameter {pname!r} is not an object")
        prop = {"description": str(spec.get("description", ""))}
        mapped = _json_type(spec.get("type"))
        if mapped is not None:
            prop["type"] = mapped
        if "default" in spec:
            prop["default"] = spec["default"]
        if "enum" in spec:
            prop["enum"] = spec["enum"]
        properties[pname] = prop
        optional = "optional" in str(spec.get("type", "")).lower() or "default" in spec
        if not optional:
            required.append(pname)
    return {"type": "object", "properties": properties, "required": required}


def normalise_tool(tool: object) -> dict:
    """Any source's tool description -> ``{"name", "description", "parameters": JSON-Schema object}``."""
    if isinstance(tool, dict) and tool.get("type") == "function" and isinstance(tool.get("function"), dict):
        tool = tool["function"]
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"].strip():
        raise MalformedRow("bad_tool", f"tool without a name: {str(tool)[:80]}")
    params = tool.get("parameters") or {}
    if not isinstance(params, dict):
        raise MalformedRow("bad_tool", f"tool {tool['name']!r} has non-object parameters")
    if "properties" in params or params.get("type") in ("object", "dict"):
        schema = _schema_node(params)
        schema["type"] = "object"
        schema.setdefault("properties", {})
        if not isinstance(schema.get("required", []), list):
            schema["required"] = []
    else:
        schema = _xlam_parameters(params)
    return {"name": tool["name"], "description": str(tool.get("description") or ""), "parameters": schema}


def load_json_field(row: dict, key: str) -> object:
    """A field that is JSON text in some sources and already decoded in others."""
    if key not in row or row[key] is None:
        raise MalformedRow("missing_field", f"no {key!r}")
    value = row[key]
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as e:
            raise MalformedRow("bad_json", f"{key}: {e}") from e
    return value


def tool_list(raw: object) -> list[dict]:
    if not isinstance(raw, list) or not raw:
        raise MalformedRow("empty_tools", "the tool list is missing or empty")
    return [normalise_tool(t) for t in raw]


def calls(raw: object, what: str) -> list[dict]:
    """Source call dicts -> contract calls; arguments given as JSON text are decoded."""
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        raise MalformedRow("bad_calls", f"{what} is not a list of calls")
    out = []
    for call in raw:
        if not isinstance(call, dict):
            raise MalformedRow("bad_calls", f"{what} holds a non-object call")
        args = call.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError as e:
                raise MalformedRow("bad_json", f"{what} arguments: {e}") from e
        out.append({"name": call.get("name"), "arguments": args})
    validate_calls(out, what)
    return out


def text(row: dict, key: str) -> str:
    value = row.get(key)
    if not isinstance(value, str):
        raise MalformedRow("missing_field", f"no text field {key!r}")
    return value
