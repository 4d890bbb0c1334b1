"""BatonSaver: a LangGraph checkpointer whose every write is fenced by a baton
lease, in baton's own checkpoint store (the keys and scripts the Go store and
the LangGraph.js saver use)."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import redis as redis_sync
import redis.asyncio as redis_async
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from . import scripts
from .detached import DetachedSaver
from .envelope import COMPACT, envelope
from .errors import EXIT_LEASE_LOST, BatonError, LeaseLostError, code_error, is_fenced
from .ids import validate_id, validate_ns
from .keys import Keys
from .lease import Lease, lease_from_env
from .reads import CheckpointReads
from .watch import ClaimWatcher

HISTORY = 100
"""Checkpoints kept per thread and namespace, the newest (as fence.Options)."""
RETENTION_MS = 30 * 24 * 3600 * 1000
"""How long a thread's checkpoints live after their last write; 0 keeps them."""
MAX_BYTES = 1 << 20
"""Cap on a checkpoint's data plus metadata, and on one put_writes, bytes."""
EVENT_MAX_LEN = 10000
"""Approximate MAXLEN of a run's event stream."""


NO_CHECKPOINT = -16
"""checkpoint_writes.lua's code for writes to a checkpoint it does not have."""


def _code_of(reply: object) -> int | None:
    """The negative code of a script's refusal, or None for a success."""
    if isinstance(reply, int):
        return reply
    if isinstance(reply, list) and reply and isinstance(reply[0], int) and reply[0] < 0:
        return reply[0]
    return None


LeaseFor = Callable[[str], "Lease | Any"]


def _read_only(thread: str) -> Lease:
    raise BatonError(f"baton: this saver is read-only (BatonSaver.reader): it cannot write to thread {thread!r}; "
                     "only a node's claim writes")


class BatonSaver(CheckpointReads, BaseCheckpointSaver[int]):
    """A LangGraph ``BaseCheckpointSaver`` backed by baton's fenced checkpoint store.

    Writes (put, put_writes, delete_thread and their async twins) run baton's
    own scripts (checkpoint.lua, checkpoint_writes.lua, checkpoint_delete.lua),
    which accept them only from the current claim (epoch and claim id) of a
    RUNNING node of the thread's active run. A refused write raises
    ``BatonFencedError``; from then on every call raises ``LeaseLostError``,
    and with ``on_lost="exit"`` (what ``from_env`` chooses) the process ends
    at once with exit code 75 (``EXIT_LEASE_LOST``). Reads are plain reads of the
    keys the Go store reads.

    Mapping: LangGraph's thread_id is baton's thread (BATON_THREAD_ID),
    checkpoint_ns is baton's namespace ("" is the root graph), checkpoint_id
    the checkpoint id; the store adds a version per namespace and records the
    run, node, epoch and worker of every write.

    Args:
        redis: a Redis URL (the saver then makes and owns its sync and async
            clients) or a ``redis.Redis`` client (decode_responses=True).
        aredis: a ``redis.asyncio.Redis`` client for the async methods, when
            ``redis`` is a client.
        prefix: baton's key prefix (the runner's BATON_PREFIX), default "baton".
        lease: the lease every write carries; its thread is the only one this
            saver writes to.
        lease_for: instead of lease, the lease of a thread's writes, asked for
            at each write (sync, or async for the async methods): a test
            harness, or a process that owns several threads' claims.
        history, retention_ms, max_bytes, event_max_len: as fence.Options
            (100 checkpoints, 30 days, 1 MiB, 10000 events).
        serde: LangGraph's serializer; default LangGraph's JsonPlusSerializer.
        watch: watch the lease's claim in a daemon thread (one read per
            heartbeat interval, never a write) and treat its loss as a refusal.
        watch_interval: seconds between the watcher's reads; default a third
            of the claim's lease, as the runner's heartbeat.
        on_lost: "raise" (default) or "exit": end the process with EXIT_LEASE_LOST
            as soon as the claim is known lost.
    """

    def __init__(
        self,
        *,
        redis: str | redis_sync.Redis,
        aredis: redis_async.Redis | None = None,
        prefix: str = "baton",
        lease: Lease | None = None,
        lease_for: LeaseFor | None = None,
        history: int = HISTORY,
        retention_ms: int = RETENTION_MS,
        max_bytes: int = MAX_BYTES,
        event_max_len: int = EVENT_MAX_LEN,
        serde: SerializerProtocol | None = None,
        watch: bool = False,
        watch_interval: float | None = None,
        on_lost: Literal["raise", "exit"] = "raise",
    ) -> None:
        super().__init__(serde=serde)
        if not redis:
            raise BatonError("baton: BatonSaver needs redis: a Redis URL or a redis.Redis client")
        if (lease is None) == (lease_for is None):
            raise BatonError("baton: BatonSaver needs exactly one of lease and lease_for: every write carries a lease")
        if lease is not None and not isinstance(lease, Lease):
            raise BatonError(f"baton: lease: want a baton_langgraph.Lease, got {type(lease).__name__}")
        if on_lost not in ("raise", "exit"):
            raise BatonError(f"baton: on_lost {on_lost!r}: want 'raise' or 'exit'")
        if watch and lease is None:
            raise BatonError("baton: watch needs a lease: it watches that one claim")
        self._url = redis if isinstance(redis, str) else None
        self._redis = redis_sync.Redis.from_url(redis, decode_responses=True) if self._url else redis
        self._aredis = aredis
        self._owns_aredis = False
        self.keys = Keys(prefix)
        self.lease = lease
        self._lease_for = lease_for
        self._history, self._retention_ms = int(history), int(retention_ms)
        self._max_bytes, self._event_max_len = int(max_bytes), int(event_max_len)
        self.on_lost = on_lost
        self._lost: BaseException | None = None
        self._lost_lock = threading.Lock()
        self._watcher: ClaimWatcher | None = None
        if watch:
            # Its own connection, with a timeout: a read that hangs must not
            # keep the watcher from judging the lease by its last deadline.
            client = (redis_sync.Redis.from_url(self._url, decode_responses=True, socket_timeout=2,
                                                socket_connect_timeout=2) if self._url else self._redis)
            self._watcher = ClaimWatcher(client, self.keys, lease, self._lose, interval=watch_interval)
            self._watcher.start()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> BatonSaver:
        """The saver of the exec node this process runs as, safe by default.

        Reads what the runner gives its command: BATON_REDIS_URL, BATON_PREFIX,
        BATON_FENCING_TOKEN, BATON_THREAD_ID and BATON_WORKER_ID. It watches
        its claim, and ends the process with exit code 75 once the claim is
        gone or a write is refused (``on_lost="raise"`` to handle it instead).
        It never keeps a finished process alive: the watcher is a daemon
        thread and no connection holds the interpreter.

        Outside an exec node (neither BATON_FENCING_TOKEN nor BATON_REDIS_URL
        set) it returns a DetachedSaver, so a graph module that builds its
        checkpointer at import imports anywhere; its first read or write
        raises BatonError saying why. Half an exec node's environment (one
        of them set, another missing) still raises here.
        """
        env = os.environ if env is None else env
        if not overrides.get("redis") and not env.get("BATON_REDIS_URL") and not env.get("BATON_FENCING_TOKEN"):
            # Not an exec node (an import by a test, a notebook, the graph
            # worker): the module imports; the first use says why not.
            return DetachedSaver()  # type: ignore[return-value]
        url = overrides.pop("redis", None) or env.get("BATON_REDIS_URL")
        if not url:
            raise BatonError("baton: BATON_REDIS_URL is not set: BatonSaver.from_env() runs inside a baton exec node")
        opts: dict[str, Any] = {
            "prefix": env.get("BATON_PREFIX") or "baton",
            "lease": lease_from_env(env),
            "watch": True,
            "on_lost": "exit",
        }
        opts.update(overrides)
        return cls(redis=url, **opts)

    @classmethod
    def reader(cls, redis: str | redis_sync.Redis, *, prefix: str = "baton",
               aredis: redis_async.Redis | None = None, serde: SerializerProtocol | None = None) -> BatonSaver:
        """A read-only saver: a thread's state and history outside a run (a
        FastAPI handler rendering a conversation, ``graph.get_state`` with
        it as the checkpointer). Reads (get_tuple, list and their async
        twins) are the ones every saver makes; every write raises
        ``BatonError`` before touching Redis: only a node's claim writes.
        It needs no lease and no environment, so it is safe at import."""
        return cls(redis=redis, aredis=aredis, prefix=prefix, serde=serde, lease_for=_read_only)

    # -- lifecycle ---------------------------------------------------------

    @property
    def lost(self) -> BaseException | None:
        """Why this saver lost its claim, or None while it holds it."""
        return self._lost

    def close(self) -> None:
        """Stops the watcher and closes the sync client the saver made."""
        if self._watcher is not None:
            self._watcher.stop()
        if self._url:
            self._redis.close()

    async def aclose(self) -> None:
        """close(), and closes the async client the saver made."""
        self.close()
        if self._owns_aredis and self._aredis is not None:
            await self._aredis.aclose()
            self._aredis = None

    def __enter__(self) -> BatonSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> BatonSaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _resumed_wait_key(self) -> str:
        self._check()
        if self.lease is None:
            raise BatonError("baton: resumed_wait needs a lease, not lease_for")
        return self.keys.node(self.lease.thread, self.lease.run, self.lease.node)

    def resumed_wait(self) -> str | None:
        """The id of the wait the node's latest resume answered (the node's
        ``resumed_wait``, set by a resume, cleared by the next park), or None
        when it was not resumed since it last parked. run_node records it in
        the checkpoints it writes with that resume's value (metadata
        ``baton_resume``), so that one answer goes to one interrupt: the exec
        kind gives every attempt after a resume the same BATON_RESUME_FILE
        until the node parks again."""
        return self._redis.hget(self._resumed_wait_key(), "resumed_wait") or None

    async def aresumed_wait(self) -> str | None:
        """resumed_wait(), async."""
        return await self._async_client().hget(self._resumed_wait_key(), "resumed_wait") or None

    def _async_client(self) -> redis_async.Redis:
        if self._aredis is None:
            if not self._url:
                raise BatonError("baton: async methods need aredis (a redis.asyncio.Redis) when redis is a client")
            self._aredis = redis_async.Redis.from_url(self._url, decode_responses=True)
            self._owns_aredis = True
        return self._aredis

    # -- losing the claim ----------------------------------------------------

    def _lose(self, err: BaseException) -> None:
        """Records the first reason the claim is gone; with on_lost="exit"
        ends the process (whatever thread calls it, in whatever step)."""
        with self._lost_lock:
            if self._lost is None:
                self._lost = err
        if self.on_lost == "exit":
            exit_lost(err)

    def _check(self) -> None:
        if self._lost is not None:
            raise LeaseLostError(f"baton: this saver lost its claim: {self._lost}",
                                 reason=getattr(self._lost, "reason", "refused"),
                                 code=getattr(self._lost, "code", None), op=getattr(self._lost, "op", None)) from self._lost

    def _reply(self, op: str, lease: Lease, v: Any) -> Any:
        code = _code_of(v)
        if code is not None:
            err = code_error(op, code, lease)
            if is_fenced(err):
                self._lose(err)
            raise err
        return v

    def _lease_sync(self, thread: str) -> Lease:
        if self.lease is not None:
            return self._own_thread(thread)
        lease = self._lease_for(thread)  # type: ignore[misc]
        if inspect.isawaitable(lease):
            raise BatonError("baton: lease_for returned an awaitable: the sync methods need a sync lease_for")
        return self._checked(lease)

    async def _lease_async(self, thread: str) -> Lease:
        if self.lease is not None:
            return self._own_thread(thread)
        lease = self._lease_for(thread)  # type: ignore[misc]
        if inspect.isawaitable(lease):
            lease = await lease
        return self._checked(lease)

    def _own_thread(self, thread: str) -> Lease:
        assert self.lease is not None
        if thread != self.lease.thread:
            raise BatonError(
                f"baton: thread_id {thread!r} is not this lease's thread {self.lease.thread!r}: "
                "a node writes only to its run's thread (BATON_THREAD_ID)"
            )
        return self.lease

    @staticmethod
    def _checked(lease: object) -> Lease:
        if isinstance(lease, Mapping):
            lease = Lease.from_dict(lease)
        if not isinstance(lease, Lease):
            raise BatonError(f"baton: lease_for: want a Lease, got {type(lease).__name__}")
        return lease

    def _ns_keys(self, lease: Lease, ns: str) -> list[str]:
        k = self.keys
        return [
            k.node(lease.thread, lease.run, lease.node),
            k.events(lease.thread, lease.run),
            k.active(lease.thread),
            k.checkpoints(lease.thread),
            *k.checkpoint_ns(lease.thread, ns),
        ]

    # -- put ----------------------------------------------------------------

    def _put_prep(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata) -> tuple:
        self._check()
        conf = (config or {}).get("configurable") or {}
        thread = conf.get("thread_id")
        if thread is None:
            raise BatonError("baton: put: config['configurable'] has no 'thread_id' (the run's thread, BATON_THREAD_ID)")
        validate_id("thread_id", thread)
        ns = validate_ns(conf.get("checkpoint_ns") or "")
        cid = validate_id("checkpoint id", checkpoint.get("id"))
        parent = conf.get("checkpoint_id") or ""
        if parent:
            validate_id("parent checkpoint_id", parent)
        data = envelope(*self.serde.dumps_typed(checkpoint))
        meta = envelope(*self.serde.dumps_typed(get_checkpoint_metadata(config, metadata or {})))
        size = len(data.encode()) + len(meta.encode())
        if size > self._max_bytes:
            raise BatonError(f"baton: checkpoint {cid}: {size} bytes, at most {self._max_bytes}", code=-15, op="checkpoint")
        return thread, ns, cid, parent, data, meta

    def _put_call(self, lease: Lease, ns: str, cid: str, parent: str, data: str, meta: str) -> tuple[list, list]:
        return self._ns_keys(lease, ns), [
            lease.node, lease.run, lease.thread, lease.worker, lease.epoch, lease.claim,
            ns, cid, parent, data, meta,
            self._history, self._retention_ms, self._max_bytes, self._event_max_len,
        ]

    @staticmethod
    def _put_result(thread: str, ns: str, cid: str) -> RunnableConfig:
        return {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": cid}}

    def put(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
            new_versions: ChannelVersions) -> RunnableConfig:
        thread, ns, cid, parent, data, meta = self._put_prep(config, checkpoint, metadata)
        lease = self._lease_sync(thread)
        keys, args = self._put_call(lease, ns, cid, parent, data, meta)
        self._reply("checkpoint", lease, scripts.CHECKPOINT.run(self._redis, keys, args))
        return self._put_result(thread, ns, cid)

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        thread, ns, cid, parent, data, meta = self._put_prep(config, checkpoint, metadata)
        lease = await self._lease_async(thread)
        keys, args = self._put_call(lease, ns, cid, parent, data, meta)
        self._reply("checkpoint", lease, await scripts.CHECKPOINT.arun(self._async_client(), keys, args))
        return self._put_result(thread, ns, cid)

    # -- put_writes ---------------------------------------------------------

    def _writes_prep(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                     task_path: str) -> tuple:
        self._check()
        conf = (config or {}).get("configurable") or {}
        thread, cid = conf.get("thread_id"), conf.get("checkpoint_id")
        if thread is None:
            raise BatonError("baton: put_writes: config['configurable'] has no 'thread_id'")
        if cid is None:
            raise BatonError("baton: put_writes: config['configurable'] has no 'checkpoint_id'")
        validate_id("thread_id", thread)
        validate_id("checkpoint_id", cid)
        ns = validate_ns(conf.get("checkpoint_ns") or "")
        if not isinstance(task_id, str) or task_id == "":
            raise BatonError("baton: put_writes: task id is empty")
        pairs = []
        for i, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, i)
            # The record baton keeps (fence.PendingWrite, plus the task's path).
            head = json.dumps({"task": task_id, "idx": idx, "channel": channel, "path": task_path or ""},
                              separators=COMPACT, ensure_ascii=False)[:-1]
            pairs.append([idx, f'{head},"value":{envelope(*self.serde.dumps_typed(value))}}}'])
        arg = json.dumps(pairs, separators=COMPACT, ensure_ascii=False)
        size = len(arg.encode())
        if size > self._max_bytes:
            raise BatonError(f"baton: writes of task {task_id}: {size} bytes, at most {self._max_bytes}",
                             code=-15, op="checkpoint_writes")
        return thread, ns, cid, arg, bool(pairs)

    def _writes_call(self, lease: Lease, ns: str, cid: str, task_id: str, arg: str) -> tuple[list, list]:
        return self._ns_keys(lease, ns), [
            lease.node, lease.run, lease.thread, lease.worker, lease.epoch, lease.claim,
            ns, cid, task_id, arg, self._retention_ms, self._max_bytes, self._event_max_len,
        ]

    # LangGraph's loop saves a checkpoint and its tasks' writes from different
    # threads of its executor: a fast task (one that calls interrupt() at
    # once) can have its writes arrive before the checkpoint they belong to
    # is stored, and checkpoint_writes.lua refuses writes to a checkpoint it
    # does not have (-16). The put is already on its way, so such writes are
    # tried again for a while before the refusal stands.
    _WRITES_AHEAD_S = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8)

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                   task_path: str = "") -> None:
        thread, ns, cid, arg, any_writes = self._writes_prep(config, writes, task_id, task_path)
        lease = self._lease_sync(thread)
        if not any_writes:
            return
        keys, args = self._writes_call(lease, ns, cid, task_id, arg)
        v = scripts.CHECKPOINT_WRITES.run(self._redis, keys, args)
        for pause in self._WRITES_AHEAD_S:
            if _code_of(v) != NO_CHECKPOINT:
                break
            time.sleep(pause)
            self._check()
            v = scripts.CHECKPOINT_WRITES.run(self._redis, keys, args)
        self._reply("checkpoint_writes", lease, v)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str,
                          task_path: str = "") -> None:
        thread, ns, cid, arg, any_writes = self._writes_prep(config, writes, task_id, task_path)
        lease = await self._lease_async(thread)
        if not any_writes:
            return
        keys, args = self._writes_call(lease, ns, cid, task_id, arg)
        v = await scripts.CHECKPOINT_WRITES.arun(self._async_client(), keys, args)
        for pause in self._WRITES_AHEAD_S:
            if _code_of(v) != NO_CHECKPOINT:
                break
            await asyncio.sleep(pause)
            self._check()
            v = await scripts.CHECKPOINT_WRITES.arun(self._async_client(), keys, args)
        self._reply("checkpoint_writes", lease, v)

    # -- delete_thread ------------------------------------------------------

    def _delete_call(self, lease: Lease, thread: str, active: str | None, names: list[str]) -> tuple[list, list]:
        k = self.keys
        keys = [
            k.active(thread),
            k.run(thread, active) if active else k.checkpoints(thread),
            k.checkpoints(thread),
            k.node(lease.thread, lease.run, lease.node),
            k.events(lease.thread, lease.run),
        ]
        for ns in names:
            keys.extend(k.checkpoint_ns(thread, ns))
        return keys, [
            "lease", lease.run, active or "",
            lease.thread, lease.node, lease.worker, lease.epoch, lease.claim, self._event_max_len,
            *names,
        ]

    def delete_thread(self, thread_id: str) -> None:
        """Deletes every checkpoint and pending write of the thread, in every
        namespace, fenced like a write: only the thread's active run's current
        claim may (checkpoint_delete.lua, mode lease). Versions are not reused."""
        self._check()
        validate_id("thread_id", thread_id)
        lease = self._lease_sync(thread_id)
        for attempt in range(6):
            pipe = self._redis.pipeline(transaction=True)
            pipe.get(self.keys.active(thread_id))
            pipe.hkeys(self.keys.checkpoints(thread_id))
            active, names = pipe.execute()
            keys, args = self._delete_call(lease, thread_id, active, list(names))
            v = scripts.CHECKPOINT_DELETE.run(self._redis, keys, args)
            if v == -23 and attempt < 5:
                continue  # the thread changed between the read and the script
            self._reply("checkpoint_delete", lease, v)
            return

    async def adelete_thread(self, thread_id: str) -> None:
        """The async delete_thread."""
        self._check()
        validate_id("thread_id", thread_id)
        lease = await self._lease_async(thread_id)
        client = self._async_client()
        for attempt in range(6):
            pipe = client.pipeline(transaction=True)
            pipe.get(self.keys.active(thread_id))
            pipe.hkeys(self.keys.checkpoints(thread_id))
            active, names = await pipe.execute()
            keys, args = self._delete_call(lease, thread_id, active, list(names))
            v = await scripts.CHECKPOINT_DELETE.arun(client, keys, args)
            if v == -23 and attempt < 5:
                continue
            self._reply("checkpoint_delete", lease, v)
            return

def exit_lost(err: BaseException) -> None:
    """Ends the process with EXIT_LEASE_LOST at once, from any thread: the
    attempt must not run one more step. Nothing else runs (no finally
    blocks, no atexit), since it could do work. Why is written to stderr
    from a helper thread given half a second: a paused runner reads no pipe,
    and a full one must not keep this process alive."""
    msg = f"{err}; exiting with code {EXIT_LEASE_LOST}\n".encode(errors="replace")
    writer = threading.Thread(target=_write_stderr, args=(msg,), daemon=True)
    writer.start()
    writer.join(0.5)
    os._exit(EXIT_LEASE_LOST)


def _write_stderr(msg: bytes) -> None:
    try:
        os.write(2, msg)
    except OSError:
        pass
