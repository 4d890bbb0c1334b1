"""The Agent Server API's run fields in the graph worker (docs/graph-workers.md,
"The node kind graph"): the attempt's config as LangGraph's server builds
it, time travel (checkpoint_id), breakpoints met again after a retry, the
interrupts a command.resume answers (resumes), and update_state."""

from __future__ import annotations

import functools
from typing import Any

from .errors import BatonError
from .lease import Lease
from .node import RUN_KEY, _pending
from .saver import BatonSaver


def run_config(msg: dict[str, Any], lease: Lease) -> dict[str, Any]:
    """The attempt's RunnableConfig: the run's config, on the run's thread,
    with the run's metadata (as LangGraph's server passes it) and the
    metadata baton's plan reads."""
    cfg: dict[str, Any] = dict(msg.get("config") or {})
    conf = dict(cfg.get("configurable") or {})
    # A checkpoint_id in the config is the run's checkpoint_id: the plan
    # reads the thread's head, and only a run's start goes to the past.
    cid = conf.pop("checkpoint_id", None)
    if cid and not msg.get("checkpoint_id"):
        msg["checkpoint_id"] = cid
    ids = {"graph_id": msg.get("graph"), **({"assistant_id": msg["assistant_id"]} if msg.get("assistant_id") else {})}
    cfg["configurable"] = {**conf, **ids, "run_id": lease.run, "thread_id": lease.thread}
    meta = {**cfg.get("metadata", {}), **(msg.get("metadata") or {}), **ids, "run_attempt": msg.get("attempt"),
            **_server_metadata()}
    cfg["metadata"] = {**meta, RUN_KEY: lease.run}
    return cfg


@functools.cache
def _server_metadata() -> dict[str, Any]:
    """What LangGraph's server adds to a run's config.metadata."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        v = version("langgraph")
    except PackageNotFoundError:
        v = "0.0.0"
    return {"langgraph_version": v, "langgraph_plan": "developer", "langgraph_host": "self-hosted"}  # copied per run


async def at_breakpoint(graph: Any, state: Any, msg: dict[str, Any]) -> bool:
    """Whether the run's own latest checkpoint is where its
    interrupt_before (a next node) or interrupt_after (a node of the step
    that wrote it) stops the graph. Going on from it with None would pass
    the breakpoint: LangGraph stops there once."""
    before, after = msg.get("interrupt_before"), msg.get("interrupt_after")
    nxt = set(state.next or ())
    if nxt and (before == "*" or (isinstance(before, list) and nxt & set(before))):
        return True
    if not after or not state.parent_config:
        return False
    ran = set((await graph.aget_state(state.parent_config)).next or ())
    return bool(ran) and (after == "*" or bool(ran & set(after)))


async def at_checkpoint(saver: BatonSaver, cfg: dict[str, Any], checkpoint_id: str) -> None:
    """Points cfg at a past checkpoint of the thread (LangGraph's time
    travel), which must exist."""
    cfg["configurable"] = {**cfg["configurable"], "checkpoint_id": checkpoint_id}
    at = {"configurable": {"thread_id": cfg["configurable"]["thread_id"], "checkpoint_ns": "",
                           "checkpoint_id": checkpoint_id}}
    if await saver.aget_tuple(at) is None:
        raise BatonError(f"baton: checkpoint_id {checkpoint_id!r}: thread {cfg['configurable']['thread_id']!r} "
                         "has no such checkpoint")


def check_resumes(state: Any, msg: dict[str, Any], thread: str) -> None:
    """A command.resume that names the interrupts it answers (resumes)
    continues only while one of them is pending: two runs answering the
    same interrupt, one after the other on the thread, continue it once."""
    want = msg.get("resumes")
    if not want:
        return
    pending = [i.id for i in _pending(state)]
    if not pending:
        raise BatonError(f"baton: thread {thread!r} has no interrupt: interrupt {', '.join(want)} was answered already")
    if not set(want) & set(pending):
        raise BatonError(f"baton: interrupt already answered: {', '.join(want)} (thread {thread!r} is stopped on "
                         f"{', '.join(pending)})")


async def update_state(graph: Any, cfg: dict[str, Any], u: dict[str, Any], mine: Any) -> dict[str, Any]:
    """graph.aupdate_state through the attempt's fenced saver; its result
    is the checkpoint written. An attempt of a run whose update is the
    thread's head already (the previous attempt was not committed) answers
    that checkpoint, writing nothing."""
    if mine is not None:
        return {"checkpoint": _checkpoint_ref(mine.config)}
    as_node = u.get("as_node")
    if as_node is not None and as_node not in graph.nodes and as_node not in ("__input__", "__copy__"):
        raise BatonError(f"baton: update_state: as_node {as_node!r}: the graph has no such node (its nodes: "
                         f"{', '.join(n for n in graph.nodes if not n.startswith('__'))})")
    ucfg = {**cfg, "configurable": dict(cfg["configurable"])}
    if u.get("checkpoint_id"):
        await at_checkpoint(graph.checkpointer, ucfg, u["checkpoint_id"])
    new = await graph.aupdate_state(ucfg, u.get("values"), as_node=as_node)
    return {"checkpoint": _checkpoint_ref(new)}


def _checkpoint_ref(config: Any) -> dict[str, Any]:
    conf = config["configurable"]
    return {"thread_id": conf["thread_id"], "checkpoint_ns": conf.get("checkpoint_ns") or "",
            "checkpoint_id": conf["checkpoint_id"]}
