"""The graphs of ../graphs.mjs in Python, for the runs on baton's Python
graph worker: the same node names, state keys and values, so their
transcripts compare with the JS graphs' on LangGraph's reference server."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langgraph.config import get_store, get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt


class Steps(TypedDict, total=False):
    topic: str
    steps: Annotated[list[str], operator.add]
    answer: Any
    delay_ms: int


async def _delay(state: Steps) -> None:
    # A cancelled run's task is cancelled where it awaits.
    if state.get("delay_ms"):
        await asyncio.sleep(state["delay_ms"] / 1000)


async def plan(state: Steps) -> dict:
    await _delay(state)
    return {"steps": [f"plan {state['topic']}"]}


async def write(state: Steps) -> dict:
    await _delay(state)
    return {"steps": ["write"], "answer": f"hi: {state['topic']} in {len(state['steps']) + 1} steps"}


agent = (StateGraph(Steps).add_node("plan", plan).add_node("write", write)
         .add_edge(START, "plan").add_edge("plan", "write").add_edge("write", END).compile())


def ask_node(state: Steps) -> dict:
    answer = interrupt({"question": f"publish {state['topic']}?"})
    return {"steps": ["ask"], "answer": answer}


def finish(state: Steps) -> dict:
    return {"steps": [f"finish {state['answer']}"]}


ask = (StateGraph(Steps).add_node("ask", ask_node).add_node("finish", finish)
       .add_edge(START, "ask").add_edge("ask", "finish").add_edge("finish", END).compile())


async def model(state: MessagesState) -> dict:
    writer = get_stream_writer()
    writer({"status": "thinking"})
    reply = await FakeListChatModel(responses=["hello there"]).ainvoke(state["messages"])
    writer({"status": "done"})
    return {"messages": [reply]}


chat = StateGraph(MessagesState).add_node("model", model).add_edge(START, "model").add_edge("model", END).compile()


class Notes(TypedDict, total=False):
    group: str
    user: str
    note: str
    seen: list[str]


async def remember(state: Notes) -> dict:
    store, writer = get_store(), get_stream_writer()
    ns = ("notes", state["group"], state["user"])
    writer({"saving": state["note"]})
    await store.aput(ns, "last", {"text": state["note"]})
    item = await store.aget(ns, "last")
    writer({"saved": item.value if item else None})
    found = await store.asearch(("notes", state["group"]))
    return {"seen": sorted(i.value["text"] for i in found)}


notes = StateGraph(Notes).add_node("remember", remember).add_edge(START, "remember").add_edge("remember", END).compile()
