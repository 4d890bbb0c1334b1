"""run_node: the whole main program of a LangGraph agent run as a baton exec node."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from .errors import BatonError, is_fenced
from .saver import BatonSaver, exit_lost

RUN_KEY = "baton_run"
"""The checkpoint metadata key that records the run that wrote a checkpoint."""

INPUT_ENV = "GRAPH_INPUT"
"""The environment variable run_node reads the graph's input from (JSON), when
no input is given: set it in the node's input.env."""


def progress(percent: float) -> None:
    """Reports the node's progress (0-100) to the runner: a "::progress N"
    line on the process's real stdout, which run_node keeps for the runner."""
    out = sys.__stdout__
    if out is not None:
        out.write(f"::progress {max(0, min(100, round(percent)))}\n")
        out.flush()


def _jsonable(v: Any) -> Any:
    for attr in ("model_dump", "dict", "_asdict"):
        f = getattr(v, attr, None)
        if callable(f):
            with contextlib.suppress(Exception):
                return f()
    if isinstance(v, (set, frozenset, tuple)):
        return list(v)
    return repr(v)


def _saver_of(graph: Any, env: Mapping[str, str]) -> tuple[Any, BatonSaver]:
    saver = getattr(graph, "checkpointer", None)
    if isinstance(saver, BatonSaver):
        if saver.lease is None:
            raise BatonError("baton: run_node: the graph's BatonSaver has no lease: use BatonSaver.from_env()")
        return graph, saver
    if saver not in (None, False, True):
        raise BatonError(f"baton: run_node: the graph's checkpointer is a {type(saver).__name__}, "
                         "not a BatonSaver: compile it with checkpointer=BatonSaver.from_env(), or with none")
    saver = BatonSaver.from_env(env)
    return graph.copy(update={"checkpointer": saver}), saver


def _plan(state: Any, run: str) -> str:
    """resume, done or start, by who wrote the thread's latest checkpoint."""
    meta = getattr(state, "metadata", None) or {}
    if meta.get(RUN_KEY) != run:
        return "start"  # a new run on the thread: its own input, on the thread's state
    return "resume" if getattr(state, "next", ()) else "done"


def _input(input: Any, env: Mapping[str, str]) -> Any:
    if callable(input):
        return input(env)
    if input is not None:
        return input
    raw = env.get(INPUT_ENV)
    if raw is None:
        return {}
    try:
        return json.loads(raw)
    except ValueError as e:
        raise BatonError(f"baton: run_node: {INPUT_ENV} is not JSON: {e}") from None


def _finish(result: Any, saver: BatonSaver, out: Any) -> Any:
    saver.close()
    line = json.dumps(result, default=_jsonable, ensure_ascii=False)
    out.write(line + "\n")
    out.flush()
    return result


def run_node(graph: Any, input: Any = None, *, env: Mapping[str, str] | None = None,
             config: Mapping[str, Any] | None = None) -> Any:
    """Runs graph as the exec node this process is, and prints its result.

    - The thread is the run's (BATON_THREAD_ID); the graph's checkpointer is
      its BatonSaver (BatonSaver.from_env() when it was compiled without one).
    - Every checkpoint records this run under metadata["baton_run"], and the
      thread's latest checkpoint decides: written by this run with steps
      left, the graph resumes (input None); written by this run and
      finished, it is not run again and its state is the result; otherwise
      it starts with this run's input (``input``, a callable of the
      environment, or the JSON in GRAPH_INPUT), on the thread's state.
    - Durability is "sync": each super-step is saved before the next starts.
    - The final state is printed as one JSON line on stdout, the node's
      result; what the graph prints goes to stderr meanwhile (progress()
      reaches the runner).
    - A refused write or a lost claim ends the process with exit code 75.

    Returns the result (for tests; an exec node's main just calls it).
    """
    env = os.environ if env is None else env
    run = env.get("BATON_RUN_ID")
    if not run:
        raise BatonError("baton: BATON_RUN_ID is not set: run_node runs inside a baton exec node")
    graph, saver = _saver_of(graph, env)
    assert saver.lease is not None
    cfg: dict[str, Any] = dict(config or {})
    cfg["configurable"] = {**cfg.get("configurable", {}), "thread_id": saver.lease.thread}
    cfg["metadata"] = {**cfg.get("metadata", {}), RUN_KEY: run}
    out = sys.stdout
    try:
        with contextlib.redirect_stdout(sys.stderr):
            state = graph.get_state(cfg)
            plan = _plan(state, run)
            if plan == "done":
                result = state.values
            else:
                result = graph.invoke(None if plan == "resume" else _input(input, env), cfg, durability="sync")
    except BaseException as e:
        if is_fenced(e) or saver.lost is not None:
            exit_lost(saver.lost or e)
        saver.close()
        raise
    if saver.lost is not None:
        exit_lost(saver.lost)
    return _finish(result, saver, out)


async def arun_node(graph: Any, input: Any = None, *, env: Mapping[str, str] | None = None,
                    config: Mapping[str, Any] | None = None) -> Any:
    """run_node for graphs with async nodes: the same rules, with ainvoke."""
    env = os.environ if env is None else env
    run = env.get("BATON_RUN_ID")
    if not run:
        raise BatonError("baton: BATON_RUN_ID is not set: run_node runs inside a baton exec node")
    graph, saver = _saver_of(graph, env)
    assert saver.lease is not None
    cfg: dict[str, Any] = dict(config or {})
    cfg["configurable"] = {**cfg.get("configurable", {}), "thread_id": saver.lease.thread}
    cfg["metadata"] = {**cfg.get("metadata", {}), RUN_KEY: run}
    out = sys.stdout
    try:
        with contextlib.redirect_stdout(sys.stderr):
            state = await graph.aget_state(cfg)
            plan = _plan(state, run)
            if plan == "done":
                result = state.values
            else:
                result = await graph.ainvoke(None if plan == "resume" else _input(input, env), cfg,
                                             durability="sync")
    except BaseException as e:
        if is_fenced(e) or saver.lost is not None:
            exit_lost(saver.lost or e)
        await saver.aclose()
        raise
    if saver.lost is not None:
        exit_lost(saver.lost)
    await saver.aclose()
    return _finish(result, saver, out)


__all__ = ["RUN_KEY", "INPUT_ENV", "progress", "run_node", "arun_node"]
