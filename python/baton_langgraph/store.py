"""BatonStore: LangGraph's BaseStore (a graph's long-term memory: ``store``
in a node, ``get_store()``) on Redis, in the keys and scripts of baton's item
store, so that graphs in Python and JS and the Agent Server API's /store
routes (agentapi/store.go) share one store.

Layout (fence/store_items.go): a namespace is one hash of items and one zset
of expiries, hash-tagged together (one Redis Cluster slot), written by one
script (store_put.lua); an index of namespaces serves search and
list_namespaces. A put indexes first, then writes, so a namespace with items
is always indexed; a reader skips an index entry whose items are gone.
There is no vector index: ``index=`` is refused, and a search's ``query``
is ignored as a store without an index ignores it.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Iterable
from datetime import datetime, timezone
from typing import Any

import redis as redis_sync
import redis.asyncio as redis_async
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from .errors import BatonError
from .keys import Keys
from .scripts import Script

MAX_DEPTH = 32
"""Most labels of a namespace (fence.MaxNamespaceDepth)."""
MAX_LABEL = 256
"""Longest label, bytes (fence.MaxNamespaceLabel)."""
MAX_NAMESPACE = 1024
"""Longest namespace, its labels joined by ".", bytes (fence.MaxNamespaceBytes)."""
MAX_KEY = 1024
"""Longest item key, bytes (fence.MaxItemKey)."""
MAX_VALUE = 1 << 20
"""Largest item value, its JSON in bytes (fence.DefaultItemBytes)."""
UNINDEX_GRACE_MS = 3600 * 1000
"""An empty namespace's index entry is dropped only this long after its last put's index step."""
OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})

_PUT = Script("store_put")
_GET = Script("store_get")
_INDEX = Script("store_index")
_UNINDEX = Script("store_unindex")

# A step of an operation: what to ask Redis. The operations are written once
# as generators of steps; batch runs them on the sync client, abatch on the
# async one.
Step = tuple


def _check_namespace(ns: tuple[str, ...], *, put: bool) -> None:
    """LangGraph's rules for labels, and the store's limits."""
    if put and not ns:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    if len(ns) > MAX_DEPTH:
        raise InvalidNamespaceError(f"Namespace {ns} has {len(ns)} labels, at most {MAX_DEPTH}.")
    for label in ns:
        if not isinstance(label, str):
            raise InvalidNamespaceError(f"Namespace labels must be strings, got {type(label).__name__} in {ns}.")
        if not label:
            raise InvalidNamespaceError(f"Namespace labels cannot be empty strings. Got {ns}.")
        if "." in label:
            raise InvalidNamespaceError(f"Invalid namespace label {label!r} in {ns}: labels cannot contain periods ('.').")
        if "\x00" in label:
            raise InvalidNamespaceError(f"Invalid namespace label {label!r} in {ns}: labels cannot contain NUL bytes.")
        if len(label.encode()) > MAX_LABEL:
            raise InvalidNamespaceError(f"A namespace label of {len(label.encode())} bytes, at most {MAX_LABEL}.")
    if len(".".join(ns).encode()) > MAX_NAMESPACE:
        raise InvalidNamespaceError(f"Namespace {ns} is over {MAX_NAMESPACE} bytes joined.")
    if put and ns[0] == "langgraph":
        raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {ns}')


def _check_filter(f: Any) -> None:
    if isinstance(f, dict):
        for k, v in f.items():
            if isinstance(k, str) and k.startswith("$") and k not in OPERATORS:
                raise ValueError(f"Unsupported operator: {k} (BatonStore knows {', '.join(sorted(OPERATORS))})")
            _check_filter(v)
    elif isinstance(f, (list, tuple)):
        for v in f:
            _check_filter(v)


def _matches(got: Any, want: Any) -> bool:
    """A value against a filter value, as LangGraph's stores compare."""
    if isinstance(want, dict):
        if any(isinstance(k, str) and k.startswith("$") for k in want):
            return all(_apply(got, op, arg) for op, arg in want.items())
        return isinstance(got, dict) and all(_matches(got.get(k), v) for k, v in want.items())
    if isinstance(want, (list, tuple)):
        return (isinstance(got, list) and len(got) == len(want)
                and all(_matches(g, w) for g, w in zip(got, want, strict=True)))
    return got == want


def _apply(got: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return got == arg
    if op == "$ne":
        return got != arg
    try:
        g, a = float(got), float(arg)
    except (TypeError, ValueError):
        return False
    return {"$gt": g > a, "$gte": g >= a, "$lt": g < a, "$lte": g <= a}[op]


def _ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def _parse(ns: tuple[str, ...], key: str, raw: str, now: int, cls: type = Item) -> Any:
    """An item as store_put.lua stores it ("created updated ttl expires json"), or None when expired."""
    c, u, _ttl, exp, value = raw.split(" ", 4)
    if int(exp) and int(exp) <= now:
        return None
    return cls(namespace=ns, key=key, value=json.loads(value), created_at=_ms(int(c)), updated_at=_ms(int(u)))


def _has_ttl(raw: str) -> bool:
    return raw.split(" ", 3)[2] != "0"


def _labels_key(ns: str) -> tuple[str, ...]:
    return tuple(ns.split("."))


class BatonStore(BaseStore):
    """LangGraph's ``BaseStore`` on baton's Redis.

    ``redis`` is a URL or a ``redis.Redis``; ``aredis`` the asyncio client
    (made from the URL when not given). ``prefix`` is the runner's key
    prefix (REDIS_PREFIX, default "baton"). ``ttl`` takes LangGraph's
    TTLConfig (``default_ttl`` minutes, ``refresh_on_read``); expired items
    are never returned, and their space is reclaimed by the next script
    that touches their namespace (no sweeper). ``index`` (semantic search)
    is refused: baton's store has no vector index.

    Every write is safe to retry. A batch's puts (the last of each
    namespace and key) are written first, one script per namespace, then
    its reads are answered.
    """

    supports_ttl = True

    def __init__(self, redis: Any = None, *, aredis: Any = None, prefix: str = "baton",
                 ttl: TTLConfig | None = None, index: Any = None) -> None:
        if index is not None:
            raise BatonError("baton: BatonStore has no vector index, so semantic search (index=...) is not "
                             "supported; remove the store's index configuration")
        if redis is None:
            raise BatonError("baton: BatonStore needs redis (a URL or a redis.Redis)")
        url = redis if isinstance(redis, str) else None
        self.redis = redis_sync.Redis.from_url(url, decode_responses=True) if url else redis
        if aredis is None and url:
            aredis = redis_async.Redis.from_url(url, decode_responses=True)
        self.aredis = aredis
        self.keys = Keys(prefix)
        self.ttl_config = ttl

    # Keys, as fence/store_items.go builds them.
    def _items(self, ns: str) -> str:
        return f"{self.keys.prefix}:store:{{n:{ns}}}:items"

    def _expiries(self, ns: str) -> str:
        return f"{self.keys.prefix}:store:{{n:{ns}}}:ttl"

    def _index(self) -> tuple[str, str]:
        return f"{self.keys.prefix}:store:{{index}}:ns", f"{self.keys.prefix}:store:{{index}}:seen"

    # -- BaseStore

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        gen = self._batch(list(ops))
        try:
            step = next(gen)
            while True:
                step = gen.send(self._run(step))
        except StopIteration as done:
            return done.value

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        if self.aredis is None:
            raise BatonError("baton: this BatonStore was given no asyncio client (aredis)")
        gen = self._batch(list(ops))
        try:
            step = next(gen)
            while True:
                step = gen.send(await self._arun(step))
        except StopIteration as done:
            return done.value

    def _run(self, step: Step) -> Any:
        if step[0] == "script":
            return step[1].run(self.redis, step[2], step[3])
        return self.redis.execute_command(*step[1:])

    async def _arun(self, step: Step) -> Any:
        if step[0] == "script":
            return await step[1].arun(self.aredis, step[2], step[3])
        return await self.aredis.execute_command(*step[1:])

    # -- the operations, as generators of steps

    def _batch(self, ops: list[Op]) -> Generator[Step, Any, list[Result]]:
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, PutOp):
                _check_namespace(op.namespace, put=op.value is not None)
                if len(str(op.key).encode()) > MAX_KEY:
                    raise ValueError(f"An item key of {len(str(op.key).encode())} bytes, at most {MAX_KEY}.")
                puts[(op.namespace, str(op.key))] = op
            elif isinstance(op, (GetOp, SearchOp)):
                _check_namespace(op.namespace if isinstance(op, GetOp) else op.namespace_prefix, put=False)
                if isinstance(op, SearchOp):
                    _check_filter(op.filter)
            elif isinstance(op, ListNamespacesOp):
                for cond in op.match_conditions or ():
                    _check_namespace(tuple("x" if p == "*" else p for p in cond.path), put=False)
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")
        if puts:
            yield from self._put(list(puts.values()))
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                got = yield from self._get(op.namespace, [str(op.key)], op.refresh_ttl)
                results.append(got[0])
            elif isinstance(op, SearchOp):
                results.append((yield from self._search(op)))
            elif isinstance(op, ListNamespacesOp):
                results.append((yield from self._list(op)))
            else:
                results.append(None)
        return results

    def _put(self, puts: list[PutOp]) -> Generator[Step, Any, None]:
        groups: dict[str, list[str]] = {}
        index: list[str] = []
        for op in puts:
            ns = ".".join(op.namespace)
            value = ""
            if op.value is not None:
                value = json.dumps(dict(op.value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
                if len(value.encode()) > MAX_VALUE:
                    raise ValueError(f"An item value of {len(value.encode())} bytes, at most {MAX_VALUE}.")
                if ns not in index:
                    index.append(ns)
            ttl_ms = 0
            if op.value is not None and op.ttl:
                ttl_ms = max(int(op.ttl * 60_000), 1)
            groups.setdefault(ns, []).extend([str(op.key), value, str(ttl_ms)])
        if index:
            yield ("script", _INDEX, list(self._index()), index)
        for ns, args in groups.items():
            yield ("script", _PUT, [self._items(ns), self._expiries(ns)], args)

    def _get(self, ns: tuple[str, ...], keys: list[str], refresh: bool) -> Generator[Step, Any, list[Item | None]]:
        joined = ".".join(ns)
        r = yield ("script", _GET, [self._items(joined), self._expiries(joined)], ["1" if refresh else "0", *keys])
        now = int(r[0])
        return [None if raw is None else _parse(ns, k, raw, now) for k, raw in zip(keys, r[2:], strict=True)]

    def _indexed(self, prefix: tuple[str, ...]) -> Generator[Step, Any, list[str]]:
        index, _ = self._index()
        if not prefix:
            names = yield ("call", "ZRANGE", index, 0, -1)
        else:
            p = ".".join(prefix)
            names = list((yield ("call", "ZRANGEBYLEX", index, f"[{p}.", f"({p}/")))
            if (yield ("call", "ZSCORE", index, p)) is not None:
                names.append(p)
        return sorted(names, key=_labels_key)

    def _now(self) -> Generator[Step, Any, int]:
        t = yield ("call", "TIME")
        return int(t[0]) * 1000 + int(t[1]) // 1000

    def _unindex(self, empty: list[str]) -> Generator[Step, Any, None]:
        if empty:
            yield ("script", _UNINDEX, list(self._index()), [str(UNINDEX_GRACE_MS), *empty])

    def _search(self, op: SearchOp) -> Generator[Step, Any, list[SearchItem]]:
        names = yield from self._indexed(tuple(op.namespace_prefix))
        now = yield from self._now()
        out: list[SearchItem] = []
        refresh: dict[str, list[str]] = {}
        empty: list[str] = []
        skip = max(op.offset, 0)
        for ns in names:
            if len(out) >= op.limit:
                break
            items = yield ("call", "HGETALL", self._items(ns))
            if not items:
                empty.append(ns)
                continue
            labels = _labels_key(ns)
            for key in sorted(items):
                it = _parse(labels, key, items[key], now, SearchItem)
                if it is None or not all(_matches(it.value.get(k), v) for k, v in (op.filter or {}).items()):
                    continue
                if skip:
                    skip -= 1
                    continue
                out.append(it)
                if op.refresh_ttl and _has_ttl(items[key]):
                    refresh.setdefault(ns, []).append(key)
                if len(out) >= op.limit:
                    break
        for ns, keys in refresh.items():
            yield from self._get(_labels_key(ns), keys, True)
        yield from self._unindex(empty)
        return out

    def _list(self, op: ListNamespacesOp) -> Generator[Step, Any, list[tuple[str, ...]]]:
        conds = op.match_conditions or ()
        literal: tuple[str, ...] = ()
        for c in conds:
            if c.match_type == "prefix":
                literal = tuple(c.path[: c.path.index("*")] if "*" in c.path else c.path)
        names = yield from self._indexed(literal)
        candidates = [ns for ns in names if all(_cond(c, _labels_key(ns)) for c in conds)]
        now = yield from self._now()
        live, empty = [], []
        for ns in candidates:
            n = yield ("call", "HLEN", self._items(ns))
            gone = yield ("call", "ZCOUNT", self._expiries(ns), "-inf", now)
            if int(n) - int(gone) > 0:
                live.append(_labels_key(ns))
            elif int(n) == 0:
                empty.append(ns)
        yield from self._unindex(empty)
        if op.max_depth is not None:
            live = sorted({ns[: op.max_depth] for ns in live})
        return live[op.offset : op.offset + op.limit]


def _cond(c: Any, ns: tuple[str, ...]) -> bool:
    path = tuple(c.path)
    if len(path) > len(ns):
        return False
    part = ns[: len(path)] if c.match_type == "prefix" else ns[len(ns) - len(path) :]
    return all(p == "*" or p == l for p, l in zip(path, part, strict=True))


__all__ = ["BatonStore"]
