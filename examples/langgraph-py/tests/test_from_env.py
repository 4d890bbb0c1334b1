"""A saver made by from_env() is safe with LangGraph's defaults: it never
keeps a finished program alive, and it ends a program whose claim is gone
with exit code 75, even in a step that never calls it. And run_node, the
whole main of an agent node: resume or start by who wrote the thread's
latest checkpoint. Each case runs a real Python process with the exec
kind's environment."""

from __future__ import annotations

import json
import operator
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, TypedDict

import pytest

from baton_langgraph import EXIT_LEASE_LOST, RUN_KEY, BatonSaver, Lease
from harness import PACKAGE_DIR, exec_env

FIXTURES = Path(__file__).parent / "fixtures"


def start(script, env, **extra):
    full = {**os.environ, **env, **extra, "PYTHONPATH": str(PACKAGE_DIR)}
    return subprocess.Popen([sys.executable, str(FIXTURES / script)], env=full, cwd=PACKAGE_DIR,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc, timeout=30):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def steps(log: Path) -> list[str]:
    return log.read_text().split("\n")[:-1] if log.exists() else []


@pytest.fixture
def step_log(tmp_path):
    return tmp_path / "steps.log"


def test_a_finished_program_is_not_kept_alive(ctl, redis_url, prefix):
    lease = ctl.claim(prefix, "t-done", "w")
    t0 = time.monotonic()
    code, out, err = finish(start("put_and_finish.py", exec_env(redis_url, prefix, lease)))
    assert (code, out, err) == (0, "saved\n", "")
    assert time.monotonic() - t0 < 10  # the lease is 10 minutes: nothing waited for it


def renew_until_line(ctl, prefix, lease, ttl, proc, want):
    """Renews the lease every third of it, as the runner's heartbeater does,
    until the child prints want on stderr; returns the rest of stderr's reader."""
    seen, lines = threading.Event(), []

    def read():
        for line in proc.stderr:
            lines.append(line)
            if line == want:
                seen.set()
        seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    while not seen.wait(ttl / 3000):
        ctl.heartbeat(prefix, lease, ttl)
    assert want in lines, "".join(lines)
    return reader, lines


def test_a_program_whose_lease_runs_out_ends_with_75_within_the_lease(ctl, redis_url, prefix, step_log):
    ttl = 3000
    lease = ctl.claim(prefix, "t-expire", "w", ttl)
    proc = start("long_step.py", exec_env(redis_url, prefix, lease), STEP_LOG=str(step_log))
    reader, lines = renew_until_line(ctl, prefix, lease, ttl, proc, "in work\n")
    ctl.heartbeat(prefix, lease, ttl)  # the last renewal: its runner is paused from now on
    t0 = time.monotonic()
    code = proc.wait(timeout=30)
    elapsed = time.monotonic() - t0
    reader.join(10)
    err = "".join(lines)
    assert code == EXIT_LEASE_LOST, err
    assert "lease ran out" in err and "the runner stopped renewing it; exiting with code 75" in err
    assert proc.stdout.read() == ""
    assert [s.split()[0] for s in steps(step_log)] == ["start", "work"]  # no step after the loss
    assert elapsed < ttl / 1000 + 1  # the lease and a second


def test_a_program_whose_node_was_taken_over_ends_with_75(ctl, redis_url, prefix, step_log):
    lease = ctl.claim(prefix, "t-takeover", "w", 3000)
    proc = start("long_step.py", exec_env(redis_url, prefix, lease), STEP_LOG=str(step_log))
    ctl.takeover(prefix, lease, "w2")
    code, _, err = finish(proc)
    assert code == EXIT_LEASE_LOST
    assert "lost: the node was claimed again (epoch 2)" in err or "its lease ran out" in err


def test_a_renewed_program_runs_on_and_a_cancel_ends_it(ctl, redis_url, prefix, step_log):
    ttl = 1500
    lease = ctl.claim(prefix, "t-renewed", "w", ttl)
    proc = start("long_step.py", exec_env(redis_url, prefix, lease), STEP_LOG=str(step_log))
    until = time.monotonic() + 3 * ttl / 1000
    while time.monotonic() < until:  # renew for three leases, as the runner's heartbeater does
        ctl.heartbeat(prefix, lease, ttl)
        time.sleep(ttl / 3000)  # the heartbeat's own period, not a wait for an outcome
    assert proc.poll() is None
    ctl.cancel(prefix, lease)
    ctl.heartbeat(prefix, lease, ttl)
    code, _, err = finish(proc)
    assert code == EXIT_LEASE_LOST
    assert "the run was cancelled" in err


def test_from_env_names_what_is_missing_or_inconsistent(ctl, redis_url, prefix):
    from baton_langgraph import BatonError

    lease = ctl.claim(prefix, "env-thread", "worker-7")
    env = exec_env(redis_url, prefix, lease)
    with pytest.raises(BatonError, match="disagrees"):
        BatonSaver.from_env({**env, "BATON_EPOCH": "9"})
    with pytest.raises(BatonError, match="BATON_REDIS_URL"):
        BatonSaver.from_env({**env, "BATON_REDIS_URL": ""})
    with pytest.raises(BatonError, match="BATON_FENCING_TOKEN"):
        BatonSaver.from_env({k: v for k, v in env.items() if k != "BATON_FENCING_TOKEN"})
    s = BatonSaver.from_env(env, watch=False, on_lost="raise")
    assert s.lease == Lease.from_dict(lease)
    s.close()


class S(TypedDict):
    log: Annotated[list[str], operator.add]


def run_agent(env, step_log, **extra):
    return finish(start("agent.py", env, STEP_LOG=str(step_log), **extra))


def test_run_node_starts_prints_its_result_and_does_not_run_a_finished_graph_again(ctl, rdb, redis_url, prefix,
                                                                                    step_log):
    lease = ctl.claim(prefix, "t-node", "w")
    env = exec_env(redis_url, prefix, lease)
    code, out, err = run_agent(env, step_log, GRAPH_INPUT=json.dumps({"topic": "fencing"}))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:3] == ["::progress 33", "::progress 67", "::progress 100"]
    result = json.loads(lines[3])
    assert result == {"topic": "fencing", "steps": ["plan:fencing", "research:fencing", "write:fencing"]}
    assert len(lines) == 4 and "step plan on fencing" in err  # the graph's prints went to stderr

    # The same run again (its runner stopped before the commit): not run again.
    code, out, err = run_agent(env, step_log, GRAPH_INPUT=json.dumps({"topic": "other"}))
    assert code == 0, err
    assert json.loads(out.splitlines()[-1]) == result
    assert steps(step_log) == [f"{s} {lease['run']} 1" for s in ("plan", "research", "write")]

    # Every checkpoint records the run.
    s = BatonSaver(redis=redis_url, prefix=prefix, lease=Lease.from_dict(lease))
    metas = [t.metadata for t in s.list({"configurable": {"thread_id": "t-node"}})]
    assert metas and all(m[RUN_KEY] == lease["run"] for m in metas)


def test_run_node_resumes_only_its_own_run_and_a_new_run_starts_with_its_input(ctl, redis_url, prefix, step_log,
                                                                               tmp_path):
    release = tmp_path / "release"
    first = ctl.claim(prefix, "t-resume", "w-1", 1500)
    proc = start("agent.py", exec_env(redis_url, prefix, first), STEP_LOG=str(step_log), SLOW_STEP="research",
                 RELEASE=str(release), GRAPH_INPUT=json.dumps({"topic": "one"}))
    reader, lines = renew_until_line(ctl, prefix, first, 1500, proc, "waiting in research\n")  # "plan" is saved
    # The first attempt stops in "research" past its lease; a takeover runs the node again.
    again = ctl.takeover(prefix, first, "w-2")
    code = proc.wait(timeout=30)
    reader.join(10)
    assert code == EXIT_LEASE_LOST, "".join(lines)
    release.touch()
    code, out, err = run_agent(exec_env(redis_url, prefix, again), step_log,
                               GRAPH_INPUT=json.dumps({"topic": "ignored: this run resumes"}))
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["steps"] == ["plan:one", "research:one", "write:one"]
    assert steps(step_log) == [f"plan {first['run']} 1", f"research {first['run']} 2", f"write {first['run']} 2"]
    ctl.commit(prefix, again)

    # A new run on the thread starts with its own input, on the thread's state.
    second = ctl.claim(prefix, "t-resume", "w-3")
    code, out, err = run_agent(exec_env(redis_url, prefix, second), step_log, GRAPH_INPUT=json.dumps({"topic": "two"}))
    assert code == 0, err
    assert json.loads(out.splitlines()[-1]) == {
        "topic": "two", "steps": ["plan:one", "research:one", "write:one", "plan:two", "research:two", "write:two"]}


def test_run_node_gives_a_graph_compiled_without_a_checkpointer_the_nodes_saver(ctl, redis_url, prefix, capsys):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    from baton_langgraph import BatonError, run_node

    builder = StateGraph(S).add_node("a", lambda s: {"log": ["a"]}).add_edge(START, "a").add_edge("a", END)
    lease = ctl.claim(prefix, "t-bare", "w")
    env = exec_env(redis_url, prefix, lease)
    assert run_node(builder.compile(), {"log": []}, env=env) == {"log": ["a"]}
    assert capsys.readouterr().out == '{"log": ["a"]}\n'
    s = BatonSaver(redis=redis_url, prefix=prefix, lease=Lease.from_dict(lease))
    assert s.get_tuple({"configurable": {"thread_id": "t-bare"}}).metadata[RUN_KEY] == lease["run"]
    with pytest.raises(BatonError, match="not a BatonSaver"):
        run_node(builder.compile(checkpointer=InMemorySaver()), {"log": []}, env=env)
    with pytest.raises(BatonError, match="BATON_RUN_ID"):
        run_node(builder.compile(), {"log": []}, env={})


def test_an_interrupt_ends_the_node_with_the_interrupt_in_its_result_until_the_core_can_park(ctl, redis_url, prefix,
                                                                                               capsys):
    # Parking a node (WAITING) for interrupt() is not in baton's core yet: today
    # the graph stops at the interrupt, run_node prints the state with the
    # pending interrupt, and the node ends; the checkpoint keeps the interrupt.
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    from baton_langgraph import run_node

    def ask(state):
        return {"log": [f"approved={interrupt('deploy to prod?')}"]}

    builder = StateGraph(S).add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    lease = ctl.claim(prefix, "t-hitl", "w")
    result = run_node(builder.compile(), {"log": []}, env=exec_env(redis_url, prefix, lease))
    printed = json.loads(capsys.readouterr().out)
    assert printed["log"] == [] and "deploy to prod?" in json.dumps(printed["__interrupt__"])
    assert result["__interrupt__"][0].value == "deploy to prod?"
    s = BatonSaver(redis=redis_url, prefix=prefix, lease=Lease.from_dict(lease))
    assert s.get_tuple({"configurable": {"thread_id": "t-hitl"}}).checkpoint is not None


def test_a_lost_claim_ends_a_program_blocked_on_pipes_nobody_reads(ctl, redis_url, prefix, tmp_path):
    ttl = 1500
    marker = tmp_path / "flooding"
    lease = ctl.claim(prefix, "t-flood", "w", ttl)
    proc = start("flood.py", exec_env(redis_url, prefix, lease), MARKER=str(marker))  # its pipes are never read
    while not marker.exists():  # renew, as the runner does, until the step floods its pipes
        assert proc.poll() is None
        ctl.heartbeat(prefix, lease, ttl)
        time.sleep(ttl / 3000)
    ctl.heartbeat(prefix, lease, ttl)
    t0 = time.monotonic()
    assert proc.wait(timeout=30) == EXIT_LEASE_LOST
    assert time.monotonic() - t0 < ttl / 1000 + 1
