"""The lease a BatonSaver writes under: one claim of one node, as the exec
kind hands it to its command in the environment."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import BatonError
from .ids import validate_id


@dataclass(frozen=True)
class Lease:
    """One claim of one node. Every write carries epoch and claim."""

    thread: str
    """The node's thread (BATON_THREAD_ID): the only thread the saver writes to."""
    run: str
    """The run (BATON_RUN_ID)."""
    node: str
    """The node (BATON_NODE_ID)."""
    epoch: int
    """The fencing epoch of the claim (BATON_EPOCH)."""
    claim: str
    """The claim id, from the fencing token."""
    worker: str
    """The lease's owner (BATON_WORKER_ID), recorded by the scripts."""
    incarnation: str = ""
    """The run's submission, from the token ("" for runs stored before incarnations)."""

    def __post_init__(self) -> None:
        validate_id("lease thread", self.thread)
        validate_id("lease run", self.run)
        validate_id("lease node", self.node)
        validate_id("lease claim id", self.claim)
        if isinstance(self.epoch, bool) or not isinstance(self.epoch, int) or self.epoch < 1:
            raise BatonError(f"baton: lease epoch {self.epoch!r}: want a positive integer")
        if not isinstance(self.worker, str) or self.worker == "":
            raise BatonError("baton: lease worker: empty")

    @classmethod
    def from_dict(cls, d: Mapping[str, object]) -> Lease:
        """A lease from batonctl's JSON (thread, run, node, epoch, claim, worker, incarnation)."""
        return cls(
            thread=d["thread"], run=d["run"], node=d["node"], epoch=d["epoch"],  # type: ignore[arg-type]
            claim=d["claim"], worker=d["worker"], incarnation=d.get("incarnation") or "",  # type: ignore[arg-type]
        )


_EPOCH_RE = re.compile(r"[0-9]+")


def parse_token(token: object) -> dict[str, object]:
    """Parses a fencing token, "run~incarnation/node@epoch/claim", as
    fence.ParseToken does; returns run, incarnation, node, epoch and claim."""
    if not isinstance(token, str):
        raise BatonError("baton: fencing token missing")
    res, at, rest = token.partition("@")
    if not at:
        raise BatonError(f"baton: token {token!r}: missing @epoch")
    run, slash, node = res.partition("/")
    if not slash:
        raise BatonError(f"baton: token {token!r}: resource is not run~incarnation/node")
    incarnation = ""
    if "~" in run:
        run, _, incarnation = run.partition("~")
        validate_id("token incarnation", incarnation)
    ep, slash2, claim = rest.partition("/")
    if not slash2 or claim == "":
        raise BatonError(f"baton: token {token!r}: missing /claim")
    if not _EPOCH_RE.fullmatch(ep) or int(ep) < 1 or int(ep) > 2**53 - 1:
        raise BatonError(f"baton: token {token!r}: epoch {ep!r} is not a positive integer")
    validate_id("token run", run)
    validate_id("token node", node)
    validate_id("token claim id", claim)
    return {"run": run, "incarnation": incarnation, "node": node, "epoch": int(ep), "claim": claim}


def lease_from_env(env: Mapping[str, str] | None = None) -> Lease:
    """The lease of the exec node this process runs as: BATON_FENCING_TOKEN
    (run, incarnation, node, epoch, claim), BATON_THREAD_ID and
    BATON_WORKER_ID; BATON_RUN_ID, BATON_NODE_ID and BATON_EPOCH must agree
    with the token."""
    env = os.environ if env is None else env

    def need(name: str) -> str:
        v = env.get(name)
        if not v:
            raise BatonError(f"baton: {name} is not set: BatonSaver.from_env() runs inside a baton exec node")
        return v

    t = parse_token(need("BATON_FENCING_TOKEN"))
    lease = Lease(
        thread=validate_id("BATON_THREAD_ID", need("BATON_THREAD_ID")),
        run=t["run"], node=t["node"], epoch=t["epoch"], claim=t["claim"],  # type: ignore[arg-type]
        worker=need("BATON_WORKER_ID"), incarnation=t["incarnation"],  # type: ignore[arg-type]
    )
    for name, want in (("BATON_RUN_ID", lease.run), ("BATON_NODE_ID", lease.node), ("BATON_EPOCH", str(lease.epoch))):
        if env.get(name) is not None and env.get(name) != want:
            raise BatonError(f"baton: {name}={env.get(name)} disagrees with BATON_FENCING_TOKEN ({want})")
    return lease
