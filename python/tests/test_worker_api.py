"""The graph worker's side of the Agent Server API, driven over its
protocol with live claims (batonctl): the run fields (interrupts "end",
resumes, update_state, checkpoint_id, context, metadata, interrupt_before),
the stream modes as LangGraph's server names them, and the calls."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from harness import PACKAGE_DIR, REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "langgraph"
API = PACKAGE_DIR / "tests" / "fixtures" / "api"
GRAPHS = {"agent": f"{EXAMPLE / 'agent.py'}:graph", "chat": f"{EXAMPLE / 'chat.py'}:graph",
          "review": f"{EXAMPLE / 'review.py'}:make_graph", "approve": f"{API / 'graphs.py'}:approve",
          "nested": f"{API / 'graphs.py'}:nested", "greet": f"{API / 'graphs.py'}:greet"}


class Worker:
    def __init__(self, redis_url: str, prefix: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "baton_langgraph.worker"], cwd=EXAMPLE,
                                     env={**os.environ, "PYTHONPATH": str(PACKAGE_DIR)},
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.send({"type": "init", "graphs": GRAPHS, "redis_url": redis_url, "prefix": prefix})
        assert self.read()["type"] == "ready"
        self.n = 0

    def send(self, msg: dict) -> None:
        assert self.proc.stdin
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def read(self) -> dict:
        assert self.proc.stdout
        line = self.proc.stdout.readline()
        assert line, f"the worker exited ({self.proc.poll()})"
        return json.loads(line)

    def run(self, lease: dict, graph: str, **fields) -> tuple[list[dict], dict]:
        self.send({"type": "run", "id": lease["claim"], "graph": graph, "run": lease["run"], "node": lease["node"],
                   "thread": lease["thread"], "attempt": lease["attempt"], "epoch": lease["epoch"],
                   "claim": lease["claim"], "worker": lease["worker"], "incarnation": lease["incarnation"],
                   "stream_mode": [], **fields})
        chunks = []
        while True:
            m = self.read()
            assert m["id"] == lease["claim"]
            if m["type"] != "chunk":
                return chunks, m
            chunks.append(m)

    def call(self, op: str, **args) -> dict:
        self.n += 1
        cid = f"call-{self.n}"
        self.send({"type": "call", "id": cid, "op": op, "args": args})
        m = self.read()
        assert m["type"] == "reply" and m["id"] == cid, m
        return m

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        assert self.proc.wait(timeout=10) == 0


@pytest.fixture
def worker(redis_url, prefix):
    w = Worker(redis_url, prefix)
    yield w
    w.close()


def turn(worker, ctl, prefix, thread, graph, **fields):
    """One run on thread, committed: its outcome."""
    lease = ctl.claim(prefix, thread)
    chunks, out = worker.run(lease, graph, **fields)
    ctl.commit(prefix, lease)
    return chunks, out


def test_interrupts_end_ends_the_attempt_with_values_interrupts_and_next(worker, ctl, prefix):
    _, out = turn(worker, ctl, prefix, "end-1", "review", input={"change": "v3"}, interrupts="end")
    assert out["type"] == "done", out
    res = out["result"]
    assert res["values"] == {"change": "v3", "draft": "deploy v3"} and res["next"] == ["ask"]
    assert [i["value"] for i in res["interrupts"]] == [{"question": "deploy v3?"}] and res["interrupts"][0]["id"]
    _, out = turn(worker, ctl, prefix, "end-2", "agent", input={"topic": "x"}, interrupts="end")
    assert out["result"]["interrupts"] == [] and out["result"]["next"] == []
    assert out["result"]["values"]["answer"].endswith(": x in 2 steps")


def test_two_resumes_of_one_interrupt_continue_it_once(worker, ctl, prefix):
    _, first = turn(worker, ctl, prefix, "res-1", "review", input={"change": "v4"}, interrupts="end")
    iid = first["result"]["interrupts"][0]["id"]
    _, out = turn(worker, ctl, prefix, "res-1", "review", command={"resume": {"approved": True}}, resumes=[iid],
                  interrupts="end")
    assert out["type"] == "done" and out["result"]["values"]["published"] == "deploy v4: approved", out
    _, again = turn(worker, ctl, prefix, "res-1", "review", command={"resume": {"approved": False}}, resumes=[iid],
                    interrupts="end")
    assert again["type"] == "error" and again["permanent"] is True
    assert "has no interrupt" in again["error"] and iid in again["error"]
    state = worker.call("get_state", graph="review", thread="res-1")["result"]
    assert state["values"]["published"] == "deploy v4: approved" and state["next"] == []
    hist = worker.call("history", graph="review", thread="res-1", limit=50)["result"]
    # The first run's checkpoints and the one resume's; the refused run wrote none.
    assert len({s["metadata"]["baton_run"] for s in hist}) == 2


def test_a_resume_of_an_interrupt_answered_already_fails_naming_both(worker, ctl, prefix):
    _, first = turn(worker, ctl, prefix, "res-2", "approve", input={"change": "c"}, interrupts="end")
    one = first["result"]["interrupts"][0]["id"]
    _, out = turn(worker, ctl, prefix, "res-2", "approve", command={"resume": "yes"}, resumes=[one], interrupts="end")
    two = out["result"]["interrupts"][0]["id"]
    assert out["result"]["next"] == ["ask_second"] and two != one
    _, again = turn(worker, ctl, prefix, "res-2", "approve", command={"resume": "no"}, resumes=[one], interrupts="end")
    assert again["type"] == "error" and again["permanent"] is True
    assert "interrupt already answered" in again["error"] and one in again["error"] and two in again["error"]
    state = worker.call("get_state", graph="approve", thread="res-2")["result"]
    assert state["values"]["first"] == "yes" and [i["id"] for i in state["interrupts"]] == [two]


def test_update_state_writes_a_fenced_checkpoint_as_the_node(worker, ctl, prefix):
    turn(worker, ctl, prefix, "upd-1", "agent", input={"topic": "u"})
    _, out = turn(worker, ctl, prefix, "upd-1", "agent", update_state={"values": {"answer": "edited"}, "as_node": "write"})
    assert out["type"] == "done", out
    cp = out["result"]["checkpoint"]
    assert cp["thread_id"] == "upd-1" and cp["checkpoint_ns"] == "" and cp["checkpoint_id"]
    state = worker.call("get_state", graph="agent", thread="upd-1")["result"]
    assert state["values"]["answer"] == "edited" and state["checkpoint"]["checkpoint_id"] == cp["checkpoint_id"]
    assert state["metadata"]["source"] == "update"
    _, bad = turn(worker, ctl, prefix, "upd-1", "agent", update_state={"values": {}, "as_node": "wirte"})
    assert bad["type"] == "error" and bad["permanent"] is True
    assert "as_node 'wirte'" in bad["error"] and "plan, write" in bad["error"]


def test_a_write_refused_by_the_fence_loses_the_update(worker, ctl, prefix):
    import time
    old = ctl.claim(prefix, "upd-2", ttl_ms=300)
    time.sleep(1.5)  # the lease runs out on Redis's clock
    ctl.takeover(prefix, old, "other")
    _, out = worker.run(old, "agent", update_state={"values": {"answer": "late"}})
    assert out["type"] == "lost", out


def test_checkpoint_id_runs_from_a_past_checkpoint(worker, ctl, prefix):
    turn(worker, ctl, prefix, "tt-1", "agent", input={"topic": "t"})
    hist = worker.call("history", graph="agent", thread="tt-1", limit=10)["result"]
    before_write = next(s for s in hist if s["next"] == ["write"])
    _, out = turn(worker, ctl, prefix, "tt-1", "agent", input=None,
                  checkpoint_id=before_write["checkpoint"]["checkpoint_id"])
    assert out["type"] == "done" and out["result"]["steps"] == ["plan t", "write"], out
    state = worker.call("get_state", graph="agent", thread="tt-1")["result"]
    assert state["values"] == out["result"]
    hist2 = worker.call("history", graph="agent", thread="tt-1", limit=20)["result"]
    forked = [s for s in hist2 if (s["parent_checkpoint"] or {}).get("checkpoint_id") == before_write["checkpoint"]["checkpoint_id"]]
    assert len(forked) == 2, "the first run's step and the fork's both follow that checkpoint"
    _, bad = turn(worker, ctl, prefix, "tt-1", "agent", input=None, checkpoint_id="nope")
    assert bad["type"] == "error" and bad["permanent"] and "checkpoint_id 'nope'" in bad["error"]


def test_context_metadata_and_interrupt_before_reach_the_graph(worker, ctl, prefix):
    _, out = turn(worker, ctl, prefix, "ctx-1", "greet", input={"name": "ana"}, context={"greeting": "ola"},
                  metadata={"origin": "test"}, assistant_id="a-1")
    assert out["result"] == {"name": "ana", "said": "ola, ana"}, out
    state = worker.call("get_state", graph="greet", thread="ctx-1")["result"]
    assert state["metadata"]["origin"] == "test" and state["metadata"]["assistant_id"] == "a-1"
    assert state["metadata"]["graph_id"] == "greet"
    for thread, stop in (("ctx-2", {"interrupt_before": ["write"]}), ("ctx-3", {"interrupt_after": ["plan"]})):
        lease = ctl.claim(prefix, thread)
        _, out = worker.run(lease, "agent", input={"topic": "b"}, interrupts="end", **stop)
        assert out["result"]["next"] == ["write"] and out["result"]["interrupts"] == [], out
        # Its commit lost, the attempt is run again: it stops at the same breakpoint.
        _, again = worker.run(lease, "agent", input={"topic": "b"}, interrupts="end", **stop)
        assert again["result"] == out["result"]
        ctl.commit(prefix, lease)
    _, out = turn(worker, ctl, prefix, "ctx-2", "agent", input=None, interrupts="end")
    assert out["type"] == "done", out
    assert out["result"]["next"] == [] and out["result"]["values"]["answer"].endswith(": b in 2 steps")


def test_messages_tuple_and_messages_modes_are_named_as_the_server_names_them(worker, ctl, prefix):
    chunks, out = turn(worker, ctl, prefix, "msg-1", "chat", input={"messages": [{"role": "user", "content": "q"}]},
                       stream_mode=["messages-tuple", "messages"])
    assert out["type"] == "done", out
    tuples = [c["data"] for c in chunks if c["event"] == "messages"]
    assert tuples and all(t[0]["type"] == "AIMessageChunk" and t[1]["langgraph_node"] == "respond" for t in tuples)
    events = [c["event"] for c in chunks]
    assert events.count("messages/metadata") == 1
    partial = [c["data"] for c in chunks if c["event"] == "messages/partial"]
    assert len(partial) == len(tuples) and partial[-1][0]["content"] == "fencing keeps a paused worker's late writes out"
    assert partial[0][0]["id"] == partial[-1][0]["id"]
    complete = [m for c in chunks if c["event"] == "messages/complete" for m in c["data"]]
    assert [m["type"] for m in complete] == ["human", "ai"] and complete[1]["id"] == partial[-1][0]["id"]
    meta = next(c["data"] for c in chunks if c["event"] == "messages/metadata")
    assert meta[partial[0][0]["id"]]["metadata"]["langgraph_node"] == "respond"


def test_events_mode_and_subgraph_event_names(worker, ctl, prefix):
    chunks, out = turn(worker, ctl, prefix, "ev-1", "agent", input={"topic": "e"}, stream_mode=["events"])
    assert out["type"] == "done"
    kinds = {c["data"]["event"] for c in chunks}
    assert {c["event"] for c in chunks} == {"events"} and {"on_chain_start", "on_chain_end"} <= kinds
    chunks, out = turn(worker, ctl, prefix, "sub-1", "nested", input={"text": "a"}, stream_mode=["updates"],
                       subgraphs=True)
    assert out["result"] == {"text": "A"}
    names = [c["event"] for c in chunks]
    assert "updates" in names and any(n.startswith("updates|child:") for n in names), names


def test_the_calls_answer_in_the_servers_shapes(worker, ctl, prefix):
    turn(worker, ctl, prefix, "call-1", "review", input={"change": "v5"})
    st = worker.call("get_state", graph="review", thread="call-1")["result"]
    assert set(st) == {"values", "next", "tasks", "metadata", "created_at", "checkpoint", "parent_checkpoint",
                       "interrupts"}
    assert st["next"] == ["ask"] and st["tasks"][0]["name"] == "ask"
    assert set(st["tasks"][0]) == {"id", "name", "path", "error", "interrupts", "checkpoint", "state", "result"}
    assert st["tasks"][0]["interrupts"] == st["interrupts"] and st["interrupts"][0]["value"] == {"question": "deploy v5?"}
    assert set(st["checkpoint"]) >= {"thread_id", "checkpoint_ns", "checkpoint_id"}
    hist = worker.call("history", graph="review", thread="call-1", limit=2)["result"]
    assert len(hist) == 2 and hist[0]["checkpoint"] == st["checkpoint"]
    older = worker.call("history", graph="review", thread="call-1", limit=10,
                        before=hist[0]["checkpoint"]["checkpoint_id"])["result"]
    assert older[0]["checkpoint"] == hist[1]["checkpoint"]
    past = worker.call("get_state", graph="review", thread="call-1",
                       checkpoint_id=hist[1]["checkpoint"]["checkpoint_id"])["result"]
    assert past["checkpoint"] == hist[1]["checkpoint"]
    empty = worker.call("get_state", graph="review", thread="none-such")["result"]
    assert empty["values"] == {} and empty["checkpoint"] is None and empty["next"] == []
    sch = worker.call("schemas", graph="greet")["result"]
    assert sch["graph_id"] == "greet" and "name" in sch["input_schema"]["properties"]
    assert "greeting" in sch["context_schema"]["properties"] and "said" in sch["state_schema"]["properties"]
    # typing.TypedDict on Python 3.11: pydantic draws no schema; its fields do.
    loose = worker.call("schemas", graph="agent")["result"]
    assert set(loose["input_schema"]["properties"]) == {"topic", "steps", "answer"}
    drawn = worker.call("graph", graph="agent")["result"]
    assert {n["id"] for n in drawn["nodes"]} == {"__start__", "plan", "write", "__end__"}
    subs = worker.call("subgraphs", graph="nested")["result"]
    assert list(subs) == ["child"] and subs["child"]["graph_id"] == "nested"
    for op, args, code, text in [
        ("get_state", {"graph": "nope", "thread": "t"}, "not_found", "unknown graph 'nope'"),
        ("get_state", {"graph": "agent", "thread": "call-1", "checkpoint_id": "nope"}, "not_found", "no checkpoint 'nope'"),
        ("get_state", {"graph": "agent"}, "invalid", "thread: want a non-empty string"),
        ("history", {"graph": "agent", "thread": "t", "limit": 0}, "invalid", "limit: want a positive integer"),
        ("history", {"graph": "agent", "thread": "t", "before": 3}, "invalid", "before: want a checkpoint id"),
        ("graph", {"graph": "agent", "xray": "yes"}, "invalid", "xray: want"),
        ("explode", {"graph": "agent"}, "invalid", "unknown op 'explode'"),
    ]:
        m = worker.call(op, **args)
        assert m.get("code") == code and text in m.get("error", ""), (op, args, m)
