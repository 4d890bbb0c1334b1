"""The FastAPI example (service.py), tested as a user reaches it: httpx
against uvicorn, in front of real runners on a real redis-server, the
LangGraph agent running as exec nodes. Two messages on one thread, with
enqueue and with interrupt; the SSE stream relaying every event of a run in
order; and a person in the loop: the agent's interrupt() asks, its node
waits, and an answer through the service finishes the run with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import pytest

from baton_langgraph.client import BatonClient, _SSE
from harness import PACKAGE_DIR, free_port


@pytest.fixture
def service(start_runner, tmp_path):
    runners = [start_runner(rid) for rid in ("svc-r1", "svc-r2")]
    port = free_port()
    env = {**os.environ, "BATON_URL": runners[0].url, "PYTHONPATH": str(PACKAGE_DIR),
           "AGENT_ENV": json.dumps({"PYTHONPATH": str(PACKAGE_DIR), "STEP_SECONDS": "0.3"})}
    log = open(tmp_path / "uvicorn.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "service:app", "--port", str(port),
                             "--log-level", "warning"], cwd=PACKAGE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:  # polling a starting server: no event to wait on
        try:
            if httpx.get(url + "/openapi.json", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "uvicorn.log").read_text()
        time.sleep(0.05)
    try:
        yield url, BatonClient(runners[0].url)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def stream(url: str, thread: str, run: str) -> list[tuple[str, str | None, dict]]:
    """Reads the service's SSE stream of a run to its end."""
    out, sse = [], _SSE()
    with httpx.stream("GET", f"{url}/threads/{thread}/stream", params={"run": run},
                      timeout=httpx.Timeout(10, read=60)) as resp:
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        for line in resp.iter_lines():
            if (ev := sse.feed(line)) is not None:
                out.append((ev[0], ev[1], json.loads(ev[2])))
    return out


def post(url, thread, content, multitask):
    r = httpx.post(f"{url}/threads/{thread}/messages", json={"content": content, "multitask": multitask}, timeout=30)
    assert r.status_code == 202, r.text
    return r.json()


def messages(baton, run):
    return baton.status(run)["nodes"][0]["result"]["messages"]


def test_two_messages_with_enqueue_run_one_after_the_other_on_the_threads_state(service):
    url, baton = service
    first = post(url, "chat-q", "fencing", "enqueue")
    second = post(url, "chat-q", "leases", "enqueue")
    assert second["status"] == "QUEUED" and second["behind"] == first["run"]

    for run in (first["run"], second["run"]):
        events = stream(url, "chat-q", run)
        assert events[-1][0] == "end" and events[-1][2] == {"id": run, "status": "SUCCEEDED"}
        relayed = [(eid, data["type"]) for kind, eid, data in events[:-1]]
        assert relayed == [(e["id"], e["type"]) for e in baton.events(run)["events"]]  # every event, in order
        kinds = [t for _, t in relayed]
        assert kinds[0] == "submitted" and kinds[-2:] == ["committed", "run_finished"]
        assert kinds.index("claimed") < kinds.index("checkpointed")
    assert [m["role"] for m in messages(baton, second["run"])] == ["user", "assistant", "user", "assistant"]
    assert messages(baton, second["run"])[-1]["content"].startswith("leases:")


def test_a_message_with_interrupt_cancels_the_running_one_and_answers_its_own_input(service):
    url, baton = service
    first = post(url, "chat-i", "a long question", "enqueue")
    second = post(url, "chat-i", "never mind, this one", "interrupt")
    assert baton.wait(first["run"])["status"] == "CANCELLED"
    assert baton.wait(second["run"])["status"] == "SUCCEEDED"
    last = messages(baton, second["run"])[-1]
    assert last["role"] == "assistant" and last["content"].startswith("never mind, this one:")


def test_bad_input_is_refused_by_name(service):
    url, _ = service
    r = httpx.post(f"{url}/threads/bad%20thread/messages", json={"content": "x"})
    assert r.status_code == 400 and "thread" in r.json()["detail"]
    r = httpx.post(f"{url}/threads/t/messages", json={"content": "x", "multitask": "sideways"})
    assert r.status_code == 422
    assert httpx.get(f"{url}/threads/t/stream", params={"run": "no-such-run"}).status_code == 404


def test_a_person_answers_the_agents_question_through_the_service(service):
    from harness import wait_until

    url, baton = service
    r = httpx.post(f"{url}/threads/chat-h/messages", json={"content": "deploy v2", "review": True}, timeout=30)
    assert r.status_code == 202, r.text
    run = r.json()["run"]

    # The agent's interrupt() parks its node: the service shows the question.
    asked = wait_until(lambda: (q := httpx.get(f"{url}/threads/chat-h/question")).status_code == 200 and q.json(),
                       60, "the agent to ask")
    assert asked["run"] == run and asked["node"] == "agent"
    assert asked["request"]["question"] == "publish the answer to 'deploy v2'?" and asked["request"]["draft"]
    node = baton.status(run)["nodes"][0]
    assert node["state"] == "WAITING" and not node.get("lease_until"), "a waiting node holds no lease"
    assert baton.status(run)["status"] == "RUNNING"

    stale = httpx.post(f"{url}/threads/chat-h/resume", json={"answer": True, "wait_id": "not-the-question"})
    assert stale.status_code == 409, stale.text  # an answer to another question is refused
    assert baton.status(run)["nodes"][0]["state"] == "WAITING"
    answer = {"approved": True, "note": "ship it"}
    resp = httpx.post(f"{url}/threads/chat-h/resume", json={"answer": answer, "wait_id": asked["wait_id"]})
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"run": run, "node": "agent", "wait_id": asked["wait_id"], "answer": answer,
                           "already": False}
    again = httpx.post(f"{url}/threads/chat-h/resume", json={"answer": False, "wait_id": asked["wait_id"]})
    assert again.status_code == 200 and again.json()["already"] is True and again.json()["answer"] == answer

    events = stream(url, "chat-h", run)
    assert events[-1][2] == {"id": run, "status": "SUCCEEDED"}
    kinds = [data["type"] for _, _, data in events[:-1]]
    assert kinds.index("parked") < kinds.index("resumed") < kinds.index("committed")
    last = messages(baton, run)[-1]
    assert last["role"] == "assistant" and last["content"].endswith("(approved by a person: ship it)")
    assert baton.status(run)["nodes"][0]["result"]["verdict"] == answer
    assert httpx.get(f"{url}/threads/chat-h/question").status_code == 404
    nothing = httpx.post(f"{url}/threads/chat-h/resume", json={"answer": True})
    assert nothing.status_code == 404 and "not waiting" in nothing.json()["detail"]
