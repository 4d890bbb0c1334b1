"""A chat turn whose model streams its answer token by token: LangChain's
GenericFakeChatModel stands in for a real chat model, so the example needs
no key. Ask the run for stream_mode "messages-tuple" to get the tokens."""

from __future__ import annotations

from typing import Annotated, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def model():
    # Each call answers with the next message; split on spaces, it streams
    # one token per word.
    return GenericFakeChatModel(messages=iter([AIMessage(content="fencing keeps a paused worker's late writes out")] * 1000))


_model = model()


async def respond(state: State) -> dict:
    reply = await _model.ainvoke(state["messages"])
    return {"messages": [reply]}


builder = StateGraph(State)
builder.add_node("respond", respond)
builder.add_edge(START, "respond")
builder.add_edge("respond", END)
graph = builder.compile()
