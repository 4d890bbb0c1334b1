"""The HTTP client, sync and async, against a real runner's API: every call
answers what the API says, and every refusal is an exception naming what was
wrong."""

from __future__ import annotations

import pytest

from baton_langgraph.client import (
    AsyncBatonClient,
    BadRequestError,
    BatonClient,
    ConflictError,
    NotFoundError,
    UnauthorizedError,
)
from baton_langgraph.errors import BatonError

TOKEN = "s3cret-token-for-tests"


@pytest.fixture
def api(start_runner):
    return start_runner("py-api", API_TOKEN=TOKEN)


def sleep_run(run_id, thread, seconds="30s", multitask=None, **more):
    spec = {"id": run_id, "thread": thread, "nodes": [{"id": "wait", "kind": "sleep", "input": {"duration": seconds}}],
            **more}
    if multitask:
        spec["multitask"] = multitask
    return spec


def test_sync_client_submits_follows_cancels_retries_and_reads_threads(api):
    with BatonClient(api.url, token=TOKEN) as c:
        sub = c.submit({"id": "c-1", "thread": "t-client", "nodes": [
            {"id": "a", "kind": "noop"}, {"id": "b", "kind": "noop", "deps": ["a"]}]})
        assert (sub["id"], sub["created"]) == ("c-1", True)
        followed = list(c.follow("c-1"))
        assert followed[-1] == {"type": "end", "id": "c-1", "status": "SUCCEEDED"}
        listed = c.events("c-1")["events"]
        assert [e["id"] for e in followed[:-1]] == [e["id"] for e in listed]  # every event, in order
        status = c.status("c-1")
        assert status["status"] == "SUCCEEDED" and [n["state"] for n in status["nodes"]] == ["SUCCEEDED"] * 2
        assert c.thread("t-client")["thread"] == "t-client"
        assert c.checkpoints("t-client")["checkpoints"] == []
        assert any(r["id"] == "c-1" for r in c.runs())

        c.submit(sleep_run("c-2", "t-cancel", start_in="1h"))  # not claimed before the cancel
        cancelled = c.cancel("c-2", reason="changed my mind")
        assert cancelled["id"] == "c-2" and cancelled["already"] is False
        assert c.wait("c-2")["status"] == "CANCELLED"
        retried = c.retry("c-2", idempotency_key="again-1")
        assert retried["status"] == "RUNNING" and c.retry("c-2", idempotency_key="again-1")["already"] is True
        assert c.cancel("c-2")["status"] == "CANCELLED"

        with pytest.raises(NotFoundError, match="HTTP 404"):
            c.status("no-such-run")
        with pytest.raises(BadRequestError) as e:
            c.submit({"nodes": [{"id": "x", "kind": "noop"}], "multitask": "sideways", "thread": "t"})
        assert any(p["field"] == "multitask" for p in e.value.problems)
        c.submit(sleep_run("c-3", "t-busy"))
        with pytest.raises(ConflictError):
            c.submit(sleep_run("c-4", "t-busy", multitask="reject"))
        c.cancel("c-3")
        with pytest.raises(BatonError, match="invalid id"):
            c.status("../etc")
    with BatonClient(api.url, token="wrong") as c, pytest.raises(UnauthorizedError):
        c.status("c-1")


async def test_async_client_does_the_same(api):
    async with AsyncBatonClient(api.url, token=TOKEN) as c:
        sub = await c.submit({"id": "ac-1", "thread": "t-async", "nodes": [{"id": "a", "kind": "noop"}]})
        assert sub["id"] == "ac-1"
        followed = [e async for e in c.follow("ac-1")]
        assert followed[-1]["status"] == "SUCCEEDED"
        assert [e["id"] for e in followed[:-1]] == [e["id"] for e in (await c.events("ac-1"))["events"]]
        assert (await c.wait("ac-1"))["status"] == "SUCCEEDED"
        assert (await c.thread("t-async"))["thread"] == "t-async"
        await c.submit(sleep_run("ac-2", "t-async-2"))
        assert (await c.cancel("ac-2"))["id"] == "ac-2"
        assert (await c.wait("ac-2"))["status"] == "CANCELLED"
        with pytest.raises(NotFoundError):
            await c.status("nope")
    async with AsyncBatonClient(api.url) as c:
        with pytest.raises(UnauthorizedError):
            await c.runs()


ASK = ('if [ -n "$BATON_RESUME_FILE" ]; then printf \'{"got": %s}\\n\' "$(cat "$BATON_RESUME_FILE")"; '
       'else echo \'::wait {"ask": "ok?"}\'; fi')


def parking_run(run_id):
    """A run whose exec node parks with {"ask": "ok?"} and, resumed, answers {"got": value}."""
    return {"id": run_id, "nodes": [{"id": "ask", "kind": "exec", "input": {"command": ["sh", "-c", ASK]}}]}


def waiting(status):
    return status["nodes"][0]["state"] == "WAITING"


def test_resume_answers_a_waiting_node_once_and_refuses_what_is_not_waiting(api):
    from harness import wait_until

    with BatonClient(api.url, token=TOKEN) as c:
        c.submit(parking_run("r-1"))
        wait_until(lambda: waiting(c.status("r-1")), 30, "the node to park")
        node = c.status("r-1")["nodes"][0]
        assert node["wait"]["request"] == {"ask": "ok?"}
        with pytest.raises(ConflictError, match="HTTP 409"):
            c.resume("r-1", "ask", True, wait_id="not-this-wait")
        with pytest.raises(NotFoundError):
            c.resume("r-1", "no-such-node", True)
        with pytest.raises(NotFoundError):
            c.resume("no-such-run", "ask", True)
        with pytest.raises(BatonError, match="not JSON"):
            c.resume("r-1", "ask", float("nan"))
        with pytest.raises(BatonError, match="invalid id"):
            c.resume("r-1", "../ask", True)
        assert waiting(c.status("r-1")), "refused resumes changed nothing"

        first = c.resume("r-1", "ask", {"yes": True, "by": "ann"}, wait_id=node["wait"]["id"])
        assert first == {"id": "r-1", "node": "ask", "already": False,
                         "answer": {"wait": node["wait"]["id"], "value": {"yes": True, "by": "ann"}}}
        again = c.resume("r-1", "ask", "something else")
        assert again["already"] is True and again["answer"] == first["answer"]  # the first answer stands
        done = c.wait("r-1")
        assert done["status"] == "SUCCEEDED"
        assert done["nodes"][0]["result"] == {"got": {"yes": True, "by": "ann"}}
        # The answered wait, asked again once the run ended: still the first answer.
        assert c.resume("r-1", "ask", True)["answer"] == first["answer"]
        c.submit({"id": "r-2", "nodes": [{"id": "ask", "kind": "noop"}]})
        c.wait("r-2")
        with pytest.raises(ConflictError, match="HTTP 409"):  # a node that never waited
            c.resume("r-2", "ask", True)


async def test_async_resume(api):
    import asyncio

    async with AsyncBatonClient(api.url, token=TOKEN) as c:
        await c.submit(parking_run("ar-1"))
        for _ in range(600):  # polling the node's state: no event says "parked" to a client
            if waiting(await c.status("ar-1")):
                break
            await asyncio.sleep(0.05)
        assert (await c.resume("ar-1", "ask", [1, 2]))["answer"]["value"] == [1, 2]
        assert (await c.wait("ar-1"))["nodes"][0]["result"] == {"got": [1, 2]}
