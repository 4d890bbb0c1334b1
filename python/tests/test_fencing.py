"""baton's own guarantees for BatonSaver, on a real redis-server with leases
claimed through baton's Go code: a stale saver changes nothing through any
method, sync or async, and the refusal is recorded; the current one writes; a
takeover resumes a graph from its last super-step."""

from __future__ import annotations

import operator
import threading
from typing import Annotated, TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, StateGraph

from baton_langgraph import BatonError, BatonFencedError, BatonSaver, Keys, Lease, LeaseLostError

META = {"source": "loop", "step": 0, "parents": {}}


def checkpoint():
    return {**empty_checkpoint(), "id": str(uuid6(clock_seq=-1))}


def thread_state(rdb, prefix, thread):
    """Everything the store keeps for a thread's checkpoints, to compare before and after."""
    k = Keys(prefix)
    out = {"cp": rdb.hgetall(k.checkpoints(thread))}
    for ns in out["cp"]:
        v, d, i, w = k.checkpoint_ns(thread, ns)
        out[ns] = {"versions": rdb.zrange(v, 0, -1), "data": rdb.hgetall(d), "ids": rdb.hgetall(i),
                   "writes": rdb.hgetall(w)}
    return out


def events(rdb, prefix, lease):
    return [fields for _, fields in rdb.xrange(Keys(prefix).events(lease["thread"], lease["run"]))]


def saver(redis_url, prefix, lease, **kw):
    return BatonSaver(redis=redis_url, prefix=prefix, lease=Lease.from_dict(lease), **kw)


def test_a_stale_saver_changes_nothing_through_any_write_and_the_current_one_does(ctl, rdb, redis_url, prefix):
    thread = "chat-1"
    old = ctl.claim(prefix, thread, "w-old", 200)
    stale = saver(redis_url, prefix, old)
    cfg = stale.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, checkpoint(), META, {})
    stale.put_writes(cfg, [("answer", 41)], "task-a")
    stale.put({"configurable": {"thread_id": thread, "checkpoint_ns": "sub:1"}}, checkpoint(), META, {})

    cur = ctl.takeover(prefix, old, "w-new")
    assert cur["epoch"] == old["epoch"] + 1
    current = saver(redis_url, prefix, cur)
    before = thread_state(rdb, prefix, thread)

    with pytest.raises(BatonFencedError) as e:
        stale.put(cfg, checkpoint(), META, {})
    assert (e.value.code, e.value.op) == (-10, "checkpoint")
    assert isinstance(stale.lost, BatonFencedError)
    # Once refused, every later call fails, reads included: the attempt is over.
    for call in (lambda: stale.put_writes(cfg, [("answer", 0)], "task-b"), lambda: stale.get_tuple(cfg),
                 lambda: stale.delete_thread(thread)):
        with pytest.raises(LeaseLostError):
            call()
    # A fresh saver on the same stale lease gets the store's own refusal for each write.
    for op, write in [
        ("checkpoint_writes", lambda s: s.put_writes(cfg, [("answer", 0)], "task-b")),
        ("checkpoint_writes", lambda s: s.put_writes(cfg, [("__error__", "late")], "task-a")),
        ("checkpoint_delete", lambda s: s.delete_thread(thread)),
    ]:
        with pytest.raises(BatonFencedError) as e:
            write(saver(redis_url, prefix, old))
        assert (e.value.code, e.value.op) == (-10, op)
    assert thread_state(rdb, prefix, thread) == before
    rejected = [e for e in events(rdb, prefix, old) if e["type"] == "stale_rejected"]
    assert [(e["op"], e["epoch"], e["worker"], e["current_epoch"]) for e in rejected] == [
        (op, str(old["epoch"]), "w-old", str(cur["epoch"]))
        for op in ("checkpoint", "checkpoint_writes", "checkpoint_writes", "checkpoint_delete")
    ]

    # The same epoch under another claim id (a claim a failover lost) is refused too.
    forged = saver(redis_url, prefix, {**cur, "claim": "another-claim"})
    with pytest.raises(BatonFencedError) as e:
        forged.put(cfg, checkpoint(), META, {})
    assert e.value.code == -11
    assert thread_state(rdb, prefix, thread) == before

    # The current claim's writes are accepted, delete_thread included.
    nxt = current.put(cfg, checkpoint(), META, {})
    current.put_writes(nxt, [("answer", 42)], "task-c")
    assert current.get_tuple({"configurable": {"thread_id": thread}}).pending_writes == [("task-c", "answer", 42)]
    assert current.lost is None
    current.delete_thread(thread)
    assert current.get_tuple({"configurable": {"thread_id": thread}}) is None
    assert current.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": "sub:1"}}) is None


async def test_the_async_methods_are_fenced_the_same(ctl, rdb, redis_url, prefix):
    thread = "chat-async"
    old = ctl.claim(prefix, thread, "w-old", 200)
    stale = saver(redis_url, prefix, old)
    cfg = await stale.aput({"configurable": {"thread_id": thread}}, checkpoint(), META, {})
    await stale.aput_writes(cfg, [("answer", 41)], "task-a")
    cur = ctl.takeover(prefix, old, "w-new")
    before = thread_state(rdb, prefix, thread)
    for op, write in [
        ("checkpoint", lambda s: s.aput(cfg, checkpoint(), META, {})),
        ("checkpoint_writes", lambda s: s.aput_writes(cfg, [("answer", 0)], "task-b")),
        ("checkpoint_delete", lambda s: s.adelete_thread(thread)),
    ]:
        s = saver(redis_url, prefix, old)
        with pytest.raises(BatonFencedError) as e:
            await write(s)
        assert (e.value.code, e.value.op) == (-10, op)
        with pytest.raises(LeaseLostError):
            await s.aget_tuple(cfg)
        await s.aclose()
    assert thread_state(rdb, prefix, thread) == before
    assert [e["op"] for e in events(rdb, prefix, old) if e["type"] == "stale_rejected"] == [
        "checkpoint", "checkpoint_writes", "checkpoint_delete"]

    current = saver(redis_url, prefix, cur)
    nxt = await current.aput(cfg, checkpoint(), META, {})
    await current.aput_writes(nxt, [("answer", 42)], "task-c")
    got = await current.aget_tuple({"configurable": {"thread_id": thread}})
    assert got.pending_writes == [("task-c", "answer", 42)]
    assert [t.config["configurable"]["checkpoint_id"] async for t in current.alist(
        {"configurable": {"thread_id": thread}})] == [nxt["configurable"]["checkpoint_id"],
                                                      cfg["configurable"]["checkpoint_id"]]
    await current.adelete_thread(thread)
    assert await current.aget_tuple({"configurable": {"thread_id": thread}}) is None
    await current.aclose()
    await stale.aclose()


def test_writes_are_refused_once_the_run_has_finished(ctl, rdb, redis_url, prefix):
    old = ctl.claim(prefix, "chat-2", "w-old", 200)
    cur = ctl.takeover(prefix, old, "w-new")
    saver(redis_url, prefix, cur).put({"configurable": {"thread_id": "chat-2"}}, checkpoint(), META, {})
    ctl.commit(prefix, cur)
    before = thread_state(rdb, prefix, "chat-2")
    for lease in (old, cur):
        with pytest.raises(BatonFencedError):
            saver(redis_url, prefix, lease).delete_thread("chat-2")
        with pytest.raises(BatonFencedError):
            saver(redis_url, prefix, lease).put({"configurable": {"thread_id": "chat-2"}}, checkpoint(), META, {})
    assert thread_state(rdb, prefix, "chat-2") == before


def test_bad_input_is_named_and_changes_nothing(ctl, rdb, redis_url, prefix):
    lease = ctl.claim(prefix, "mine", "w")
    with pytest.raises(BatonError, match="exactly one of lease and lease_for"):
        BatonSaver(redis=redis_url, prefix=prefix)
    with pytest.raises(BatonError, match="lease epoch"):
        Lease.from_dict({**lease, "epoch": 0})
    s = saver(redis_url, prefix, lease, max_bytes=4096)
    with pytest.raises(BatonError, match="not this lease's thread"):
        s.put({"configurable": {"thread_id": "theirs"}}, checkpoint(), META, {})
    with pytest.raises(BatonError, match="not this lease's thread"):
        s.delete_thread("theirs")
    with pytest.raises(BatonError, match="checkpoint_ns"):
        s.put({"configurable": {"thread_id": "mine", "checkpoint_ns": "bad ns"}}, checkpoint(), META, {})
    with pytest.raises(BatonError, match="invalid id"):
        s.put({"configurable": {"thread_id": "mine"}}, {**checkpoint(), "id": "{forged}"}, META, {})
    big = {**checkpoint(), "channel_values": {"blob": "x" * 8192}}
    with pytest.raises(BatonError, match="bytes, at most 4096") as e:
        s.put({"configurable": {"thread_id": "mine"}}, big, META, {})
    assert e.value.code == -15 and not isinstance(e.value, BatonFencedError)
    assert s.lost is None  # bad input is not a lost claim
    assert thread_state(rdb, prefix, "mine") == {"cp": {}}
    assert [e for e in events(rdb, prefix, lease) if e["type"] in ("checkpointed", "stale_rejected")] == []


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def test_a_takeover_resumes_the_graph_and_the_paused_owners_late_writes_are_refused(ctl, rdb, redis_url, prefix):
    thread = "agent-1"
    at_step3, release = threading.Event(), threading.Event()

    def build(who, s):
        def step(name):
            def run(state):
                if who == "A" and name == "s3":
                    at_step3.set()
                    release.wait()  # A stops here past its lease, like a process in a long GC pause
                return {"log": [f"{name}@{who}"]}
            return run
        g = StateGraph(State)
        for name in ("s1", "s2", "s3", "s4"):
            g.add_node(name, step(name))
        g.add_edge(START, "s1").add_edge("s1", "s2").add_edge("s2", "s3").add_edge("s3", "s4").add_edge("s4", END)
        return g.compile(checkpointer=s)

    config = {"configurable": {"thread_id": thread}}
    lease_a = ctl.claim(prefix, thread, "w-a", 300)
    saver_a = saver(redis_url, prefix, lease_a)
    outcome = {}

    def run_a():
        try:
            outcome["a"] = build("A", saver_a).invoke({"log": []}, config, durability="sync")
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            outcome["a"] = e

    ta = threading.Thread(target=run_a)
    ta.start()
    assert at_step3.wait(30)

    lease_b = ctl.takeover(prefix, lease_a, "w-b")
    graph_b = build("B", saver(redis_url, prefix, lease_b))
    resume_from = graph_b.get_state(config)
    assert resume_from.next == ("s3",)
    assert resume_from.values["log"] == ["s1@A", "s2@A"]
    final = graph_b.invoke(None, config, durability="sync")
    assert final["log"] == ["s1@A", "s2@A", "s3@B", "s4@B"]

    before = thread_state(rdb, prefix, thread)
    release.set()
    ta.join(30)
    assert isinstance(outcome["a"], BatonFencedError), outcome["a"]
    assert thread_state(rdb, prefix, thread) == before
    state = graph_b.get_state(config)
    assert state.values["log"] == ["s1@A", "s2@A", "s3@B", "s4@B"] and state.next == ()
    rejected = [e for e in events(rdb, prefix, lease_a) if e["type"] == "stale_rejected"]
    assert rejected and all(e["op"].startswith("checkpoint") and e["worker"] == "w-a" for e in rejected)
