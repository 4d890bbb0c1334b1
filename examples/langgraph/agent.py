"""A two-node graph, written as LangGraph's docs teach: it imports nothing of
baton. baton runs it with its own fenced checkpointer, as LangGraph's server
runs a graph with its own."""

from __future__ import annotations

import operator
import os
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    topic: str
    steps: Annotated[list[str], operator.add]
    answer: str


def plan(state: State) -> dict:
    return {"steps": [f"plan {state['topic']}"]}


def write(state: State) -> dict:
    greeting = os.environ.get("AGENT_GREETING", "hi")
    return {"steps": ["write"], "answer": f"{greeting}: {state['topic']} in {len(state['steps']) + 1} steps"}


builder = StateGraph(State)
builder.add_node("plan", plan)
builder.add_node("write", write)
builder.add_edge(START, "plan")
builder.add_edge("plan", "write")
builder.add_edge("write", END)
graph = builder.compile()
