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

RESUME_KEY = "baton_resume"
"""The checkpoint metadata key that records the wait whose answer the graph
was resumed with: run_node gives one answer to one interrupt by it."""

RESUME_ENV = "BATON_RESUME_FILE"
"""The environment variable the exec kind sets, on the attempt after a resume,
to a file holding the resume's value (JSON)."""

_ABSENT = object()


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


def _pending(state: Any) -> list[Any]:
    """The interrupts a saved state is stopped on (its tasks' pending interrupts)."""
    return [i for t in getattr(state, "tasks", ()) or () for i in getattr(t, "interrupts", ()) or ()]


def wait_request(interrupts: list[Any]) -> Any:
    """The wait request for the interrupts a graph stopped on, the JSON of the
    "::wait" line that parks the node: one interrupt's value as it is (what
    ``interrupt(value)`` was called with); several (parallel nodes each
    asking) as ``{"interrupts": [{"id", "value"}, ...]}``, answered by a
    resume whose value maps each interrupt id to its answer."""
    if len(interrupts) == 1:
        return interrupts[0].value
    return {"interrupts": [{"id": i.id, "value": i.value} for i in interrupts]}


def _resume_value(env: Mapping[str, str]) -> Any:
    """The resume's value from BATON_RESUME_FILE, or _ABSENT when unset."""
    path = env.get(RESUME_ENV)
    if not path:
        return _ABSENT
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise BatonError(f"baton: run_node: {RESUME_ENV}: {e}") from None
    try:
        return json.loads(text)
    except ValueError as e:
        raise BatonError(f"baton: run_node: {RESUME_ENV} {path} is not JSON: {e}") from None


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


def _given(state: Any, wait: str | None) -> bool:
    """Whether wait's answer was given already: the state's checkpoint was
    written by an attempt that held it (the same answer comes with every
    attempt until the node parks again)."""
    meta = getattr(state, "metadata", None) or {}
    return wait is not None and meta.get(RESUME_KEY) == wait


def _what_to_invoke(state: Any, plan: str, input: Any, env: Mapping[str, str], answer: Any,
                    cfg: dict[str, Any], wait: str | None) -> tuple[Any, dict[str, Any]]:
    """What invoke gets, and its config: None to resume, Command(resume=...)
    to answer an interrupt, _ABSENT to ask the pending interrupts again
    without running, or the run's input to start. An attempt that holds a
    resume's answer records its wait in every checkpoint it writes: an
    interrupt in such a checkpoint came after the answer was given."""
    if plan != "resume":
        return _input(input, env), cfg
    if wait is not None:
        cfg = {**cfg, "metadata": {**cfg["metadata"], RESUME_KEY: wait}}
    if not _pending(state):
        return None, cfg
    if answer is _ABSENT or _given(state, wait):
        return _ABSENT, cfg  # stopped on interrupt() and not answered: the park was lost with its attempt
    from langgraph.types import Command
    return Command(resume=answer), cfg


def _finish(result: Any, asked: list[Any], out: Any) -> Any:
    """Prints the node's result line, or, for a graph stopped on interrupt(),
    the "::wait" line that parks the node."""
    if asked:
        # Compact, as runNode's JSON.stringify: the same line from either language.
        line = "::wait " + json.dumps(wait_request(asked), default=_jsonable, ensure_ascii=False,
                                      separators=(",", ":"))
    else:
        line = json.dumps(result, default=_jsonable, ensure_ascii=False)
    out.write(line + "\n")
    out.flush()
    return result


def _asked(result: Any) -> list[Any]:
    if isinstance(result, Mapping):
        return list(result.get("__interrupt__") or ())
    return []


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
    - A graph that stops on LangGraph's ``interrupt(value)`` parks the node:
      instead of a result, run_node prints ``::wait <request>`` (wait_request:
      the interrupt's value) and returns, and the process exits 0; the node
      is WAITING, with no lease and no worker, until a resume. The attempt
      after the resume finds the value in BATON_RESUME_FILE and resumes the
      graph with ``Command(resume=value)`` where it stopped (only a graph this
      run started, stopped on an interrupt). The checkpoints an attempt
      holding that value writes record the wait it answers (metadata
      ``baton_resume``), so that it answers one interrupt only. Without a resume, or with one
      already given (the park was lost with its attempt), a graph stopped on
      an interrupt asks again, running nothing.
    - A refused write or a lost claim ends the process with exit code 75.

    Returns the result (for tests; an exec node's main just calls it): the
    final state, with ``__interrupt__`` when the graph stopped on interrupt().
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
            asked: list[Any] = []
            if plan == "done":
                result = state.values
            else:
                answer = _resume_value(env) if plan == "resume" else _ABSENT
                wait = saver.resumed_wait() if answer is not _ABSENT else None
                what, run_cfg = _what_to_invoke(state, plan, input, env, answer, cfg, wait)
                if what is _ABSENT:
                    asked = _pending(state)
                    result = {**state.values, "__interrupt__": asked}
                else:
                    result = graph.invoke(what, run_cfg, durability="sync")
                    asked = _asked(result) or _pending(graph.get_state(cfg))
    except BaseException as e:
        if is_fenced(e) or saver.lost is not None:
            exit_lost(saver.lost or e)
        saver.close()
        raise
    if saver.lost is not None:
        exit_lost(saver.lost)
    saver.close()
    return _finish(result, asked, out)


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
            asked: list[Any] = []
            if plan == "done":
                result = state.values
            else:
                answer = _resume_value(env) if plan == "resume" else _ABSENT
                wait = await saver.aresumed_wait() if answer is not _ABSENT else None
                what, run_cfg = _what_to_invoke(state, plan, input, env, answer, cfg, wait)
                if what is _ABSENT:
                    asked = _pending(state)
                    result = {**state.values, "__interrupt__": asked}
                else:
                    result = await graph.ainvoke(what, run_cfg, durability="sync")
                    asked = _asked(result) or _pending(await graph.aget_state(cfg))
    except BaseException as e:
        if is_fenced(e) or saver.lost is not None:
            exit_lost(saver.lost or e)
        await saver.aclose()
        raise
    if saver.lost is not None:
        exit_lost(saver.lost)
    await saver.aclose()
    return _finish(result, asked, out)


__all__ = ["RUN_KEY", "RESUME_KEY", "INPUT_ENV", "RESUME_ENV", "progress", "run_node", "arun_node", "wait_request"]
