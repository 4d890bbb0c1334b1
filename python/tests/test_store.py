"""BatonStore, LangGraph's BaseStore on baton's Redis: each operation, sync
and async, held against LangGraph's own InMemoryStore where they agree."""

from __future__ import annotations

import random
import time

import pytest
import redis
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp
from langgraph.store.memory import InMemoryStore

from baton_langgraph.errors import BatonError
from baton_langgraph.store import BatonStore


@pytest.fixture
def store(redis_url, prefix):
    return BatonStore(redis_url, prefix=prefix)


def keys(items) -> list[str]:
    return [f"{'/'.join(i.namespace)}:{i.key}" for i in items]


def test_put_get_update_delete(store):
    ns = ("users", "u1")
    store.put(ns, "prefs", {"theme": "dark"})
    it = store.get(ns, "prefs")
    assert it is not None and it.value == {"theme": "dark"} and it.namespace == ns and it.key == "prefs"
    store.put(ns, "prefs", {"theme": "light"})
    again = store.get(ns, "prefs")
    assert again.value == {"theme": "light"}
    assert again.created_at == it.created_at, "an update keeps the creation time"
    assert again.updated_at >= it.updated_at
    assert store.get(ns, "nope") is None
    store.delete(ns, "prefs")
    store.delete(ns, "prefs")  # a retry deletes once
    assert store.get(ns, "prefs") is None
    assert store.list_namespaces() == [], "an emptied namespace is not listed"


def test_search_and_list_agree_with_in_memory_store(store):
    """A seeded mix of items; every filter, prefix and listing asked of both
    stores gives the same items (searched as sets: the order differs)."""
    mem = InMemoryStore()
    rnd = random.Random(7)
    spaces = [("docs",), ("docs", "a"), ("docs", "b"), ("docs", "b", "deep"), ("docsx",), ("users", "u1")]
    for i in range(60):
        ns = rnd.choice(spaces)
        value = {"type": rnd.choice(["report", "note"]), "score": rnd.randint(0, 9),
                 "tags": rnd.choice([["x"], ["x", "y"]]), "meta": {"lang": rnd.choice(["en", "fr"])}}
        for s in (store, mem):
            s.put(ns, f"k{i % 25}", value)
    filters = [None, {"type": "report"}, {"score": {"$gt": 4}}, {"score": {"$gte": 2, "$lt": 7}},
               {"type": {"$ne": "note"}}, {"tags": ["x", "y"]}, {"meta": {"lang": "fr"}}, {"score": 3}]
    for prefix in [(), ("docs",), ("docs", "b"), ("users",), ("none",)]:
        for f in filters:
            got = store.search(prefix, filter=f, limit=1000)
            want = mem.search(prefix, filter=f, limit=1000)
            assert sorted(keys(got)) == sorted(keys(want)), (prefix, f)
            assert {k: i.value for k, i in zip(keys(got), got)} == {k: i.value for k, i in zip(keys(want), want)}
    for kw in [{}, {"prefix": ("docs",)}, {"suffix": ("b",)}, {"prefix": ("*", "b")}, {"max_depth": 1},
               {"max_depth": 2, "offset": 1, "limit": 2}, {"prefix": ("docs",), "suffix": ("deep",)}]:
        assert store.list_namespaces(**kw) == mem.list_namespaces(**kw), kw


def test_search_pages_in_namespace_then_key_order(store):
    for ns, k in [(("a", "y"), "2"), (("a", "y"), "1"), (("a",), "z"), (("b",), "0")]:
        store.put(ns, k, {"v": 1})
    assert keys(store.search(())) == ["a:z", "a/y:1", "a/y:2", "b:0"]
    assert keys(store.search((), offset=1, limit=2)) == ["a/y:1", "a/y:2"]


def test_ttl_expires_and_a_read_refreshes_it(store, rdb):
    ns = ("mem",)
    store.put(ns, "short", {"v": 1}, ttl=0.002)  # minutes: 120 ms
    store.put(ns, "kept", {"v": 1}, ttl=0.002)
    store.put(ns, "forever", {"v": 1})

    def redis_ms() -> int:
        s, us = rdb.time()
        return s * 1000 + us // 1000

    def until(ms: int) -> None:  # Redis's clock decides expiry: wait on it
        while redis_ms() < ms:
            time.sleep(0.005)

    start = redis_ms()
    until(start + 70)
    assert store.get(ns, "kept") is not None  # refreshes its ttl
    until(start + 140)
    assert store.get(ns, "short") is None
    assert store.get(ns, "kept", refresh_ttl=False) is not None
    assert keys(store.search(ns)) == ["mem:forever", "mem:kept"]


async def test_async_twins(store):
    ns = ("a", "b")
    await store.aput(ns, "k", {"n": 1})
    assert (await store.aget(ns, "k")).value == {"n": 1}
    assert keys(await store.asearch(("a",), filter={"n": 1})) == ["a/b:k"]
    assert await store.alist_namespaces(prefix=("a",)) == [ns]
    await store.adelete(ns, "k")
    assert await store.aget(ns, "k") is None


def test_a_batch_writes_first_then_reads(store):
    res = store.batch([GetOp(("n",), "k"), PutOp(("n",), "k", {"v": 1}), PutOp(("n",), "k", {"v": 2})])
    assert res[0].value == {"v": 2} and res[1:] == [None, None]


def test_a_put_cut_after_its_index_step_is_invisible(store, rdb, prefix):
    rdb.zadd(f"{prefix}:store:{{index}}:ns", {"half.done": 0})
    assert store.list_namespaces() == []
    assert store.search(()) == []
    store.put(("half", "done"), "k", {"v": 1})
    assert store.list_namespaces() == [("half", "done")]


def test_the_go_store_reads_what_python_wrote(store, rdb, prefix):
    """The layout of fence/store_items.go: one hash per namespace, its tag the namespace."""
    store.put(("users", "u1"), "prefs", {"theme": "dark"}, ttl=5)
    raw = rdb.hget(f"{prefix}:store:{{n:users.u1}}:items", "prefs")
    c, u, ttl, exp, value = raw.split(" ", 4)
    assert int(c) == int(u) and ttl == "300000" and int(exp) == int(u) + 300000
    assert value == '{"theme":"dark"}'
    assert rdb.zrange(f"{prefix}:store:{{index}}:ns", 0, -1) == ["users.u1"]


def test_bad_input_is_refused_and_nothing_stored(store):
    for ns in [("a.b",), ("a", ""), (), ("langgraph",), ("x" * 300,)]:
        with pytest.raises(InvalidNamespaceError):
            store.put(ns, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("ok",), "k", {"v": 1}), PutOp(("bad.label",), "k", {"v": 1})])
    with pytest.raises(ValueError, match="Unsupported operator"):
        store.search((), filter={"a": {"$in": [1]}})
    with pytest.raises(ValueError, match="NaN|not JSON compliant|Out of range"):
        store.put(("a",), "k", {"v": float("nan")})
    assert store.list_namespaces() == []
    with pytest.raises(BatonError, match="no vector index"):
        BatonStore(redis.Redis(), index={"dims": 3, "embed": lambda xs: [[0, 0, 0] for _ in xs]})
