"""The reads of BatonSaver (get_tuple, list and their async twins): plain
reads of the keys the Go store reads; no lease is needed to read."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, get_checkpoint_id, writes_sort_key

from .envelope import unwrap, unwrap_obj
from .ids import validate_id, validate_ns


class CheckpointReads:
    """The read half of BatonSaver; it uses the saver's clients (_redis,
    _async_client()), keys, serde and _check()."""

    def _tuple_fields(self, versions: Sequence[str]) -> list[str]:
        return [f"{v}:{s}" for v in versions for s in ("d", "m", "i", "w")]

    def _build_tuples(self, thread: str, ns: str, versions: Sequence[str], vals: Sequence[str | None]) -> list[tuple]:
        """(tuple parts, pending-write fields) of each version still stored
        and written by a LangGraph saver, in order."""
        out = []
        for i in range(len(versions)):
            data, meta, info, fields = vals[4 * i : 4 * i + 4]
            if info is None:
                continue  # trimmed meanwhile
            d = unwrap(data)
            if d is None:
                continue  # not a LangGraph checkpoint (an exec node's ::checkpoint line)
            rec = json.loads(info)
            m = unwrap(meta)
            try:
                names = json.loads(fields) if fields else []
            except ValueError:
                names = []
            if not isinstance(names, list):
                names = []  # Redis's cjson stores an empty list as {}
            out.append((rec, self.serde.loads_typed(d), None if m is None else self.serde.loads_typed(m), names))
        return out

    def _pending(self, recs: Sequence[str | None]) -> list[tuple[str, str, Any]]:
        parsed = [json.loads(r) for r in recs if r is not None]
        parsed.sort(key=lambda r: writes_sort_key(r.get("path") or "", r["task"], r["idx"]))
        out = []
        for r in parsed:
            u = unwrap_obj(r.get("value"))
            out.append((r["task"], r["channel"], r.get("value") if u is None else self.serde.loads_typed(u)))
        return out

    @staticmethod
    def _tuple(thread: str, ns: str, rec: dict, checkpoint: Any, metadata: Any, pending: list) -> CheckpointTuple:
        parent = rec.get("parent") or None
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": rec["id"]}},
            checkpoint=checkpoint,
            metadata=metadata,
            parent_config=(
                {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": parent}} if parent else None
            ),
            pending_writes=pending,
        )

    def _tuples(self, thread: str, ns: str, versions: Sequence[str]) -> list[CheckpointTuple]:
        if not versions:
            return []
        _, data_key, _, writes_key = self.keys.checkpoint_ns(thread, ns)
        built = self._build_tuples(thread, ns, versions, self._redis.hmget(data_key, self._tuple_fields(versions)))
        return [
            self._tuple(thread, ns, rec, cp, md, self._pending(self._redis.hmget(writes_key, names)) if names else [])
            for rec, cp, md, names in built
        ]

    async def _atuples(self, thread: str, ns: str, versions: Sequence[str]) -> list[CheckpointTuple]:
        if not versions:
            return []
        client = self._async_client()
        _, data_key, _, writes_key = self.keys.checkpoint_ns(thread, ns)
        built = self._build_tuples(thread, ns, versions, await client.hmget(data_key, self._tuple_fields(versions)))
        out = []
        for rec, cp, md, names in built:
            pending = self._pending(await client.hmget(writes_key, names)) if names else []
            out.append(self._tuple(thread, ns, rec, cp, md, pending))
        return out

    def _get_prep(self, config: RunnableConfig) -> tuple | None:
        self._check()
        conf = (config or {}).get("configurable") or {}
        thread = conf.get("thread_id")
        if thread is None:
            return None
        validate_id("thread_id", thread)
        ns = validate_ns(conf.get("checkpoint_ns") or "")
        cid = get_checkpoint_id(config)
        if cid:
            validate_id("checkpoint_id", cid)
        return thread, ns, cid

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        prep = self._get_prep(config)
        if prep is None:
            return None
        thread, ns, cid = prep
        versions_key, _, ids_key, _ = self.keys.checkpoint_ns(thread, ns)
        if cid:
            version = self._redis.hget(ids_key, cid)
        else:
            top = self._redis.zrevrange(versions_key, 0, 0)
            version = top[0] if top else None
        if version is None:
            return None
        tuples = self._tuples(thread, ns, [version])
        return tuples[0] if tuples else None

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        prep = self._get_prep(config)
        if prep is None:
            return None
        thread, ns, cid = prep
        client = self._async_client()
        versions_key, _, ids_key, _ = self.keys.checkpoint_ns(thread, ns)
        if cid:
            version = await client.hget(ids_key, cid)
        else:
            top = await client.zrevrange(versions_key, 0, 0)
            version = top[0] if top else None
        if version is None:
            return None
        tuples = await self._atuples(thread, ns, [version])
        return tuples[0] if tuples else None

    def _list_prep(self, config: RunnableConfig | None, before: RunnableConfig | None) -> tuple:
        self._check()
        want = (config or {}).get("configurable") or {}
        if want.get("thread_id") is not None:
            validate_id("thread_id", want["thread_id"])
        if want.get("checkpoint_ns") is not None:
            validate_ns(want["checkpoint_ns"])
        before_id = get_checkpoint_id(before) if before else None
        return want, before_id

    def _keep(self, want: Mapping, before_id: str | None, filter: Mapping | None, info: str | None,
              meta: str | None) -> bool:
        if info is None:
            return False  # trimmed meanwhile
        rec = json.loads(info)
        if want.get("checkpoint_id") and rec["id"] != want["checkpoint_id"]:
            return False
        if before_id and not rec["id"] < before_id:
            return False
        if filter:
            m = unwrap(meta)
            if m is None:
                return False
            metadata = self.serde.loads_typed(m) or {}
            if not all(metadata.get(k) == v for k, v in filter.items()):
                return False
        return True

    _PAGE = 64

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None) -> Iterator[CheckpointTuple]:
        want, before_id = self._list_prep(config, before)
        threads = [want["thread_id"]] if want.get("thread_id") is not None else self._threads()
        for thread in threads:
            names = ([want["checkpoint_ns"]] if want.get("checkpoint_ns") is not None
                     else sorted(self._redis.hkeys(self.keys.checkpoints(thread))))
            for ns in names:
                versions_key, data_key, _, _ = self.keys.checkpoint_ns(thread, ns)
                versions = self._redis.zrevrange(versions_key, 0, -1)
                for i in range(0, len(versions), self._PAGE):
                    page = versions[i : i + self._PAGE]
                    # Ids and metadata first: most filters are decided by them.
                    vals = self._redis.hmget(data_key, [f"{v}:{s}" for v in page for s in ("i", "m")])
                    keep = [v for j, v in enumerate(page)
                            if self._keep(want, before_id, filter, vals[2 * j], vals[2 * j + 1])]
                    for tup in self._tuples(thread, ns, keep):
                        if limit is not None:
                            if limit <= 0:
                                return
                            limit -= 1
                        yield tup

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        want, before_id = self._list_prep(config, before)
        client = self._async_client()
        threads = [want["thread_id"]] if want.get("thread_id") is not None else await self._athreads()
        for thread in threads:
            names = ([want["checkpoint_ns"]] if want.get("checkpoint_ns") is not None
                     else sorted(await client.hkeys(self.keys.checkpoints(thread))))
            for ns in names:
                versions_key, data_key, _, _ = self.keys.checkpoint_ns(thread, ns)
                versions = await client.zrevrange(versions_key, 0, -1)
                for i in range(0, len(versions), self._PAGE):
                    page = versions[i : i + self._PAGE]
                    vals = await client.hmget(data_key, [f"{v}:{s}" for v in page for s in ("i", "m")])
                    keep = [v for j, v in enumerate(page)
                            if self._keep(want, before_id, filter, vals[2 * j], vals[2 * j + 1])]
                    for tup in await self._atuples(thread, ns, keep):
                        if limit is not None:
                            if limit <= 0:
                                return
                            limit -= 1
                        yield tup

    def _threads(self) -> list[str]:
        """Every thread that has (or had) checkpoints under the prefix."""
        out = set()
        for key in self._redis.scan_iter(match=self.keys.thread_pattern(), count=1000):
            t = self.keys.thread_of(key)
            if t is not None:
                out.add(t)
        return sorted(out)

    async def _athreads(self) -> list[str]:
        out = set()
        async for key in self._async_client().scan_iter(match=self.keys.thread_pattern(), count=1000):
            t = self.keys.thread_of(key)
            if t is not None:
                out.add(t)
        return sorted(out)
