"""Redis keys, exactly as fence/keys.go builds them.

The key space is cut into SHARDS shards; a thread belongs to one (FNV-1a of
its id), and every key of the thread carries its shard's hash tag, so each
script touches one Redis Cluster slot.
"""

from __future__ import annotations

import re

SHARDS = 16
"""The number of shards: part of the key layout, as fence.Shards."""


def _crc16(data: bytes) -> int:
    """CRC16-XMODEM, Redis Cluster's key hash."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def _shard_tag(i: int) -> str:
    """Shard i's hash tag: the first "s<i>.<n>" whose slot lies in the i-th sixteenth."""
    width = 16384 // SHARDS
    n = 0
    while True:
        tag = f"s{i}.{n}"
        if (_crc16(tag.encode()) & 16383) // width == i:
            return tag
        n += 1


_SHARD_TAGS = tuple(_shard_tag(i) for i in range(SHARDS))


def shard_of(thread: str) -> int:
    """The shard of a thread's keys (FNV-1a, 32 bits, of its id)."""
    h = 0x811C9DC5
    for b in thread.encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h % SHARDS


class Keys:
    """Builders of baton's keys under one prefix. They take ids that passed
    validate_id (and namespaces that passed validate_ns); they never validate."""

    def __init__(self, prefix: str = "baton") -> None:
        self.prefix = prefix or "baton"

    def _tagged(self, thread: str, *parts: str) -> str:
        return f"{self.prefix}:{{{_SHARD_TAGS[shard_of(thread)]}}}:{thread}:{':'.join(parts)}"

    def run(self, thread: str, run: str) -> str:
        return self._tagged(thread, "run", run)

    def node(self, thread: str, run: str, node: str) -> str:
        return self._tagged(thread, "node", run, node)

    def active(self, thread: str) -> str:
        return self._tagged(thread, "active")

    def events(self, thread: str, run: str) -> str:
        return self._tagged(thread, "events", run)

    def checkpoints(self, thread: str) -> str:
        """The thread's hash of namespaces, each with its last version."""
        return self._tagged(thread, "cp")

    def checkpoint_ns(self, thread: str, ns: str) -> tuple[str, str, str, str]:
        """versions zset, data hash, ids hash, pending writes hash of one namespace."""
        return tuple(self._tagged(thread, k, ns) for k in ("cpv", "cpd", "cpi", "cpw"))  # type: ignore[return-value]

    def thread_pattern(self) -> str:
        """A SCAN pattern for every thread's namespace hash (see thread_of)."""
        return re.sub(r"([*?\[\]\\])", r"\\\1", self.prefix) + ":{*}:*:cp"

    def thread_of(self, key: str) -> str | None:
        """The thread whose namespace hash key is, or None for any other key."""
        head, tail = f"{self.prefix}:{{", ":cp"
        if not key.startswith(head) or not key.endswith(tail):
            return None
        rest = key[len(head) : len(key) - len(tail)]
        close = rest.find("}:")
        if close < 0:
            return None
        thread = rest[close + 2 :]
        # A thread id holds no colon; the tag must be the thread's own.
        if thread == "" or ":" in thread or rest[:close] != _SHARD_TAGS[shard_of(thread)]:
            return None
        return thread
