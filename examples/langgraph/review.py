"""A person in the loop, with LangGraph's own interrupt(): the graph drafts,
asks, and publishes what the person answered. The attribute langgraph.json
names is a function returning the compiled graph, as LangGraph allows; it
is compiled with InMemorySaver, which baton replaces with its fenced saver
(as LangGraph's server replaces it with its own)."""

from __future__ import annotations

from typing import TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    change: str
    draft: str
    verdict: dict
    published: str


def draft(state: State) -> dict:
    return {"draft": f"deploy {state['change']}"}


def ask(state: State) -> dict:
    verdict = interrupt({"question": f"{state['draft']}?"})
    return {"verdict": verdict}


def publish(state: State) -> dict:
    ok = state["verdict"].get("approved")
    return {"published": f"{state['draft']}: {'approved' if ok else 'refused'}"}


def make_graph():
    b = StateGraph(State)
    b.add_node("draft", draft)
    b.add_node("ask", ask)
    b.add_node("publish", publish)
    b.add_edge(START, "draft")
    b.add_edge("draft", "ask")
    b.add_edge("ask", "publish")
    b.add_edge("publish", END)
    return b.compile(checkpointer=InMemorySaver())
