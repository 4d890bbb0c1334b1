"""The end to end test that stands for a new user: agent.py, a graph written
as LangGraph's Python docs teach with only the checkpointer swapped and
run_node as its main, runs as an exec node on two real runners. The runner
whose child is in the middle of step "analyze" is paused (SIGSTOP) past its
lease: the paused runner's child runs no later step and exits within a
lease and a second; the other runner takes the node over, resumes the graph
from its last checkpoint, and the run succeeds with every step's result
exactly once. The paused runner is then resumed (SIGCONT)."""

from __future__ import annotations

import json
import sys
import time

import pytest

from baton_langgraph.client import BatonClient
from harness import PACKAGE_DIR, exited, wait_until

LEASE_TTL = 2.0
STEPS = ["plan", "research", "analyze", "write", "check", "publish"]


@pytest.fixture
def fleet(start_runner):
    return {rid: start_runner(rid, LEASE_TTL=f"{int(LEASE_TTL * 1000)}ms") for rid in ("py-r1", "py-r2")}


def agent_node(step_log, **env):
    return {"id": "agent", "kind": "exec", "max_attempts": 5, "input": {
        "command": [sys.executable, "agent.py"], "dir": str(PACKAGE_DIR),
        "env": {"PYTHONPATH": str(PACKAGE_DIR), "STEP_LOG": str(step_log), "STEP_SECONDS": "0.1", **env}}}


def lines(path):
    return [l.split() for l in path.read_text().splitlines()] if path.exists() else []


def test_a_paused_runners_child_stops_and_the_run_succeeds_elsewhere_with_every_step_once(fleet, tmp_path):
    step_log = tmp_path / "steps.log"
    client = BatonClient(fleet["py-r1"].url)
    sub = client.submit({"id": "e2e-1", "thread": "chat-e2e", "nodes": [agent_node(
        step_log, SLOW_STEP="analyze", SLOW_SECONDS="6",
        GRAPH_INPUT=json.dumps({"messages": [{"role": "user", "content": "fencing"}]}))]})
    assert sub["id"] == "e2e-1"

    start = wait_until(lambda: next((l for l in lines(step_log) if l[:2] == ["start", "analyze"]), None),
                       60, "the agent to start step analyze")
    pid, epoch, worker = int(start[2]), int(start[3]), start[4]
    paused, other = fleet[worker], next(r for r in fleet.values() if r.id != worker)
    paused.pause()
    t0 = time.monotonic()
    try:
        wait_until(lambda: exited(pid), LEASE_TTL + 5, "the paused runner's child to exit")
        took = time.monotonic() - t0
        assert took < LEASE_TTL + 1, f"the child exited {took:.2f}s after its runner was paused"

        final = BatonClient(other.url).wait("e2e-1")
    finally:
        paused.resume()
    assert final["status"] == "SUCCEEDED", final
    node = final["nodes"][0]
    assert node["epoch"] > epoch and node["owner"] == other.id

    # Every step's result exactly once, the slow one from the new owner.
    result = node["result"]
    assert [s["step"] for s in result["steps"]] == STEPS
    owners = {s["step"]: s["epoch"] for s in result["steps"]}
    assert owners["plan"] == owners["research"] == epoch and owners["analyze"] == node["epoch"]
    assert result["messages"][-1]["role"] == "assistant"
    log = lines(step_log)
    assert sorted(l[1] for l in log if l[0] == "done") == sorted(STEPS)
    assert [l[:2] for l in log if int(l[2]) == pid] == [
        ["start", "plan"], ["done", "plan"], ["start", "research"], ["done", "research"], ["start", "analyze"]]

    events = [(e["type"], e["epoch"]) for e in client.events("e2e-1")["events"]]
    assert ("heartbeat_lost", epoch) in events and ("takeover", node["epoch"]) in events
    assert ("committed", node["epoch"]) in events
    assert all(ep == epoch for kind, ep in events if kind == "stale_rejected")  # only the paused attempt's


def test_an_interrupt_waits_through_a_restart_of_every_runner_and_a_resume_finishes_it(fleet, start_runner, tmp_path):
    """agent.py with "review": its interrupt() parks the node (WAITING, no
    lease, its process exited 0); every runner is stopped and a new one
    started; BatonClient.resume answers, and the graph gets the answer."""
    step_log = tmp_path / "steps.log"
    client = BatonClient(fleet["py-r1"].url)
    client.submit({"id": "e2e-hitl", "thread": "chat-hitl", "nodes": [agent_node(
        step_log, GRAPH_INPUT=json.dumps({"messages": [{"role": "user", "content": "deploy v2"}], "review": True}))]})
    node = wait_until(lambda: next((n for n in client.status("e2e-hitl")["nodes"] if n["state"] == "WAITING"), None),
                      60, "the agent to park on its interrupt")
    assert node["wait"]["request"]["question"] == "publish the answer to 'deploy v2'?"
    assert not node.get("lease_until"), "a waiting node holds no lease"
    ran = [l[1] for l in lines(step_log) if l[0] == "done"]
    assert ran == STEPS[:-1], "every step before the question, once"

    for r in fleet.values():
        r.stop()
    fresh = start_runner("py-r3", LEASE_TTL=f"{int(LEASE_TTL * 1000)}ms")
    client = BatonClient(fresh.url)
    assert client.status("e2e-hitl")["nodes"][0]["state"] == "WAITING"

    answer = {"approved": True, "note": "ship it"}
    assert client.resume("e2e-hitl", "agent", answer, wait_id=node["wait"]["id"])["already"] is False
    final = client.wait("e2e-hitl")
    assert final["status"] == "SUCCEEDED"
    result = final["nodes"][0]["result"]
    assert result["verdict"] == answer
    assert result["messages"][-1]["content"].endswith("(approved by a person: ship it)")
    assert [s["step"] for s in result["steps"]] == STEPS
    assert [s["worker"] for s in result["steps"]][-1] == "py-r3"
    assert sorted(l[1] for l in lines(step_log) if l[0] == "done") == sorted(STEPS), "every step once"
