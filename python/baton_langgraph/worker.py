"""The graph worker: ``python -m baton_langgraph.worker``, a long-lived
process a baton runner starts (LANGGRAPH_CONFIG) to run the graphs of a
LangGraph project, many attempts at once on one asyncio loop.

The runner keeps ownership: it claims each node, renews its lease, commits
its outcome and cancels it. This process only runs graphs. It speaks JSON
lines on stdin (from the runner) and on the stdout it was started with (to
the runner); what graphs print goes to stderr. The protocol is in
docs/graph-workers.md. Every checkpoint an attempt writes goes through a
BatonSaver holding that attempt's lease, so a write from an attempt whose
claim is gone is refused by the store, whatever this process believes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import sys
import traceback
from typing import Any

import redis as redis_sync
import redis.asyncio as redis_async

from . import calls
from .calls import interrupt_json
from .errors import BatonError, is_fenced
from .graphs import GraphSpec, load
from .lease import Lease
from .node import RESUME_KEY, RUN_KEY, _jsonable, _pending, _plan, wait_request
from .saver import BatonSaver
from .store import BatonStore
from .runs import at_breakpoint, at_checkpoint, check_resumes, run_config, update_state
from .streams import SDK_MODES, Stream


_ABSENT = object()

MAX_REPLY = 48 << 20
"""The longest reply line a call may have, under the runner's line limit."""


def _default(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return dataclasses.asdict(v)
    return _jsonable(v)


def dumps(v: Any) -> str:
    """Compact JSON of what a graph yields: messages by model_dump, an
    Interrupt as {"value", "id"}, anything else unknown as its repr. NaN
    and infinities are refused (ValueError): they are not JSON."""
    return json.dumps(v, default=_default, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class Channel:
    """The runner's end: one JSON object per line, written whole. Writes
    block the loop when the runner does not read (it is paused): the
    attempts stop with it, at their next chunk."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, msg: dict[str, Any]) -> None:
        try:
            line = dumps(msg)
        except (TypeError, ValueError) as e:
            line = dumps({"type": "error", "id": msg.get("id"), "permanent": True,
                          "error": f"baton: graph worker: {msg.get('type')} is not JSON: {e}"})
        self.send_line(line)

    def send_line(self, line: str) -> None:
        data = (line + "\n").encode()
        while data:
            n = os.write(self.fd, data)
            data = data[n:]


class Attempt:
    """One attempt the runner handed over: its asyncio task and whether the
    runner asked it to stop at the end of the super-step (shutdown)."""

    def __init__(self, msg: dict[str, Any]) -> None:
        self.id: str = msg["id"]
        self.msg = msg
        self.stop = False
        self.task: asyncio.Task[None] | None = None


class Worker:
    def __init__(self, chan: Channel, init: dict[str, Any]) -> None:
        self.chan = chan
        self.prefix = init.get("prefix") or "baton"
        url = init.get("redis_url")
        if not url:
            raise BatonError("baton: graph worker: init has no redis_url")
        self.redis = redis_sync.Redis.from_url(url, decode_responses=True)
        self.aredis = redis_async.Redis.from_url(url, decode_responses=True)
        # Every graph's store (a node's `store`, get_store()), as LangGraph's
        # server injects its own: baton's, on Redis, shared with /store.
        self.store = BatonStore(self.redis, aredis=self.aredis, prefix=self.prefix)
        self.graphs: dict[str, GraphSpec] = {}
        self.attempts: dict[str, Attempt] = {}
        self.calls: set[asyncio.Task[None]] = set()

    def load(self, graphs: dict[str, str]) -> None:
        for gid, ref in graphs.items():
            spec = load(gid, ref)
            if spec.own_checkpointer:
                print(f"baton: graph {gid!r} was compiled with a checkpointer of its own "
                      f"({spec.own_checkpointer}); baton replaces it with its fenced saver, "
                      "as LangGraph's server does", file=sys.stderr, flush=True)
            self.graphs[gid] = spec

    def handle(self, msg: dict[str, Any]) -> None:
        kind, aid = msg.get("type"), msg.get("id")
        if kind == "run" and isinstance(aid, str):
            att = Attempt(msg)
            self.attempts[aid] = att
            att.task = asyncio.create_task(self.serve(att))
        elif kind == "cancel" and aid in self.attempts:
            task = self.attempts[aid].task
            if task is not None:
                task.cancel(msg.get("reason") or "cancelled by the runner")
        elif kind == "stop" and aid in self.attempts:
            self.attempts[aid].stop = True
        elif kind == "call":
            task = asyncio.create_task(self.call(msg))
            self.calls.add(task)
            task.add_done_callback(self.calls.discard)

    async def serve(self, att: Attempt) -> None:
        try:
            out = await self.attempt(att)
        except asyncio.CancelledError:
            out = {"type": "cancelled"}
        except BaseException as e:  # noqa: BLE001: every failure is the attempt's outcome
            out = {"type": "lost" if is_fenced(e) else "error", "error": f"{type(e).__name__}: {e}",
                   "traceback": traceback.format_exc(), "permanent": _permanent(e)}
        finally:
            self.attempts.pop(att.id, None)
        out["id"] = att.id
        self.chan.send(out)

    async def attempt(self, att: Attempt) -> dict[str, Any]:
        msg = att.msg
        spec = self.graphs.get(msg.get("graph", ""))
        if spec is None:
            raise BatonError(f"baton: unknown graph {msg.get('graph')!r} (this worker serves: "
                             f"{', '.join(sorted(self.graphs)) or 'none'})")
        modes = list(msg.get("stream_mode") or [])
        unknown = [m for m in modes if m not in SDK_MODES]
        if unknown:
            raise BatonError(f"baton: stream_mode {unknown[0]!r}: want one of {', '.join(SDK_MODES)}")
        end = msg.get("interrupts") == "end"
        lease = Lease(thread=msg["thread"], run=msg["run"], node=msg["node"], epoch=msg["epoch"],
                      claim=msg["claim"], worker=msg["worker"], incarnation=msg.get("incarnation") or "")
        saver = BatonSaver(redis=self.redis, aredis=self.aredis, prefix=self.prefix, lease=lease)
        cfg = run_config(msg, lease)
        graph = (await spec.graph(cfg)).copy(update={"checkpointer": saver, "store": self.store})
        # The thread's latest checkpoint decides. One written by another
        # run (or none: a new thread) starts this run's input, and needs no
        # state computed; the run's own means a takeover or a resume.
        head = {"configurable": {"thread_id": lease.thread, "checkpoint_ns": ""}}
        latest_cp = await saver.aget_tuple(head)
        mine = latest_cp is not None and (latest_cp.metadata or {}).get(RUN_KEY) == lease.run
        if msg.get("update_state") is not None:
            return {"type": "done", "result": await update_state(graph, cfg, msg["update_state"],
                                                                 latest_cp if mine else None)}
        if not mine:
            if msg.get("checkpoint_id"):
                await at_checkpoint(saver, cfg, msg["checkpoint_id"])
            state: Any = _LazyState(graph, cfg)
            plan = "start"
        else:
            state = await graph.aget_state(cfg)
            plan = _plan(state, lease.run)
        if plan == "done":  # the previous attempt finished, uncommitted
            return await self.finish(graph, head, end, state.values, [])
        command = msg.get("command") or {}
        if isinstance(state, _LazyState) and command.get("resume", _ABSENT) is not _ABSENT:
            state = await state.get()  # a Command(resume) needs the interrupts the thread is stopped on
            check_resumes(state, msg, lease.thread)
        what, run_cfg = _what(state, plan, msg, cfg)
        if what is _ABSENT:  # stopped on interrupt() and not answered: ask again
            return await self.finish(graph, head, end, state.values, _pending(state))
        if plan == "resume" and what is None and await at_breakpoint(graph, state, msg):
            # The previous attempt stopped at interrupt_before/after: so
            # does this one, running nothing.
            return await self.finish(graph, head, end, state.values, [])
        stream = Stream(modes, bool(msg.get("subgraphs")), lambda event, data: self.chunk(att.id, event, data),
                        lambda: att.stop)
        kwargs: dict[str, Any] = {k: msg[k] for k in ("interrupt_before", "interrupt_after", "context")
                                  if msg.get(k) is not None}
        await stream.run(graph, what, run_cfg, **kwargs)
        if stream.stopped:
            # The super-step is checkpointed (durability "sync"): the
            # runner releases the node and a takeover resumes here.
            return {"type": "stopped"}
        latest = stream.latest
        if latest is None and not end:
            latest = (await graph.aget_state(head)).values
        return await self.finish(graph, head, end, latest, stream.asked)

    async def finish(self, graph: Any, head: dict[str, Any], end: bool, values: Any, asked: list[Any]) -> dict[str, Any]:
        """The attempt's outcome: by default a park on the interrupts, or
        the final state; with interrupts "end", {"values", "interrupts",
        "next"} read from the thread's head, whatever stopped the graph."""
        if not end:
            if asked:
                return {"type": "interrupt", "request": wait_request(asked)}
            return {"type": "done", "result": values}
        state = await graph.aget_state(head)
        return {"type": "done", "result": {"values": state.values, "interrupts": [interrupt_json(i) for i in _pending(state)],
                                           "next": list(state.next or ())}}

    def chunk(self, aid: str, event: str, data: Any) -> None:
        self.chan.send({"type": "chunk", "id": aid, "event": event, "data": data})

    async def call(self, msg: dict[str, Any]) -> None:
        """Answers one call (calls.py) with a reply line."""
        out: dict[str, Any] = {"type": "reply", "id": msg.get("id")}
        try:
            out["result"] = await calls.answer(self, msg.get("op", ""), msg.get("args"))
        except calls.CallError as e:
            out.update(error=str(e), code=e.code)
        except Exception as e:  # noqa: BLE001: every failure is the call's answer
            out.update(error=f"{type(e).__name__}: {e}", code="internal")
        try:
            line = dumps(out)
        except (TypeError, ValueError) as e:
            line = dumps({"type": "reply", "id": msg.get("id"), "error": f"the answer is not JSON: {e}", "code": "internal"})
        if len(line.encode()) > MAX_REPLY:
            # The runner reads lines of up to 64 MiB and stops a worker that
            # writes a longer one: a call must not cost the attempts theirs.
            line = dumps({"type": "reply", "id": msg.get("id"), "code": "invalid",
                          "error": f"the answer is {len(line.encode())} bytes, over {MAX_REPLY}: ask for less (limit)"})
        self.chan.send_line(line)


class _LazyState:
    """The thread's state, not computed: a run that starts on another run's
    checkpoint needs it only for a Command(resume)."""

    def __init__(self, graph: Any, cfg: dict[str, Any]) -> None:
        self.graph, self.cfg = graph, cfg

    async def get(self) -> Any:
        return await self.graph.aget_state(self.cfg)


def _permanent(e: BaseException) -> bool:
    """Whether a failure is the input's, so that retrying cannot help: bad
    input caught by baton, or state LangGraph's serializer cannot encode."""
    if is_fenced(e):
        return False
    if isinstance(e, BatonError):
        return True
    return isinstance(e, TypeError) and "serializable" in str(e)


def _what(state: Any, plan: str, msg: dict[str, Any], cfg: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """What astream gets: None to go on after a takeover, Command(resume=...)
    with the answer of the wait the node parked on, _ABSENT to ask the
    pending interrupts again, or the run's input (or Command) to start.
    One answer goes to one interrupt: the checkpoints written with an answer
    record its wait (metadata baton_resume), as run_node does."""
    from langgraph.types import Command
    resume = msg.get("resume")
    if plan == "resume":
        wait = resume.get("wait") if resume else None
        if wait:
            cfg = {**cfg, "metadata": {**cfg["metadata"], RESUME_KEY: wait}}
        if not _pending(state):
            return None, cfg
        meta = getattr(state, "metadata", None) or {}
        if resume is None or (wait and meta.get(RESUME_KEY) == wait):
            return _ABSENT, cfg
        return Command(resume=resume.get("value")), cfg
    command = msg.get("command")
    if command:
        if "resume" in command and not _pending(state):
            raise BatonError(f"baton: Command(resume) for thread {cfg['configurable']['thread_id']!r}, "
                             "which is stopped on no interrupt")
        return Command(**{k: command[k] for k in ("resume", "update", "goto") if k in command}), cfg
    return (msg["input"] if "input" in msg else {}), cfg


async def main() -> int:
    # The protocol keeps the stdout the runner reads; fd 1 becomes stderr,
    # so a graph's print() cannot corrupt it.
    chan = Channel(os.dup(1))
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner decides when this process ends
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    line = await reader.readline()
    try:
        init = json.loads(line)
        w = Worker(chan, init)
        w.load(init.get("graphs") or {})
    except BaseException as e:  # noqa: BLE001: reported to the runner, which stops
        chan.send({"type": "fatal", "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
        return 3
    chan.send({"type": "ready", "pid": os.getpid(), "graphs": sorted(w.graphs)})
    while line := await reader.readline():
        try:
            msg = json.loads(line)
        except ValueError as e:
            print(f"baton: graph worker: a line from the runner is not JSON: {e}", file=sys.stderr, flush=True)
            continue
        w.handle(msg)
    # stdin closed: the runner is gone, and with it every lease.
    tasks = [a.task for a in w.attempts.values() if a.task is not None]
    for t in tasks:
        t.cancel("the runner closed the channel")
    await asyncio.gather(*tasks, return_exceptions=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
