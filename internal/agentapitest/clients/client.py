"""Drives an Agent Server with LangGraph's official Python SDK and prints a
normalised transcript (JSON) of what it saw: event names and order, payloads
with ids and times replaced by placeholders. The same steps as client.mjs.

    python client.py --url http://127.0.0.1:PORT (--sync | --async) --tag T

--sync uses get_sync_client, --async get_client: one body of steps drives
both (`w` awaits what the async client returns; `chunks` iterates either
kind of stream). --tag keeps this script's store items apart from the other
scripts' on the same server. A step that raises records its HTTP status.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import re
import sys
import threading
import time
import traceback

import httpx
from langgraph.graph import START, StateGraph
from langgraph.pregel.remote import RemoteGraph
from langgraph_sdk import get_client, get_sync_client
from typing_extensions import Annotated, TypedDict
import operator

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\b[0-9a-f]{32}\b", re.I)
TIME = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d")


def norm(x):
    """Replaces ids and times (in keys too), leaving the shape and every other value."""
    if isinstance(x, dict):
        return {UUID.sub("<id>", k): norm(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [norm(v) for v in x]
    if isinstance(x, str):
        if TIME.match(x):
            return "<time>"
        return UUID.sub("<id>", x)
    return x


async def w(x):
    return await x if inspect.isawaitable(x) else x


async def chunks(stream, limit=None):
    """The stream's parts as [event, data]; with limit, stops (closing the
    connection) after that many and returns the last part's id too."""
    out, last = [], None
    if hasattr(stream, "__aiter__"):
        async for p in stream:
            out.append([p.event, p.data]); last = p.id
            if limit and len(out) >= limit:
                await stream.aclose()
                break
    else:
        for p in stream:
            out.append([p.event, p.data]); last = p.id
            if limit and len(out) >= limit:
                stream.close()
                break
    return out, last


def status_of(e):
    if isinstance(e, httpx.HTTPStatusError):
        return {"error": e.response.status_code}
    return {"error": type(e).__name__}


class Steps(TypedDict, total=False):
    topic: str
    steps: Annotated[list[str], operator.add]
    answer: str


async def until_running(c, tid, rid):
    for _ in range(400):
        run = await w(c.runs.get(tid, rid))
        if run["status"] != "pending":
            return run["status"]
        await asyncio.sleep(0.025)
    return "pending"


def steps(url, sync, tag):
    """The steps, in order, as (name, coroutine function of a client)."""
    c = None  # each step's own client, set by the step's wrapper below

    async def thread():
        return (await w(c.threads.create()))["thread_id"]

    async def thread_create():
        t = await w(c.threads.create(metadata={"owner": tag}))
        got = await w(c.threads.get(t["thread_id"]))
        return {"created": t, "got": got}

    async def stream():
        tid = await thread()
        s = c.runs.stream(tid, "chat", input={"messages": [{"role": "user", "content": "hi"}]},
                          stream_mode=["values", "updates", "messages-tuple", "custom"])
        events, _ = await chunks(s)
        return events

    async def wait_join():
        tid = await thread()
        waited = await w(c.runs.wait(tid, "agent", input={"topic": "wait"}))
        run = await w(c.runs.create(tid, "agent", input={"topic": "join"}))
        joined = await w(c.runs.join(tid, run["run_id"]))
        got = await w(c.runs.get(tid, run["run_id"]))
        listed = await w(c.runs.list(tid))
        return {"wait": waited, "created": run, "join": joined, "run": got,
                "list_statuses": sorted(r["status"] for r in listed)}

    async def cancel():
        tid = await thread()
        run = await w(c.runs.create(tid, "agent", input={"topic": "c", "delay_ms": 2000}))
        at("until_running")
        before = await until_running(c, tid, run["run_id"])
        at("cancel wait=True")
        await w(c.runs.cancel(tid, run["run_id"], wait=True))
        at("after cancel")
        got = await w(c.runs.get(tid, run["run_id"]))
        th = await w(c.threads.get(tid))
        return {"before": before, "status": got["status"], "thread_status": th["status"]}

    async def multitask(strategy):
        tid = await thread()
        r1 = await w(c.runs.create(tid, "agent", input={"topic": "first", "delay_ms": 600}))
        at("until_running")
        await until_running(c, tid, r1["run_id"])
        # Started for good: its input is the thread's state (a run only
        # claimed has written nothing a strategy could keep or roll back).
        at("until_state")
        for _ in range(400):
            if (await w(c.threads.get_state(tid)))["values"].get("topic") == "first":
                break
            await asyncio.sleep(0.025)
        at("create second")
        res = {}
        try:
            r2 = await w(c.runs.create(tid, "agent", input={"topic": "second"}, multitask_strategy=strategy))
            res["second"] = {"status": r2["status"], "multitask_strategy": r2.get("multitask_strategy")}
        except Exception as e:  # noqa: BLE001
            res["second"] = status_of(e)
            r2 = None
        if strategy == "enqueue":
            at("join first")
            res["first_join"] = await w(c.runs.join(tid, r1["run_id"]))
        if r2:
            at("join second")
            res["second_join"] = await w(c.runs.join(tid, r2["run_id"]))
        else:
            at("join first")
            res["first_join"] = await w(c.runs.join(tid, r1["run_id"]))
        at("read")
        try:
            res["first"] = (await w(c.runs.get(tid, r1["run_id"])))["status"]
        except Exception as e:  # noqa: BLE001
            res["first"] = status_of(e)
        res["state"] = (await w(c.threads.get_state(tid)))["values"]
        return res

    async def interrupt():
        tid = await thread()
        first = await w(c.runs.wait(tid, "ask", input={"topic": "post"}))
        th = await w(c.threads.get(tid))
        st = await w(c.threads.get_state(tid))
        resumed = await w(c.runs.wait(tid, "ask", command={"resume": "yes"}))
        th2 = await w(c.threads.get(tid))
        return {"first": first, "thread": {"status": th["status"], "interrupts": th.get("interrupts")},
                "state": {"next": st["next"], "tasks": st["tasks"], "interrupts": st.get("interrupts")},
                "resumed": resumed, "status_after": th2["status"]}

    async def interrupt_before():
        tid = await thread()
        first = await w(c.runs.wait(tid, "agent", input={"topic": "ib"}, interrupt_before=["write"]))
        st = await w(c.threads.get_state(tid))
        th = await w(c.threads.get(tid))
        rest = await w(c.runs.wait(tid, "agent", input=None))
        return {"first": first, "next": st["next"], "thread_status": th["status"], "rest": rest}

    async def busy_update():
        tid = await thread()
        run = await w(c.runs.create(tid, "agent", input={"topic": "busy", "delay_ms": 1500}))
        at("until_running")
        await until_running(c, tid, run["run_id"])
        at("update_state")
        try:
            await w(c.threads.update_state(tid, {"topic": "changed"}))
            res = {"update": "accepted"}
        except Exception as e:  # noqa: BLE001
            res = {"update": status_of(e)}
        at("cancel wait=True")
        await w(c.runs.cancel(tid, run["run_id"], wait=True))
        return res

    async def history():
        tid = await thread()
        await w(c.runs.wait(tid, "agent", input={"topic": "h"}))
        hist = await w(c.threads.get_history(tid))
        res = {"history": [{"next": s["next"], "values": s["values"], "step": (s.get("metadata") or {}).get("step"),
                            "source": (s.get("metadata") or {}).get("source")} for s in hist]}
        past = next((s for s in hist if s["next"] == ["write"]), None)
        if past is None:
            return {**res, "from_past": {"error": "no checkpoint with next [write]"}}
        again = await w(c.runs.wait(tid, "agent", input=None, checkpoint_id=past["checkpoint"]["checkpoint_id"]))
        hist2 = await w(c.threads.get_history(tid))
        return {**res, "from_past": again, "history_len_after": len(hist2),
                "head_parent_is_past": hist2[0]["parent_checkpoint"]["checkpoint_id"] == past["checkpoint"]["checkpoint_id"]}

    async def reconnect():
        tid = await thread()
        created = {}
        s = c.runs.stream(tid, "agent", input={"topic": "rc", "delay_ms": 300}, stream_mode=["updates"],
                          stream_resumable=True, on_disconnect="continue",
                          on_run_created=lambda m: created.update(m))
        before, last = await chunks(s, limit=2)
        after, _ = await chunks(c.runs.join_stream(tid, created["run_id"], last_event_id=last))
        replay, _ = await chunks(c.runs.join_stream(tid, created["run_id"], last_event_id="-1"))
        return {"before": [e for e, _ in before], "after": after,
                "continues": [e for e in before + after if e[0] != "metadata"] ==
                             [e for e in replay if e[0] != "metadata"]}

    async def remote_graph():
        remote = RemoteGraph("agent", url=url, api_key=None)
        local = StateGraph(Steps).add_node("remote", remote).add_edge(START, "remote").compile()
        if sync:
            return local.invoke({"topic": "remote"})
        return await local.ainvoke({"topic": "remote"})

    async def store():
        tid = await thread()
        ran = await w(c.runs.wait(tid, "notes", input={"group": tag, "user": "a", "note": "from graph"}))
        item = await w(c.store.get_item(["notes", tag, "a"], "last"))
        await w(c.store.put_item(["notes", tag, "b"], "last", {"text": "from client"}))
        ran2 = await w(c.runs.wait(tid, "notes", input={"group": tag, "user": "c", "note": "again"}))
        found = await w(c.store.search_items(["notes", tag], limit=100))
        spaces = await w(c.store.list_namespaces(prefix=["notes", tag]))
        await w(c.store.delete_item(["notes", tag, "b"], "last"))
        try:
            gone = await w(c.store.get_item(["notes", tag, "b"], "last"))
        except Exception as e:  # noqa: BLE001
            gone = status_of(e)
        return {"graph": ran, "item": item, "graph_again": ran2,
                "search": sorted(found["items"], key=lambda i: i["namespace"]),
                "namespaces": sorted(spaces["namespaces"]), "deleted": gone}

    async def cron():
        tid = await thread()
        made = await w(c.crons.create_for_thread(tid, "agent", schedule="0 0 1 1 *", input={"topic": "cron"}))
        found = await w(c.crons.search(thread_id=tid))
        await w(c.crons.delete(made["cron_id"]))
        return {"created": made, "search": found}

    named = [("thread_create", thread_create), ("stream", stream), ("wait_join", wait_join), ("cancel", cancel)]
    named += [(f"multitask_{m}", lambda m=m: multitask(m)) for m in ("reject", "interrupt", "rollback", "enqueue")]
    named += [("interrupt", interrupt), ("interrupt_before", interrupt_before), ("busy_update", busy_update),
              ("history", history), ("reconnect", reconnect), ("remote_graph", remote_graph), ("store", store),
              ("cron", cron)]

    def bind(fn):
        async def with_client():
            nonlocal c
            c = get_sync_client(url=url, api_key=None) if sync else get_client(url=url, api_key=None)
            return await fn()
        return with_client

    return [(name, bind(fn)) for name, fn in named]


PHASE = {"at": None}  # the call a step is in, named in a timeout's record


def at(label):
    PHASE["at"] = label


STEP_TIMEOUT = 15  # seconds; the reference's slowest step takes about 3


def main(url, sync, tag):
    """Runs each step in a thread of its own (its own event loop and client),
    so that a step that hangs is recorded as a timeout and the rest still run."""
    out = {}
    for name, fn in steps(url, sync, tag):
        t0, res = time.monotonic(), []
        PHASE["at"] = None

        def run(fn=fn, res=res):
            try:
                res.append(norm(asyncio.run(fn())))
            except Exception as e:  # noqa: BLE001
                res.append(status_of(e))
                print(f"{name}: {e!r}", file=sys.stderr)
                if not isinstance(e, httpx.HTTPStatusError):
                    traceback.print_exc()

        th = threading.Thread(target=run, daemon=True)
        th.start()
        th.join(STEP_TIMEOUT)
        out[name] = res[0] if res else {"error": "timeout", "at": PHASE["at"]}
        print(f"{name}: {time.monotonic() - t0:.2f}s", file=sys.stderr)
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()
    sys.stdout.flush()
    os._exit(0)  # a step that timed out may still hold its thread


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--tag", default="py")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--sync", action="store_true")
    g.add_argument("--async", dest="use_async", action="store_true")
    a = p.parse_args()
    main(a.url, a.sync, a.tag)
