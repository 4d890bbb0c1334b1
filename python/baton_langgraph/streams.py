"""An attempt's stream, in the events LangGraph's server emits
(docs/graph-workers.md, "Streaming"): a mode's chunks as events named by
the mode ("values", "updates", "messages" for the SDK's messages-tuple,
"custom", "tasks", "checkpoints", "debug"), "mode|ns1|ns2" for a
subgraph's chunks when the run asks for subgraphs, "events" for the
callback events, and, for the SDK's "messages" mode,
"messages/metadata", "messages/partial" (the message so far) and
"messages/complete" (each message once, with its id).

The graph always streams "values" and "updates" too: the attempt needs the
latest state and the interrupts; they are only sent when asked for."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

SDK_MODES = ("values", "updates", "messages", "messages-tuple", "custom", "tasks", "checkpoints", "debug", "events")
"""Stream modes an attempt may ask for, by the SDK's names."""


def _clean_config(config: Any) -> Any:
    if isinstance(config, dict) and isinstance(config.get("configurable"), dict):
        config = {**config, "configurable": {k: v for k, v in config["configurable"].items() if not k.startswith("__")}}
        config.pop("callbacks", None)
    return config


def _checkpoint(config: Any, task: bool = False) -> dict[str, Any] | None:
    conf = (config or {}).get("configurable") if isinstance(config, dict) else None
    if not conf or not conf.get("thread_id") or (not task and not conf.get("checkpoint_id")):
        return None
    return {"thread_id": conf["thread_id"], "checkpoint_id": conf.get("checkpoint_id"),
            "checkpoint_ns": conf.get("checkpoint_ns") or "", "checkpoint_map": conf.get("checkpoint_map")}


def _task(task: Any) -> Any:
    if not isinstance(task, dict) or not isinstance(task.get("state"), dict) or not _checkpoint(task["state"], True):
        return task
    out = {k: v for k, v in task.items() if k != "state"}
    out["checkpoint"] = _checkpoint(task["state"], True)
    return out


def _checkpoint_payload(p: Any) -> Any:
    """A checkpoints chunk as the server shows it: with checkpoint and
    parent_checkpoint, configs without LangGraph's internal keys."""
    if not isinstance(p, dict):
        return p
    out = {**p, "checkpoint": _checkpoint(p.get("config")), "parent_checkpoint": _checkpoint(p.get("parent_config")),
           "tasks": [_task(t) for t in p.get("tasks") or ()]}
    out["config"] = _clean_config(out.get("config"))
    out["parent_config"] = _clean_config(out.get("parent_config"))
    return out


def _shape(mode: str, data: Any) -> Any:
    if mode == "checkpoints":
        return _checkpoint_payload(data)
    if mode == "tasks":
        return _task(data)
    if mode == "debug" and isinstance(data, dict):
        if data.get("type") == "checkpoint":
            return {**data, "payload": _checkpoint_payload(data.get("payload"))}
        if data.get("type") == "task_result":
            return {**data, "payload": _task(data.get("payload"))}
    if mode == "messages" and isinstance(data, tuple):
        return list(data)
    return data


class Stream:
    """Runs one attempt's graph and sends the events its run asked for.

    send(event, data) writes one event; after run(), latest is the last
    root "values" chunk (or None), asked the interrupts the root reported,
    and stopped whether should_stop() ended it at a super-step."""

    def __init__(self, modes: list[str], subgraphs: bool, send: Callable[[str, Any], None],
                 should_stop: Callable[[], bool]) -> None:
        self.modes = modes
        self.subgraphs = subgraphs
        self.send = send
        self.should_stop = should_stop
        self.latest: Any = None
        self.asked: list[Any] = []
        self.stopped = False
        self._partial: dict[str, Any] = {}
        self._complete: set[str] = set()

    def graph_modes(self) -> list[str]:
        lib = [m for m in self.modes if m not in ("events", "messages", "messages-tuple")]
        if "messages-tuple" in self.modes:
            lib.append("messages")
        return list(dict.fromkeys([*lib, "values", "updates"]))

    def _chunk(self, ns: tuple[str, ...], mode: str, data: Any) -> bool:
        """Handles one chunk; True when the attempt stops here."""
        if not ns:
            if mode == "updates" and isinstance(data, dict) and "__interrupt__" in data:
                self.asked.extend(data["__interrupt__"])
            elif mode == "values":
                self.latest = data
                if "messages" in self.modes:
                    self._completed(data)
        wanted = "messages-tuple" if mode == "messages" else mode
        if wanted in self.modes:
            name = "|".join([mode, *ns]) if self.subgraphs and ns else mode
            self.send(name, _shape(mode, data))
        if not ns and mode == "values" and self.should_stop():
            self.stopped = True
            return True
        return False

    def _completed(self, values: Any) -> None:
        msgs = values.get("messages") if isinstance(values, dict) else getattr(values, "messages", None)
        if msgs is None:
            return
        if not isinstance(msgs, list):
            msgs = [msgs]
        new = []
        for m in msgs:
            mid = getattr(m, "id", None) or (m.get("id") if isinstance(m, dict) else None)
            if mid and mid not in self._complete:
                self._complete.add(mid)
                new.append(m)
        if new:
            self.send("messages/complete", new)

    def _token(self, event: dict[str, Any]) -> None:
        if "nostream" in (event.get("tags") or ()):
            return
        msg = (event.get("data") or {}).get("chunk")
        mid = getattr(msg, "id", None)
        if not mid:
            return
        if mid not in self._partial:
            self._partial[mid] = msg
            self.send("messages/metadata", {mid: {"metadata": event.get("metadata")}})
        else:
            self._partial[mid] = self._partial[mid] + msg
        self.send("messages/partial", [self._partial[mid]])

    async def run(self, graph: Any, what: Any, config: dict[str, Any], **kwargs: Any) -> None:
        kwargs = {**kwargs, "stream_mode": self.graph_modes(), "subgraphs": self.subgraphs, "durability": "sync"}
        if "events" not in self.modes and "messages" not in self.modes:
            async for item in graph.astream(what, config, **kwargs):
                ns, mode, data = item if self.subgraphs else ((), *item)
                if self._chunk(tuple(ns), mode, data):
                    return
            return
        # The callback events are needed: the SDK's "events", or the
        # tokens of its "messages" mode (LangGraph's server does the same).
        run_id = str(config.get("run_id") or uuid.uuid4())
        config = {**config, "run_id": run_id}
        async for ev in graph.astream_events(what, config, version="v2", **kwargs):
            if "langsmith:hidden" in (ev.get("tags") or ()):
                continue
            if ev.get("event") == "on_chain_stream" and str(ev.get("run_id")) == run_id:
                chunk = ev["data"]["chunk"]
                ns, mode, data = chunk if self.subgraphs else ((), *chunk)
                if self._chunk(tuple(ns), mode, data):
                    return
                continue
            if "events" in self.modes:
                self.send("events", ev)
            if "messages" in self.modes and ev.get("event") == "on_chat_model_stream":
                self._token(ev)
