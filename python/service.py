"""The seeds' chat service, rebuilt on baton: FastAPI in front, the LangGraph
agent (agent.py, through run_node) as an exec node on a runner fleet.

    uvicorn service:app --port 8000     # next to bin/runner on :8080

- ``POST /threads/{thread}/messages`` {"content": "...", "multitask":
  "enqueue"} submits a run on the thread; while the thread's active run is
  still going, multitask decides: reject (409), enqueue (starts when it
  ends), interrupt (cancels it, then starts), rollback (cancels it and drops
  the checkpoints it wrote). Answers {"run", "status", "behind"}.
- ``GET /threads/{thread}/stream?run=ID`` relays the run's events (by default
  the thread's active run) as Server-Sent Events, in order, ending with
  ``event: end``; Last-Event-ID resumes after the last event seen.
- ``GET /threads/{thread}`` and ``GET /runs/{run}``: the thread and a run, as
  baton's API shows them (a finished run's result is the agent's state).
- A person in the loop: a message with ``"review": true`` makes the agent
  ask, with LangGraph's ``interrupt()``, before it publishes. Its node then
  waits (WAITING: no worker held, as long as it takes).
  ``GET /threads/{thread}/question`` shows what it asks: {"run", "node",
  "wait_id", "request"} (404 while nothing waits), and
  ``POST /threads/{thread}/resume`` {"answer": any JSON, "wait_id": "..."}
  answers it: the agent goes on with the answer as interrupt()'s value.
  With wait_id (the question the person saw) a stale answer is refused
  (409); a second answer to the same question changes nothing and returns
  the first ("already": true).

No worker runs here: the service only submits and reads, through
baton_langgraph.client. Configuration (environment): BATON_URL (default
http://127.0.0.1:8080), BATON_API_TOKEN (the runner's API_TOKEN), AGENT_DIR
(default this folder), AGENT_PYTHON (default this interpreter), AGENT_ENV
(JSON, more environment for the agent: never secrets, a node's env is
stored with the run).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, Header, HTTPException
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from baton_langgraph.client import AsyncBatonClient, BatonAPIError
from baton_langgraph.errors import BatonError

HERE = Path(__file__).resolve().parent
AGENT_NODE = "agent"


class Message(BaseModel):
    content: str = Field(min_length=1, max_length=32_000)
    multitask: Literal["reject", "enqueue", "interrupt", "rollback"] = "enqueue"
    review: bool = False  # ask a person before publishing


class Answer(BaseModel):
    answer: Any = None  # any JSON: interrupt() returns it in the agent
    wait_id: str | None = None  # the question answered; None: the one asked now


def agent_run(thread: str, msg: Message) -> dict:
    """The run spec of one message: one exec node running agent.py."""
    graph_input = {"messages": [{"role": "user", "content": msg.content}], "review": msg.review, "verdict": None}
    env = {"GRAPH_INPUT": json.dumps(graph_input),
           **json.loads(os.environ.get("AGENT_ENV") or "{}")}
    return {"thread": thread, "multitask": msg.multitask, "nodes": [{
        "id": AGENT_NODE, "kind": "exec", "max_attempts": 5,
        "input": {"command": [os.environ.get("AGENT_PYTHON") or sys.executable, "agent.py"],
                  "dir": os.environ.get("AGENT_DIR") or str(HERE), "env": env}}]}


def create_app() -> FastAPI:
    app = FastAPI(title="chat on baton")

    def baton() -> AsyncBatonClient:
        return AsyncBatonClient(os.environ.get("BATON_URL") or "http://127.0.0.1:8080",
                                token=os.environ.get("BATON_API_TOKEN") or None)

    def refused(e: BatonError) -> HTTPException:
        status = e.status if isinstance(e, BatonAPIError) else 400
        return HTTPException(status_code=status, detail=str(e))

    @app.post("/threads/{thread}/messages", status_code=202)
    async def post_message(thread: str, msg: Message) -> dict:
        async with baton() as c:
            try:
                sub = await c.submit(agent_run(thread, msg))
            except BatonError as e:
                raise refused(e) from None
        return {"run": sub["id"], "status": sub["status"], "behind": sub.get("behind")}

    @app.get("/threads/{thread}")
    async def get_thread(thread: str) -> dict:
        async with baton() as c:
            try:
                return await c.thread(thread)
            except BatonError as e:
                raise refused(e) from None

    @app.get("/runs/{run}")
    async def get_run(run: str) -> dict:
        async with baton() as c:
            try:
                return await c.status(run)
            except BatonError as e:
                raise refused(e) from None

    async def question_of(c: AsyncBatonClient, thread: str) -> dict:
        """The waiting node of the thread's active run, and what it asks."""
        run = (await c.thread(thread)).get("active")
        if run:
            for node in (await c.status(run)).get("nodes", []):
                if node.get("state") == "WAITING" and node.get("wait"):
                    return {"run": run, "node": node["id"], "wait_id": node["wait"]["id"],
                            "request": node["wait"].get("request")}
        raise HTTPException(status_code=404, detail=f"thread {thread} is not waiting for an answer")

    @app.get("/threads/{thread}/question")
    async def get_question(thread: str) -> dict:
        async with baton() as c:
            try:
                return await question_of(c, thread)
            except BatonError as e:
                raise refused(e) from None

    @app.post("/threads/{thread}/resume")
    async def resume(thread: str, body: Answer) -> dict:
        async with baton() as c:
            try:
                if body.wait_id is None:
                    asked = await question_of(c, thread)
                    run, node, wait_id = asked["run"], asked["node"], asked["wait_id"]
                else:
                    # The question the person saw: baton refuses (409) an
                    # answer to a wait that is no longer the node's, and
                    # answers a second one with the first.
                    run, node, wait_id = (await c.thread(thread)).get("active"), AGENT_NODE, body.wait_id
                    if not run:
                        raise HTTPException(status_code=409, detail=f"thread {thread} has no active run")
                res = await c.resume(run, node, body.answer, wait_id=wait_id)
            except BatonError as e:
                raise refused(e) from None
        return {"run": run, "node": node, "wait_id": wait_id, "answer": res["answer"].get("value"),
                "already": res["already"]}

    @app.get("/threads/{thread}/stream")
    async def stream(thread: str, run: str | None = None,
                     last_event_id: str | None = Header(default=None)) -> StreamingResponse:
        c = baton()
        try:
            if run is None:
                run = (await c.thread(thread)).get("active")
                if not run:
                    raise HTTPException(status_code=404, detail=f"thread {thread} has no active run: pass ?run=")
            info = await c.status(run)
            if (info.get("thread") or run) != thread:
                raise HTTPException(status_code=404, detail=f"run {run} is not on thread {thread}")
        except BatonError as e:
            await c.aclose()
            raise refused(e) from None
        except HTTPException:
            await c.aclose()
            raise

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for ev in c.follow(run, after=last_event_id):
                    if ev["type"] == "end":
                        yield f"event: end\ndata: {json.dumps({'id': ev['id'], 'status': ev['status']})}\n\n".encode()
                        return
                    yield f"id: {ev['id']}\ndata: {json.dumps(ev)}\n\n".encode()
            finally:
                await c.aclose()

        return StreamingResponse(relay(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    return app


app = create_app()
