"""The graph worker (python -m baton_langgraph.worker) driven over its
protocol (docs/graph-workers.md) as the runner drives it, with live claims
made through baton's Go code (batonctl): what it streams, and that its
writes are fenced by the lease each run message carries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from harness import PACKAGE_DIR, REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "langgraph"
ANSWER = "fencing keeps a paused worker's late writes out"


class Worker:
    def __init__(self, redis_url: str, prefix: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "baton_langgraph.worker"], cwd=EXAMPLE,
                                     env={**os.environ, "PYTHONPATH": str(PACKAGE_DIR)},
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        graphs = {g: f"{EXAMPLE / f}" for g, f in (("agent", "agent.py:graph"), ("chat", "chat.py:graph"),
                                                    ("review", "review.py:make_graph"))}
        self.send({"type": "init", "graphs": graphs, "redis_url": redis_url, "prefix": prefix})
        ready = self.read()
        assert ready["type"] == "ready" and ready["graphs"] == ["agent", "chat", "review"], ready

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
        """Sends a run for lease and returns its chunks and its outcome."""
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

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        assert self.proc.wait(timeout=10) == 0


@pytest.fixture
def worker(redis_url, prefix):
    w = Worker(redis_url, prefix)
    yield w
    w.close()


def test_every_stream_mode_reaches_the_runner_and_the_tokens_arrive_in_order(worker, ctl, prefix):
    lease = ctl.claim(prefix, "chat-1")
    modes = ["values", "updates", "messages-tuple", "custom", "tasks", "checkpoints", "debug"]
    chunks, out = worker.run(lease, "chat", input={"messages": [{"role": "user", "content": "why fence?"}]},
                             stream_mode=modes)
    assert out["type"] == "done", out
    assert out["result"]["messages"][-1]["content"] == ANSWER
    events = {c["event"] for c in chunks}
    assert events == {"values", "updates", "messages", "tasks", "checkpoints", "debug"}, events  # no custom writer
    tokens = [c["data"] for c in chunks if c["event"] == "messages"]
    assert len(tokens) > 5, "one chunk per token, not one message"
    assert all(t[0]["type"] == "AIMessageChunk" and t[1]["langgraph_node"] == "respond" for t in tokens)
    assert "".join(t[0]["content"] for t in tokens) == ANSWER
    # The chunks come in the graph's order: the tokens before the node's update.
    order = [c["event"] for c in chunks]
    last_token = max(i for i, e in enumerate(order) if e == "messages")
    assert any(e == "updates" for e in order[last_token:])


def test_only_the_modes_asked_for_are_streamed(worker, ctl, prefix):
    lease = ctl.claim(prefix, "agent-1")
    chunks, out = worker.run(lease, "agent", input={"topic": "x"}, stream_mode=["updates"])
    assert out["type"] == "done"
    assert [list(c["data"]) for c in chunks] == [["plan"], ["write"]]


def test_a_write_under_a_lease_that_was_taken_over_is_refused_and_the_attempt_is_lost(worker, ctl, prefix, rdb):
    old = ctl.claim(prefix, "agent-2", ttl_ms=300)
    time.sleep(1.5)  # the lease (300 ms) and the takeover's grace run out on Redis's clock: nothing to wait on
    new = ctl.takeover(prefix, old, "other")
    assert new["epoch"] == old["epoch"] + 1
    _, out = worker.run(old, "agent", input={"topic": "late"})
    assert out["type"] == "lost", out
    assert "stale epoch" in out["error"] or "claimed again" in out["error"]
    _, out = worker.run(new, "agent", input={"topic": "current"})
    assert out["type"] == "done" and out["result"]["answer"].endswith(": current in 2 steps")


def test_an_unknown_graph_is_a_permanent_error(worker, ctl, prefix):
    lease = ctl.claim(prefix, "unk-1")
    _, out = worker.run(lease, "nope")
    assert out["type"] == "error" and out["permanent"] is True
    assert "unknown graph 'nope'" in out["error"]


def test_an_interrupt_is_reported_and_an_attempt_with_the_resume_continues_the_graph(worker, ctl, prefix):
    lease = ctl.claim(prefix, "rev-1")
    _, out = worker.run(lease, "review", input={"change": "v3"})
    assert out == {"type": "interrupt", "id": lease["claim"], "request": {"question": "deploy v3?"}}
    # Without a resume, an attempt of the same run asks again, running nothing.
    _, again = worker.run(lease, "review")
    assert again["type"] == "interrupt"
    _, done = worker.run(lease, "review", resume={"wait": "w1", "value": {"approved": False}})
    assert done["type"] == "done" and done["result"]["published"] == "deploy v3: refused"


def test_a_reader_saver_reads_a_threads_state_outside_a_run_and_refuses_every_write(worker, ctl, prefix, redis_url):
    """The state a FastAPI handler renders: BatonSaver.reader needs no lease."""
    import importlib.util

    from baton_langgraph import BatonError, BatonSaver

    lease = ctl.claim(prefix, "read-1")
    _, out = worker.run(lease, "agent", input={"topic": "reading"})
    assert out["type"] == "done"
    spec = importlib.util.spec_from_file_location("example_agent", EXAMPLE / "agent.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["example_agent"] = mod
    spec.loader.exec_module(mod)
    reader = BatonSaver.reader(redis_url, prefix=prefix)
    graph = mod.graph.copy(update={"checkpointer": reader})
    state = graph.get_state({"configurable": {"thread_id": "read-1"}})
    assert state.values["answer"].endswith(": reading in 2 steps") and state.next == ()
    assert len(list(graph.get_state_history({"configurable": {"thread_id": "read-1"}}))) >= 3
    with pytest.raises(BatonError, match="read-only"):
        graph.invoke({"topic": "write"}, {"configurable": {"thread_id": "read-1"}})
    reader.close()
