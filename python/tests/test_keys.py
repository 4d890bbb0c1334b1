"""The vectors are fence.Keys's (Go) for the same ids, the same the JS saver's
tests pin: the saver must name exactly the keys the runner's scripts use."""

from baton_langgraph import Keys, shard_of
from baton_langgraph.errors import BatonError
from baton_langgraph.lease import parse_token

import pytest


def test_builds_the_keys_fence_keys_go_builds():
    k = Keys()
    assert k.node("t1", "r", "n") == "baton:{s6.40}:t1:node:r:n"
    assert k.checkpoints("chat-7") == "baton:{s15.42}:chat-7:cp"
    assert (k.node("1f1ed51e-d2f7-6400-8003-675ff14c6c5d", "r", "n")
            == "baton:{s13.1}:1f1ed51e-d2f7-6400-8003-675ff14c6c5d:node:r:n")
    assert k.checkpoints("a") == "baton:{s12.2}:a:cp"
    assert Keys("p").checkpoint_ns("x", "ns") == ("p:{s7.43}:x:cpv:ns", "p:{s7.43}:x:cpd:ns",
                                                   "p:{s7.43}:x:cpi:ns", "p:{s7.43}:x:cpw:ns")
    assert [shard_of("t1"), shard_of("chat-7"), shard_of("a")] == [6, 15, 12]


def test_parses_a_thread_back_from_its_namespace_hash_only():
    k = Keys()
    assert k.thread_of(k.checkpoints("chat-7")) == "chat-7"
    assert k.thread_of(k.checkpoint_ns("chat-7", "cp")[0]) is None  # a namespace named "cp"
    assert k.thread_of("baton:{s0.1}:chat-7:cp") is None  # another shard's tag
    assert k.thread_of("other:{s15.42}:chat-7:cp") is None


def test_parses_fencing_tokens_as_fence_parse_token_does():
    assert parse_token("r1~ab12/n@3/c0ffee") == {"run": "r1", "incarnation": "ab12", "node": "n", "epoch": 3,
                                                "claim": "c0ffee"}
    assert parse_token("r1/n@1/c") == {"run": "r1", "incarnation": "", "node": "n", "epoch": 1, "claim": "c"}
    for bad in ["r1/n", "r1/n@0/c", "r1/n@x/c", "r1/n@2/", "r1@2/c", "r{1}/n@2/c"]:
        with pytest.raises(BatonError):
            parse_token(bad)
