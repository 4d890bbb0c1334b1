"""The same langgraph-sdk calls against any Agent Server API (LangGraph's
`langgraph dev`, or baton's on AGENT_API_ADDR): runs.wait on a new thread,
the first "updates" event of runs.stream, token latency of a "messages"
stream, and turns/s with 16 clients at once."""

from __future__ import annotations

import asyncio
import time
from typing import Callable

from langgraph_sdk import get_client

INPUT = {"topic": "fencing"}


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


async def _wait_turn(client, graph: str = "agent") -> float:
    th = await client.threads.create()
    t0 = time.perf_counter()
    out = await client.runs.wait(th["thread_id"], graph, input=INPUT)
    took = (time.perf_counter() - t0) * 1000
    if not str((out or {}).get("answer", "")).endswith("fencing in 2 steps"):
        raise RuntimeError(f"runs.wait answered {out!r}")
    return took


async def _first_update(client) -> float:
    th = await client.threads.create()
    t0 = time.perf_counter()
    first = None
    async for part in client.runs.stream(th["thread_id"], "agent", input=INPUT, stream_mode="updates"):
        if part.event == "updates" and first is None:
            first = (time.perf_counter() - t0) * 1000
        if part.event == "error":
            raise RuntimeError(f"runs.stream: {part.data!r}")
    if first is None:
        raise RuntimeError("runs.stream ended with no updates event")
    return first


async def _tokens(client) -> list[float]:
    """Token latency of one run: now minus the stamp the model put in."""
    th = await client.threads.create()
    lat = []
    async for part in client.runs.stream(th["thread_id"], "tokens", input={"messages": [{"role": "user", "content": "hi"}]},
                                         stream_mode="messages-tuple"):
        now = time.time()
        if part.event == "messages":
            msg = part.data[0] if isinstance(part.data, list) else part.data
            for stamp in str(msg.get("content", "")).split():
                lat.append((now - float(stamp)) * 1000)
    return lat


async def _clients(client, clients: int, turns: int) -> float:
    left = [turns]

    async def one() -> None:
        while left[0] > 0:
            left[0] -= 1
            await _wait_turn(client)
    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(clients)))
    return turns / (time.perf_counter() - t0)


async def _measure(url: str, n: int, clients: int, turns: int, between: Callable[[str], None]) -> dict:
    client = get_client(url=url, api_key=None)
    for _ in range(3):  # warm up: the first turns load the graph and open connections
        await _wait_turn(client)
    await _first_update(client)
    out: dict = {}
    w = [await _wait_turn(client) for _ in range(n)]
    out["wait_p50"], out["wait_p99"] = pct(w, 0.5), pct(w, 0.99)
    f = [await _first_update(client) for _ in range(n)]
    out["first_p50"], out["first_p99"] = pct(f, 0.5), pct(f, 0.99)
    tok: list[float] = []
    for _ in range(max(3, n // 5)):
        tok.extend(await _tokens(client))
    if tok:
        out["token_p50"], out["token_p99"] = pct(tok, 0.5), pct(tok, 0.99)
    between("start")
    out["turns_s"] = await _clients(client, clients, turns)
    between("end")
    return out


def measure(url: str, n: int, clients: int = 16, turns: int = 160,
            between: Callable[[str], None] = lambda _: None) -> dict:
    """p50/p99 of runs.wait and of the first updates event over n turns each,
    token latency p50/p99, and turns/s of `turns` runs.wait turns shared by
    `clients` clients; between("start"/"end") brackets the concurrent part
    (the caller reads CPU and Redis counters there)."""
    return asyncio.run(_measure(url, n, clients, turns, between))
