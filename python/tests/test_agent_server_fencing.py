"""Fenced through LangGraph's own SDK: langgraph-sdk's clients, as
LangGraph's docs teach them, pointed at a fleet of baton runners serving
the Agent Server API (AGENT_API_ADDR), while the runner that holds a run is
paused (SIGSTOP) past its lease. This is the case Aegra loses: a worker
stalled past its lease that wakes after its replacement finished writes
its old checkpoint as the thread's head.

The fleet: three runners that run graphs, and one that serves the API only
(it takes no node of the default queue), so the client's connection is
never to the paused process."""

from __future__ import annotations

import os
import threading

import pytest
from langgraph_sdk import get_sync_client

from baton_langgraph.client import BatonClient
from harness import free_port, wait_until
from test_graph_worker import EXAMPLE, PROJECT, graph_env, lines


def agent_runner(start_runner, name, config, **env):
    port = free_port()
    r = start_runner(name, AGENT_API_ADDR=f"127.0.0.1:{port}", **graph_env(config), **env)
    r.agent_url = f"http://127.0.0.1:{port}"
    return r


@pytest.fixture
def fleet(start_runner):
    workers = [agent_runner(start_runner, f"sdk-w{i}", PROJECT) for i in (1, 2, 3)]
    front = agent_runner(start_runner, "sdk-api", PROJECT, QUEUES="api-only=1")
    return workers, front


def owner_of(workers, log):
    """The runner whose graph worker started the slow step, and that worker's pid."""
    start = wait_until(lambda: next((l for l in lines(log) if l[0] == "start"), None), 60, "the slow step to start")
    pid = int(start[1])
    ppid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    return next(r for r in workers if r.proc.pid == ppid), pid


def stale(front, run_id):
    return [e for e in BatonClient(front.url).events(run_id)["events"] if e["type"] == "stale_rejected"]


def test_a_stream_goes_on_from_the_takeover_with_no_chunk_of_the_paused_attempt(fleet, tmp_path):
    workers, front = fleet
    client = get_sync_client(url=front.agent_url)
    thread = client.threads.create()["thread_id"]
    log = tmp_path / "steps.log"
    parts, done = [], threading.Event()

    def read():
        try:
            for part in client.runs.stream(thread, "slow", input={"log": str(log), "seconds": 4},
                                           stream_mode="updates"):
                parts.append(part)
        finally:
            done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    owner, _ = owner_of(workers, log)
    owner.pause()
    try:
        assert done.wait(60), "the stream ended"
        run_id = parts[0].data["run_id"]
        wait_until(lambda: stale(front, run_id), 30, "the paused attempt's late writes to be refused")
    finally:
        owner.resume()
    events = [p.event for p in parts]
    assert events.count("metadata") == 2, events
    takeover = events.index("metadata", 1)
    before = [list(p.data) for p in parts[1:takeover] if p.event == "updates"]
    after = [list(p.data) for p in parts[takeover:] if p.event == "updates"]
    assert before == [["first"]], "the first attempt's chunks, written while it held the lease"
    assert after == [["wait"], ["after"]], "after the takeover's marker, only the takeover's chunks, each once"
    assert parts[takeover].data["attempt"] == 2
    state = client.threads.get_state(thread)
    assert state["values"]["steps"] == ["first", "wait", "after"], "every step once"
    assert {e["epoch"] for e in stale(front, run_id)} == {1}, "only the paused attempt was refused"


def test_a_worker_that_wakes_after_its_replacement_finished_moves_nothing(fleet, tmp_path):
    """The runner and its graph worker are both paused past the lease. The
    replacement finishes the run; then both wake, and the old worker's step
    ends. Nothing it writes is stored: the thread's head stays the
    replacement's, and the next turn builds on it."""
    workers, front = fleet
    client = get_sync_client(url=front.agent_url)
    thread = client.threads.create()["thread_id"]
    log = tmp_path / "steps.log"
    run = client.runs.create(thread, "slow", input={"log": str(log), "seconds": 3})
    owner, worker_pid = owner_of(workers, log)
    os.kill(worker_pid, 19)  # SIGSTOP: the graph worker, mid-step
    owner.pause()
    try:
        client.runs.join(thread, run["run_id"])
        finished = client.threads.get_state(thread)
        assert client.runs.get(thread, run["run_id"])["status"] == "success"
    finally:
        owner.resume()
        os.kill(worker_pid, 18)  # SIGCONT
    # The old worker's step ends now, and its save is refused.
    wait_until(lambda: [l for l in lines(log) if l[0] == "done" and int(l[1]) == worker_pid], 30,
               "the woken worker to end its step")
    # The woken runner's heartbeat and release are refused; the woken
    # worker's save is refused too, or never sent once its runner told it
    # the attempt was lost: either way nothing of epoch 1 is stored after
    # the takeover.
    refused = wait_until(lambda: stale(front, run["run_id"]), 30, "the woken attempt's writes to be refused")
    assert {e["epoch"] for e in refused} == {1}, refused
    events = BatonClient(front.url).events(run["run_id"])["events"]
    took = next(i for i, e in enumerate(events) if e["type"] == "takeover")
    assert not [e for e in events[took:] if e["type"] == "checkpointed" and e["epoch"] == 1], events
    head = client.threads.get_state(thread)
    assert head["checkpoint"] == finished["checkpoint"], "the thread's head did not move"
    assert head["values"]["steps"] == ["first", "wait", "after"]
    nxt = client.runs.wait(thread, "slow", input={"log": str(log), "seconds": 0})
    assert nxt["steps"] == ["first", "wait", "after", "first", "wait", "after"], "the next turn builds on it"


def test_two_concurrent_resumes_continue_the_interrupt_once(start_runner):
    """Two clients answer one interrupt at once (Command(resume)), one with
    multitask "enqueue": one continues it; the other is refused (409 while
    the first runs, or its run fails: the interrupt was answered)."""
    r = agent_runner(start_runner, "sdk-once", EXAMPLE)
    client = get_sync_client(url=r.agent_url)
    thread = client.threads.create()["thread_id"]
    asked = client.runs.wait(thread, "review", input={"change": "v9"})
    assert asked["__interrupt__"][0]["value"] == {"question": "deploy v9?"}, asked
    assert client.threads.get(thread)["status"] == "interrupted"
    outcomes, barrier = {}, threading.Barrier(2)

    def answer(name, approved):
        barrier.wait()
        try:
            created = client.runs.create(thread, "review", command={"resume": {"approved": approved}},
                                         multitask_strategy="enqueue")
            client.runs.join(thread, created["run_id"])
            outcomes[name] = client.runs.get(thread, created["run_id"])["status"]
        except Exception as e:  # a refusal through the SDK: an HTTP error
            outcomes[name] = f"refused: {e}"

    ts = [threading.Thread(target=answer, args=(n, a)) for n, a in (("yes", True), ("no", False))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert sorted(v == "success" for v in outcomes.values()) == [False, True], outcomes
    print(f"\ntwo resumes of one interrupt: {outcomes}")
    values = client.threads.get_state(thread)["values"]
    winner = next(n for n, v in outcomes.items() if v == "success")
    assert values["published"] == f"deploy v9: {'approved' if winner == 'yes' else 'refused'}", values
