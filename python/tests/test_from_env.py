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


def approval_graph(ran: list[str]):
    """A graph that asks a person in its second step, as LangGraph's docs show."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    class A(TypedDict):
        change: str
        log: Annotated[list, operator.add]

    def plan(s):
        ran.append("plan")
        return {"log": [f"plan:{s['change']}"]}

    def approve(s):
        ran.append("approve")
        answer = interrupt({"ask": f"deploy {s['change']}?"})
        return {"log": [f"approved:{json.dumps(answer, separators=(',', ':'))}"]}

    def deploy(s):
        ran.append("deploy")
        return {"log": ["deployed"]}

    return (StateGraph(A).add_node("plan", plan).add_node("approve", approve).add_node("deploy", deploy)
            .add_edge(START, "plan").add_edge("plan", "approve").add_edge("approve", "deploy")
            .add_edge("deploy", END).compile())


def next_attempt(ctl, prefix, lease, worker):
    """The node's next claim, as after a park and a resume (or a lost
    lease): the lease is cut short, then the node claimed again."""
    ctl.heartbeat(prefix, lease, 1)
    return ctl.takeover(prefix, lease, worker)


def resumed(tmp_path, text: str) -> dict[str, str]:
    """The BATON_RESUME_FILE the exec kind gives the attempt after a resume."""
    f = tmp_path / "resume.json"
    f.write_text(text)
    return {"BATON_RESUME_FILE": str(f)}


def test_an_interrupt_parks_the_node_and_a_resume_answers_it(ctl, redis_url, prefix, capsys, tmp_path):
    from baton_langgraph import run_node

    ran: list[str] = []
    a = ctl.claim(prefix, "t-hitl", "w-a")
    result = run_node(approval_graph(ran), {"change": "v2", "log": []}, env=exec_env(redis_url, prefix, a))
    # Parked: a ::wait line with the interrupt's value, no result line.
    assert capsys.readouterr().out == '::wait {"ask":"deploy v2?"}\n'
    assert result["__interrupt__"][0].value == {"ask": "deploy v2?"}
    assert ran == ["plan", "approve"]
    s = BatonSaver(redis=redis_url, prefix=prefix, lease=Lease.from_dict(a))
    assert s.get_tuple({"configurable": {"thread_id": "t-hitl"}}).metadata[RUN_KEY] == a["run"]

    # An attempt without a resume (the park was lost with its attempt) asks again, running nothing.
    b = next_attempt(ctl, prefix, a, "w-b")
    run_node(approval_graph(ran), {"change": "ignored", "log": []}, env=exec_env(redis_url, prefix, b))
    assert capsys.readouterr().out == '::wait {"ask":"deploy v2?"}\n'
    assert ran == ["plan", "approve"]

    # The attempt after a resume: Command(resume=value), and the answer reaches the graph.
    c = next_attempt(ctl, prefix, b, "w-c")
    env = {**exec_env(redis_url, prefix, c), **resumed(tmp_path, '{"ok": true, "by": "ann"}')}
    result = run_node(approval_graph(ran), {"change": "ignored", "log": []}, env=env)
    assert json.loads(capsys.readouterr().out) == {
        "change": "v2", "log": ["plan:v2", 'approved:{"ok":true,"by":"ann"}', "deployed"]}
    assert ran == ["plan", "approve", "approve", "deploy"]  # LangGraph runs the asking node again; plan is not


def test_several_interrupts_are_asked_by_id_and_answered_by_id(ctl, redis_url, prefix, capsys, tmp_path):
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    from baton_langgraph import arun_node

    async def legal(s):
        return {"log": [f"legal:{interrupt('legal ok?')}"]}

    async def security(s):
        return {"log": [f"security:{interrupt('security ok?')}"]}

    def graph():
        return (StateGraph(S).add_node("legal", legal).add_node("security", security)
                .add_edge(START, "legal").add_edge(START, "security").add_edge("legal", END)
                .add_edge("security", END).compile())

    import asyncio

    a = ctl.claim(prefix, "t-two", "w-a")
    asyncio.run(arun_node(graph(), {"log": []}, env=exec_env(redis_url, prefix, a)))
    line = capsys.readouterr().out
    assert line.startswith("::wait ") and line.endswith("\n") and line.count("\n") == 1
    asks = json.loads(line[len("::wait "):])["interrupts"]
    assert sorted(i["value"] for i in asks) == ["legal ok?", "security ok?"]
    answers = {i["id"]: "yes" if i["value"].startswith("legal") else "no" for i in asks}
    b = next_attempt(ctl, prefix, a, "w-b")
    env = {**exec_env(redis_url, prefix, b), **resumed(tmp_path, json.dumps(answers))}
    asyncio.run(arun_node(graph(), {"log": []}, env=env))
    assert sorted(json.loads(capsys.readouterr().out)["log"]) == ["legal:yes", "security:no"]


def test_one_answer_goes_to_one_interrupt(ctl, redis_url, prefix, rdb, capsys, tmp_path):
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    from baton_langgraph import Keys, run_node

    ran: list[str] = []
    crash = [True]

    def first(s):
        ran.append("first")
        return {"log": [f"first:{interrupt('first?')}"]}

    def middle(s):
        ran.append("middle")
        if crash.pop() if crash else False:
            raise RuntimeError("middle crashed")
        return {"log": ["middle"]}

    def second(s):
        ran.append("second")
        return {"log": [f"second:{interrupt('second?')}"]}

    def graph():
        return (StateGraph(S).add_node("first", first).add_node("middle", middle).add_node("second", second)
                .add_edge(START, "first").add_edge("first", "middle").add_edge("middle", "second")
                .add_edge("second", END).compile())

    def answered(lease, wait):  # what resume.lua leaves on the node: the wait it answered
        rdb.hset(Keys(prefix).node(lease["thread"], lease["run"], lease["node"]), "resumed_wait", wait)

    yes = resumed(tmp_path, '"yes"')
    a = ctl.claim(prefix, "t-once", "w-a")
    run_node(graph(), {"log": []}, env=exec_env(redis_url, prefix, a))
    assert capsys.readouterr().out == '::wait "first?"\n'
    answered(a, "wait-1")
    # Every attempt after the resume holds wait-1's answer: b answers, then crashes ...
    b = next_attempt(ctl, prefix, a, "w-b")
    with pytest.raises(RuntimeError, match="middle crashed"):
        run_node(graph(), {"log": []}, env={**exec_env(redis_url, prefix, b), **yes})
    # ... c goes on and reaches the second question ...
    c = next_attempt(ctl, prefix, b, "w-c")
    run_node(graph(), {"log": []}, env={**exec_env(redis_url, prefix, c), **yes})
    assert capsys.readouterr().out == '::wait "second?"\n'
    # ... and, its park lost with its attempt, d asks it again: wait-1's answer is not its answer.
    d = next_attempt(ctl, prefix, c, "w-d")
    run_node(graph(), {"log": []}, env={**exec_env(redis_url, prefix, d), **yes})
    assert capsys.readouterr().out == '::wait "second?"\n'
    assert ran == ["first", "first", "middle", "middle", "second"]  # d ran nothing
    # A new wait answered with the same text is a new answer.
    answered(d, "wait-2")
    e = next_attempt(ctl, prefix, d, "w-e")
    run_node(graph(), {"log": []}, env={**exec_env(redis_url, prefix, e), **yes})
    assert json.loads(capsys.readouterr().out) == {"log": ["first:yes", "middle", "second:yes"]}


def test_a_resume_file_that_is_not_json_fails_the_attempt_saying_so(ctl, redis_url, prefix, capsys, tmp_path):
    from baton_langgraph import BatonError, run_node

    a = ctl.claim(prefix, "t-badresume", "w-a")
    run_node(approval_graph([]), {"change": "v4", "log": []}, env=exec_env(redis_url, prefix, a))
    capsys.readouterr()
    b = next_attempt(ctl, prefix, a, "w-b")
    with pytest.raises(BatonError, match="BATON_RESUME_FILE .* is not JSON"):
        run_node(approval_graph([]), {"log": []}, env={**exec_env(redis_url, prefix, b), **resumed(tmp_path, "yes please")})
    assert capsys.readouterr().out == ""


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


GRAPH_MODULE = '''
import operator
from typing import Annotated, TypedDict
from langgraph.graph import StateGraph, START
from baton_langgraph import BatonSaver

class S(TypedDict):
    log: Annotated[list[str], operator.add]

builder = StateGraph(S)
builder.add_node("step", lambda s: {"log": ["step"]})
builder.add_edge(START, "step")
graph = builder.compile(checkpointer=BatonSaver.from_env())
'''


def test_a_graph_module_written_as_the_docs_teach_imports_outside_a_node(tmp_path):
    """The docs' graph module builds its checkpointer at import with
    from_env(). Imported where no node runs (a test, a notebook, the graph
    worker) it imports; running it says why it cannot, naming the way out,
    and nothing is written anywhere."""
    (tmp_path / "agentmod.py").write_text(GRAPH_MODULE)
    script = ("import asyncio, agentmod\n"
              "cfg = {'configurable': {'thread_id': 't'}}\n"
              "for call in (lambda: agentmod.graph.invoke({'log': []}, cfg),\n"
              "             lambda: asyncio.run(agentmod.graph.ainvoke({'log': []}, cfg))):\n"
              "    try:\n"
              "        call()\n"
              "    except Exception as e:\n"
              "        print(type(e).__name__, e)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(PACKAGE_DIR)])
    proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2, proc.stdout
    for line in lines:
        assert line.startswith("BatonError baton: this checkpointer is BatonSaver.from_env() outside a baton exec node")
        assert "LANGGRAPH_CONFIG" in line and "BatonSaver.reader" in line
