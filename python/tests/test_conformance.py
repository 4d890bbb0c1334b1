"""LangGraph's own conformance suite for checkpointers
(langgraph-checkpoint-conformance's validate()), run against BatonSaver on a
real redis-server, next to InMemorySaver on the same machine. Every write is
fenced by a live claim: each checkpointer the suite creates gets its own key
prefix, and the first write to any thread_id submits a one-node run on that
thread and claims it through baton's Go code (LeaseBook)."""

from __future__ import annotations

import itertools

import redis.asyncio as aioredis
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES
from langgraph.checkpoint.memory import InMemorySaver

from baton_langgraph import BatonSaver
from harness import LeaseBook, drop_prefix

_n = itertools.count(1)


def counts(report) -> dict[str, tuple[int, int, int]]:
    return {k: (r.tests_passed, r.tests_failed, r.tests_skipped) for k, r in report.results.items()}


def failures(report) -> list:
    return [f for r in report.results.values() for f in (r.failures or [])]


async def test_baton_saver_passes_every_base_capability_as_in_memory_saver_does(ctl, rdb, redis_url):
    made = []

    @checkpointer_test(name="BatonSaver")
    async def baton():
        book = LeaseBook(ctl, f"lgv{next(_n)}")
        aredis = aioredis.Redis.from_url(redis_url, decode_responses=True)
        saver = BatonSaver(redis=redis_url, aredis=aredis, prefix=book.prefix, lease_for=book.lease)
        made.append(book.prefix)
        yield saver
        await saver.aclose()
        await aredis.aclose()
        drop_prefix(rdb, book.prefix)

    @checkpointer_test(name="InMemorySaver")
    async def memory():
        yield InMemorySaver()

    ours = await validate(baton)
    theirs = await validate(memory)
    print("conformance BatonSaver:", counts(ours))
    print("conformance InMemorySaver:", counts(theirs))
    assert failures(ours) == []
    assert ours.passed_all_base()
    for cap in BASE_CAPABILITIES:
        assert counts(ours)[cap.value] == counts(theirs)[cap.value], cap
    assert made, "the suite created no BatonSaver"
