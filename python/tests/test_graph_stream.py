"""A graph's stream, live, through the runner's SSE endpoint: the example's
chat model's tokens reach a client in order, and a reconnect with
Last-Event-ID misses and repeats none."""

from __future__ import annotations

import json

from baton_langgraph.client import BatonClient
from test_graph_worker import EXAMPLE, graph_env  # noqa: F401

import pytest


@pytest.fixture
def example(start_runner):
    return start_runner("g-st", **graph_env(EXAMPLE))


ANSWER = "fencing keeps a paused worker's late writes out"


def sse(url: str, last_id: str | None = None) -> list[dict]:
    """Reads a run's stream (GET /v1/runs/{id}/stream) to its end event."""
    import httpx

    headers = {"Accept": "text/event-stream"}
    if last_id:
        headers["Last-Event-ID"] = last_id
    out, ev = [], {}
    with httpx.stream("GET", url, headers=headers, timeout=httpx.Timeout(5, read=30)) as resp:
        assert resp.status_code == 200, resp.read()
        for line in resp.iter_lines():
            if line == "":
                if "event" in ev:
                    out.append(ev)
                    if ev["event"] == "end":
                        return out
                ev = {}
            elif line.startswith(":") or line.startswith("retry:"):
                continue
            else:
                k, _, v = line.partition(": ")
                ev[k] = v
    return out


def test_the_chat_models_tokens_reach_an_sse_client_in_order_and_a_reconnect_misses_and_repeats_none(example):
    c = BatonClient(example.url)
    c.submit({"id": "tok", "thread": "t-tok", "nodes": [{"id": "chat", "kind": "graph", "input": {
        "graph": "chat", "input": {"messages": [{"role": "user", "content": "why fence?"}]},
        "stream_mode": ["messages-tuple", "updates"]}}]})
    url = f"{example.url}/v1/runs/tok/stream"
    events = sse(url)
    assert events[0]["event"] == "metadata" and json.loads(events[0]["data"])["run_id"] == "tok"
    assert events[-1]["event"] == "end"
    tokens = [json.loads(e["data"]) for e in events if e["event"] == "messages"]
    assert len(tokens) > 5 and "".join(t[0]["content"] for t in tokens) == ANSWER
    assert [e["event"] for e in events if e["event"] not in ("messages", "metadata")] == ["updates", "end"]
    # A client that reconnects after the third token gets exactly what followed it.
    third = [e for e in events if e["event"] == "messages"][2]
    i = events.index(third)
    again = sse(url, last_id=third["id"])
    assert [(e.get("id"), e["event"], e["data"]) for e in again] == \
        [(e.get("id"), e["event"], e["data"]) for e in events[i + 1:]]
