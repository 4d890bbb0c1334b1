"""The envelope around a stored value, the same as the LangGraph.js saver's.

A stored value is what LangGraph's serializer made, wrapped in JSON:
{"serde":"json","value":<JSON>} keeps JSON readable by baton's own tools,
{"serde":"<type>","base64":"..."} holds the rest (LangGraph Python's serde
makes msgpack).
"""

from __future__ import annotations

import base64
import json

JSON_HEAD = '{"serde":"json","value":'
COMPACT = (",", ":")


def envelope(kind: str, data: bytes) -> str:
    if kind == "json":
        return JSON_HEAD + data.decode() + "}"
    return json.dumps({"serde": kind, "base64": base64.b64encode(data).decode()}, separators=COMPACT)


def unwrap(text: object) -> tuple[str, bytes] | None:
    """Splits an envelope into (type, data); None when text is not one
    (another tool's checkpoint, e.g. an exec node's ::checkpoint line)."""
    if not isinstance(text, str):
        return None
    if text.startswith(JSON_HEAD) and text.endswith("}"):
        return "json", text[len(JSON_HEAD) : -1].encode()
    try:
        v = json.loads(text)
    except ValueError:
        return None
    return unwrap_obj(v)


def unwrap_obj(v: object) -> tuple[str, bytes] | None:
    if not isinstance(v, dict) or not isinstance(v.get("serde"), str):
        return None
    if v["serde"] == "json":
        return "json", json.dumps(v.get("value"), separators=COMPACT, ensure_ascii=False).encode()
    if not isinstance(v.get("base64"), str):
        return None
    return v["serde"], base64.b64decode(v["base64"])
