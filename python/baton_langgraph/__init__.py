"""baton for LangGraph (Python): a checkpointer fenced by baton's leases,
run_node for agent nodes, and a client of baton's HTTP API.

    from baton_langgraph import BatonSaver, run_node

    graph = builder.compile(checkpointer=BatonSaver.from_env())
    run_node(graph)
"""

from .errors import (
    EXIT_LEASE_LOST,
    BatonError,
    BatonFencedError,
    BatonLeaseLostError,
    LeaseLostError,
    is_fenced,
)
from .keys import Keys, shard_of
from .lease import Lease, lease_from_env, parse_token
from .node import RESUME_ENV, RESUME_KEY, RUN_KEY, arun_node, progress, run_node, wait_request
from .saver import BatonSaver
from .store import BatonStore

__all__ = [
    "EXIT_LEASE_LOST",
    "RESUME_ENV",
    "RESUME_KEY",
    "RUN_KEY",
    "BatonError",
    "BatonFencedError",
    "BatonLeaseLostError",
    "BatonSaver",
    "BatonStore",
    "Keys",
    "Lease",
    "LeaseLostError",
    "arun_node",
    "is_fenced",
    "lease_from_env",
    "parse_token",
    "progress",
    "run_node",
    "shard_of",
    "wait_request",
]
