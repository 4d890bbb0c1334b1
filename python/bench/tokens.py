"""A one-node chat graph whose fake streaming model stamps each token with
the wall clock at the moment it yields it, so a client reading the run's
"messages" stream measures token latency: the model yielding a chunk to the
SSE client receiving it. Tokens come GAP seconds apart, as a model's do
(a burst would measure the stream's throughput instead). agent_turns.py serves it beside the two-node agent
on every server it measures; it imports nothing of baton."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any, AsyncIterator, Iterator, TypedDict

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, AnyMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

TOKENS = 20
GAP = 0.01


class StampModel(BaseChatModel):
    """Streams TOKENS chunks, each "<time.time()> "."""

    @property
    def _llm_type(self) -> str:
        return "stamp"

    def _generate(self, messages: list, stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=f"{time.time():.6f} " * TOKENS))])

    def _stream(self, messages: list, stop: Any = None, run_manager: Any = None,
                **kw: Any) -> Iterator[ChatGenerationChunk]:
        for _ in range(TOKENS):
            yield ChatGenerationChunk(message=AIMessageChunk(content=f"{time.time():.6f} "))
            time.sleep(GAP)

    async def _astream(self, messages: list, stop: Any = None, run_manager: Any = None,
                       **kw: Any) -> AsyncIterator[ChatGenerationChunk]:
        for _ in range(TOKENS):
            yield ChatGenerationChunk(message=AIMessageChunk(content=f"{time.time():.6f} "))
            await asyncio.sleep(GAP)


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


_model = StampModel()


async def respond(state: State) -> dict:
    return {"messages": [await _model.ainvoke(state["messages"])]}


builder = StateGraph(State)
builder.add_node("respond", respond)
builder.add_edge(START, "respond")
builder.add_edge("respond", END)
graph = builder.compile()
