"""Graphs for the Agent Server API's tests; they import nothing of baton.

- chat: "plan" then "write"; "write" sends a custom event. The state's
  "steps" lists the nodes run, across turns.
- boom: raises ValueError.
- slow: sends a custom event {"tick": i} every input["every"] seconds
  (default 0.05), input["ticks"] times (default 1000), then ends.
"""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, TypedDict

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    topic: str
    steps: Annotated[list[str], operator.add]
    ticks: int
    every: float


def plan(state: State) -> dict:
    return {"steps": ["plan " + state.get("topic", "")]}


def write(state: State) -> dict:
    get_stream_writer()({"wrote": state.get("topic", "")})
    return {"steps": ["write"]}


def explode(state: State) -> dict:
    raise ValueError("the node explodes")


async def tick(state: State) -> dict:
    writer = get_stream_writer()
    for i in range(state.get("ticks", 1000)):
        writer({"tick": i})
        await asyncio.sleep(state.get("every", 0.05))
    return {"steps": ["ticked"]}


def _build(*nodes):
    g = StateGraph(State)
    prev = START
    for fn in nodes:
        g.add_node(fn.__name__, fn)
        g.add_edge(prev, fn.__name__)
        prev = fn.__name__
    g.add_edge(prev, END)
    return g.compile()


chat = _build(plan, write)
boom = _build(explode)
slow = _build(tick)
