"""Validation of the names that become parts of Redis keys, as in
fence/ids.go and fence/checkpoint.go: checked before any key is built, so no
input can forge a hash tag or reach another key."""

from __future__ import annotations

import re

from .errors import BatonError

MAX_ID_LEN = 128
MAX_NS_LEN = 256

_ID_RE = re.compile(r"[A-Za-z0-9._-]+")
_NS_RE = re.compile(r"[A-Za-z0-9._\-:|]*")


def validate_id(field: str, value: object) -> str:
    """Returns value unless it breaks fence.ValidateID: [A-Za-z0-9._-]{1,128}, not dots alone."""
    if not isinstance(value, str) or value == "":
        got = "empty" if value == "" else f"want a string, got {type(value).__name__}"
        raise BatonError(f"baton: {field}: invalid id: {got}")
    n = len(value.encode())
    if n > MAX_ID_LEN:
        raise BatonError(f"baton: {field}: invalid id: {n} bytes, at most {MAX_ID_LEN}")
    if not _ID_RE.fullmatch(value):
        raise BatonError(f"baton: {field} {value!r}: invalid id (allowed: A-Z a-z 0-9 . _ -)")
    if set(value) == {"."}:
        raise BatonError(f"baton: {field} {value!r}: invalid id: only dots")
    return value


def validate_ns(ns: object) -> str:
    """Returns ns unless it breaks fence.ValidateNS: "" or [A-Za-z0-9._-:|]{1,256}."""
    if not isinstance(ns, str):
        raise BatonError(f"baton: checkpoint_ns: want a string, got {type(ns).__name__}")
    n = len(ns.encode())
    if n > MAX_NS_LEN:
        raise BatonError(f"baton: checkpoint_ns: {n} bytes, at most {MAX_NS_LEN}")
    if not _NS_RE.fullmatch(ns):
        raise BatonError(f"baton: checkpoint_ns {ns!r}: invalid (allowed: A-Z a-z 0-9 . _ - : |)")
    return ns
