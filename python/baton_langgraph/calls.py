"""The graph worker's calls: what the Agent Server API asks of a graph
outside any run (a thread's state and history, the graph's schemas and
drawing), answered with a read-only saver, in the JSON shape LangGraph's
server answers with (docs/graph-workers.md, "Calls").

A call holds no lease: its saver refuses every write before touching
Redis, and it takes no attempt's slot, so calls never wait for attempts."""

from __future__ import annotations

from typing import Any

from .errors import BatonError


class CallError(Exception):
    """A call that cannot be answered: code is "not_found" or "invalid"."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def interrupt_json(i: Any) -> dict[str, Any]:
    """An Interrupt as LangGraph's server shows it: {"id", "value"}."""
    return {"id": getattr(i, "id", None), "value": getattr(i, "value", None)}


def checkpoint_json(config: Any) -> dict[str, Any] | None:
    """A checkpoint's config as the server's checkpoint object, or None
    when it names no checkpoint (runnableConfigToCheckpoint)."""
    conf = (config or {}).get("configurable") or {}
    if not conf.get("thread_id") or not conf.get("checkpoint_id"):
        return None
    return {"thread_id": conf["thread_id"], "checkpoint_ns": conf.get("checkpoint_ns") or "",
            "checkpoint_id": conf["checkpoint_id"], "checkpoint_map": conf.get("checkpoint_map")}


def _task_checkpoint(config: Any) -> dict[str, Any] | None:
    conf = (config or {}).get("configurable") or {}
    if not conf.get("thread_id"):
        return None
    return {"thread_id": conf["thread_id"], "checkpoint_ns": conf.get("checkpoint_ns") or "",
            "checkpoint_id": conf.get("checkpoint_id"), "checkpoint_map": conf.get("checkpoint_map")}


def _is_snapshot(v: Any) -> bool:
    return hasattr(v, "values") and hasattr(v, "next") and hasattr(v, "tasks")


def thread_state(s: Any) -> dict[str, Any]:
    """A StateSnapshot as the API's ThreadState: values, next, tasks,
    metadata, created_at, checkpoint, parent_checkpoint, interrupts."""
    tasks = []
    for t in s.tasks or ():
        st = getattr(t, "state", None)
        tasks.append({
            "id": t.id, "name": t.name, "path": list(getattr(t, "path", ()) or ()),
            "error": None if t.error is None else (t.error if isinstance(t.error, str) else f"{type(t.error).__name__}: {t.error}"),
            "interrupts": [interrupt_json(i) for i in t.interrupts or ()],
            "checkpoint": _task_checkpoint(st) if isinstance(st, dict) else None,
            "state": thread_state(st) if _is_snapshot(st) else None,
            "result": getattr(t, "result", None),
        })
    interrupts = getattr(s, "interrupts", None)
    if interrupts is None:
        interrupts = [i for t in s.tasks or () for i in t.interrupts or ()]
    return {
        "values": s.values, "next": list(s.next or ()), "tasks": tasks, "metadata": s.metadata,
        "created_at": s.created_at, "checkpoint": checkpoint_json(s.config),
        "parent_checkpoint": checkpoint_json(s.parent_config),
        "interrupts": [interrupt_json(i) for i in interrupts],
    }


def _str(args: dict[str, Any], name: str, required: bool = False) -> str | None:
    v = args.get(name)
    if v is None and not required:
        return None
    if not isinstance(v, str) or not v:
        raise CallError("invalid", f"{name}: want a non-empty string, got {v!r}")
    return v


def _config(args: dict[str, Any]) -> dict[str, Any]:
    thread = _str(args, "thread", required=True)
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    cp = args.get("checkpoint")
    if cp is not None:
        if not isinstance(cp, dict):
            raise CallError("invalid", f"checkpoint: want an object {{checkpoint_id, checkpoint_ns}}, got {cp!r}")
        conf.update({k: v for k, v in cp.items() if k in ("checkpoint_id", "checkpoint_ns", "checkpoint_map") and v is not None})
    cid = _str(args, "checkpoint_id")
    if cid:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


async def _snapshot_exists(saver: Any, config: dict[str, Any]) -> None:
    if config["configurable"].get("checkpoint_id") and await saver.aget_tuple(config) is None:
        raise CallError("not_found", f"thread {config['configurable']['thread_id']!r} has no checkpoint "
                                     f"{config['configurable']['checkpoint_id']!r}")


async def get_state(graph: Any, saver: Any, args: dict[str, Any]) -> Any:
    """{graph, thread, checkpoint_id?, checkpoint?, subgraphs?} -> ThreadState."""
    config = _config(args)
    await _snapshot_exists(saver, config)
    return thread_state(await graph.aget_state(config, subgraphs=bool(args.get("subgraphs"))))


async def history(graph: Any, saver: Any, args: dict[str, Any]) -> Any:
    """{graph, thread, limit?, before?, metadata?, checkpoint?} -> [ThreadState], newest first."""
    config = _config(args)
    limit = args.get("limit", 10)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise CallError("invalid", f"limit: want a positive integer, got {limit!r}")
    before = args.get("before")
    if isinstance(before, str):
        before = {"configurable": {"checkpoint_id": before}}
    elif isinstance(before, dict):
        before = before if "configurable" in before else {"configurable": before}
    elif before is not None:
        raise CallError("invalid", f"before: want a checkpoint id or a checkpoint object, got {before!r}")
    meta = args.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise CallError("invalid", f"metadata: want an object, got {meta!r}")
    return [thread_state(s) async for s in graph.aget_state_history(config, filter=meta or None, before=before,
                                                                     limit=limit)]


def _schema(f: Any) -> Any:
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # get_config_jsonschema's deprecation: the API still shows it
            return f()
    except Exception:  # noqa: BLE001: a graph whose schema cannot be drawn has none
        return None


def _keys(channels: Any) -> list[str]:
    if isinstance(channels, str):
        return [channels]
    return [k for k in channels or () if not k.startswith("__")]


def _loose(graph: Any, suffix: str, keys: list[str]) -> dict[str, Any]:
    """A schema naming the channels, when pydantic cannot draw the real one
    (typing.TypedDict on Python < 3.12): any value for each."""
    return {"title": graph.get_name(suffix), "type": "object", "properties": {k: {} for k in keys}}


def _state_schema(graph: Any) -> Any:
    """The graph's state schema: its builder's state type's JSON schema, or
    its channels'."""
    b = getattr(graph, "builder", None)
    schema = getattr(b, "state_schema", None) if b is not None else None
    if schema is not None:
        try:
            from pydantic import TypeAdapter
            return TypeAdapter(schema).json_schema()
        except Exception:  # noqa: BLE001: drawn from the channels instead
            pass
    return _loose(graph, "State", _keys(getattr(graph, "stream_channels", None) or graph.channels))


def _fields(graph: Any, which: str, channels: Any) -> list[str]:
    """The fields of the builder's input or output type, else the channels."""
    t = getattr(getattr(graph, "builder", None), which, None)
    ann = getattr(t, "__annotations__", None)
    return [k for k in ann if not k.startswith("_")] if ann else _keys(channels)


def schemas(graph_id: str, graph: Any) -> dict[str, Any]:
    """{graph} -> {graph_id, input_schema, output_schema, state_schema, config_schema, context_schema}."""
    return {"graph_id": graph_id,
            "input_schema": _schema(graph.get_input_jsonschema) or _loose(graph, "Input", _fields(graph, "input_schema", graph.input_channels)),
            "output_schema": _schema(graph.get_output_jsonschema) or _loose(graph, "Output", _fields(graph, "output_schema", graph.output_channels)),
            "state_schema": _state_schema(graph),
            "config_schema": _schema(graph.get_config_jsonschema),
            "context_schema": _schema(graph.get_context_jsonschema)}


async def drawing(graph: Any, args: dict[str, Any]) -> Any:
    """{graph, xray?} -> the drawable graph's JSON (nodes, edges)."""
    xray = args.get("xray", False)
    if not isinstance(xray, (bool, int)):
        raise CallError("invalid", f"xray: want true, false or a depth, got {xray!r}")
    return (await graph.aget_graph(xray=xray)).to_json()


async def subgraphs(graph_id: str, graph: Any, args: dict[str, Any]) -> dict[str, Any]:
    """{graph, namespace?, recurse?} -> {namespace: schemas}."""
    ns = _str(args, "namespace")
    out = {}
    async for name, sub in graph.aget_subgraphs(namespace=ns, recurse=bool(args.get("recurse"))):
        out[name] = schemas(graph_id, sub)
    return out


async def answer(worker: Any, op: str, args: Any) -> Any:
    """The answer to one call, or CallError."""
    from .saver import BatonSaver
    if not isinstance(args, dict):
        raise CallError("invalid", f"args: want an object, got {args!r}")
    spec = worker.graphs.get(args.get("graph", ""))
    if spec is None:
        raise CallError("not_found", f"unknown graph {args.get('graph')!r} (this worker serves: "
                                     f"{', '.join(sorted(worker.graphs)) or 'none'})")
    reader = BatonSaver.reader(worker.redis, aredis=worker.aredis, prefix=worker.prefix)
    try:
        graph = (await spec.graph({"configurable": {}})).copy(update={"checkpointer": reader})
    except BatonError as e:
        raise CallError("invalid", str(e)) from None
    if op == "get_state":
        return await get_state(graph, reader, args)
    if op == "history":
        return await history(graph, reader, args)
    if op == "schemas":
        return schemas(spec.id, graph)
    if op == "graph":
        return await drawing(graph, args)
    if op == "subgraphs":
        return await subgraphs(spec.id, graph, args)
    raise CallError("invalid", f"unknown op {op!r} (want get_state, history, schemas, graph, subgraphs)")
