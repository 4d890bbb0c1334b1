"""A LangGraph agent run as a baton exec node: `python agent.py`.

The graph is written as LangGraph's docs teach; only the checkpointer is
baton's, and run_node is the whole main. Six deterministic steps (no LLM:
each derives its part from the state) are checkpointed after every
super-step in baton's fenced store. Any attempt of the node, on any runner,
resumes this run's graph from its last checkpoint; an attempt whose claim is
gone (its runner paused past the lease, then taken over) stops at once with
exit code 75, even in the middle of a step.

A person can be asked before the answer is published, with LangGraph's own
interrupt(): given "review": true, the "review" step stops the graph with
{"question": ..., "draft": ...}. run_node then parks the node (WAITING, no
worker held) until someone resumes it, through `enqueue resume` or baton's
API (POST /v1/runs/{run}/nodes/{node}/resume), with any JSON
answer: {"approved": true, "note": "..."} or false. interrupt() then returns
that answer, and publish says who decided.

Input: GRAPH_INPUT, JSON: {"messages": [{"role": "user", "content": "..."}],
"review": false}.
Settings (the node's input.env): STEP_SECONDS, how long each step works
(default 0.2); SLOW_STEP and SLOW_SECONDS, one step that works longer;
STEP_LOG, a file each step appends "start|done <step> <pid> <epoch>
<worker>" to. Output: the final state, one JSON line on stdout: the node's
result.
"""

from __future__ import annotations

import operator
import os
import time
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from baton_langgraph import BatonSaver, progress, run_node


class State(TypedDict):
    messages: Annotated[list[dict], operator.add]
    steps: Annotated[list[dict], operator.add]
    outline: list[str]
    draft: str
    review: bool
    verdict: dict | bool | None


STEPS = ["plan", "research", "analyze", "write", "check", "publish"]
ME = {"pid": os.getpid(), "epoch": int(os.environ.get("BATON_EPOCH", "0")),
      "worker": os.environ.get("BATON_WORKER_ID", "")}


def log(what: str, name: str) -> None:
    if path := os.environ.get("STEP_LOG"):
        with open(path, "a") as f:
            f.write(f"{what} {name} {ME['pid']} {ME['epoch']} {ME['worker']}\n")


def step(name, compute):
    def run(state: State) -> dict:
        log("start", name)
        slow = os.environ.get("SLOW_STEP") == name
        time.sleep(float(os.environ.get("SLOW_SECONDS" if slow else "STEP_SECONDS", "0.2")))  # the step's work
        part = compute(state)
        log("done", name)
        progress((STEPS.index(name) + 1) * 100 / len(STEPS))
        return {**part, "steps": [{"step": name, **ME}]}
    return run


def question(state: State) -> str:
    users = [m["content"] for m in state.get("messages", []) if m.get("role") == "user"]
    return users[-1] if users else ""


def review(state: State) -> dict:
    """Asks a person about the draft, when the input asked for a review."""
    if not state.get("review"):
        return {}
    answer = interrupt({"question": f"publish the answer to {question(state)!r}?", "draft": state["draft"]})
    return {"verdict": answer}


def verdict(state: State) -> str:
    v = state.get("verdict")
    if v is None:
        return ""
    ok = v.get("approved") if isinstance(v, dict) else bool(v)
    note = v.get("note") if isinstance(v, dict) else None
    return f" ({'approved' if ok else 'rejected'} by a person{': ' + note if note else ''})"


builder = StateGraph(State)
builder.add_node("plan", step("plan", lambda s: {"outline": [f"{h} {question(s)}" for h in ("why", "how", "limits")]}))
builder.add_node("research", step("research", lambda s: {"outline": [f"{h}: fact {i + 1}"
                                                                      for i, h in enumerate(s["outline"])]}))
builder.add_node("analyze", step("analyze", lambda s: {"outline": [*s["outline"], f"{len(s['outline'])} facts"]}))
builder.add_node("write", step("write", lambda s: {"draft": "; ".join(s["outline"])}))
builder.add_node("check", step("check", lambda s: {"draft": s["draft"] if len(s["draft"]) > 10 else "too short"}))
builder.add_node("publish", step("publish", lambda s: {"messages": [
    {"role": "assistant", "content": f"{question(s)}: {len(s['draft'])} chars, "
                                     f"after {len(s.get('messages', []))} messages{verdict(s)}"}]}))
builder.add_node("review", review)
prev = START
for name in STEPS:
    if name == "publish":
        builder.add_edge(prev, "review")
        prev = "review"
    builder.add_edge(prev, name)
    prev = name
builder.add_edge(prev, END)

graph = builder.compile(checkpointer=BatonSaver.from_env())

if __name__ == "__main__":
    run_node(graph)
