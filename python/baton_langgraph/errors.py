"""Errors the saver, run_node and the client raise.

A refusal by the store is final: retrying the same write with the same lease
gets the same answer. Match ``BatonFencedError`` to learn that this process no
longer owns its node; ``LeaseLostError`` (a subclass) is what every call raises
once the saver knows it lost its claim, whether a write was refused or the
watcher saw the claim go.
"""

from __future__ import annotations

EXIT_LEASE_LOST = 75
"""The exit code of a process that stopped because it lost its claim.

EX_TEMPFAIL from sysexits.h: the attempt was lost, not the node failed; the
exec kind records it as a lost attempt (shared with the LangGraph.js saver).
"""

CODES: dict[int, str] = {
    -1: "node missing: the run expired or never existed",
    -10: "stale epoch: the node was claimed again since this lease",
    -11: "not owner: the same epoch was handed to another claim",
    -12: "node not running: this claim's node was released or has finished",
    -14: "the run is not its thread's active run",
    -15: "too large",
    -16: "no checkpoint with that id in the namespace",
    -21: "the thread's active run has not finished",
    -23: "the thread's active run or namespaces changed while deleting",
}

# Codes that mean the lease is no longer the node's current claim.
FENCED = frozenset({-10, -11, -12, -14})


class BatonError(Exception):
    """Any refusal by baton's store, or bad input caught before a call.

    ``code`` is the script's code (e.g. -10), or None for a check made
    before any call; ``op`` is the operation (checkpoint,
    checkpoint_writes, checkpoint_delete, or the client's call).
    """

    def __init__(self, message: str, *, code: int | None = None, op: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.op = op


class BatonFencedError(BatonError):
    """The store refused a write: the lease it carries is not the node's
    current claim (another worker took the node over, or the run is no
    longer its thread's active run). Nothing was written, and the refusal is
    in the run's events as ``stale_rejected``. The attempt must stop."""


class LeaseLostError(BatonFencedError):
    """This saver lost its claim: a write was refused, or the watcher saw the
    node's epoch, claim id or lease deadline (on Redis's clock) move on, or
    the run cancelled. Every call after that raises it; ``__cause__`` holds
    the first reason. ``reason`` is one of node_missing, claimed_again,
    not_running, cancelled, lease_expired, unconfirmed (the watcher's, as the
    LangGraph.js saver's) or refused (a write was)."""

    def __init__(self, message: str, *, reason: str = "refused", code: int | None = None,
                 op: str | None = None) -> None:
        super().__init__(message, code=code, op=op)
        self.reason = reason


BatonLeaseLostError = LeaseLostError
"""The LangGraph.js saver's name for the same error."""


def code_error(op: str, code: int, lease: object | None = None) -> BatonError:
    """The error for a script's negative code."""
    what = CODES.get(code, f"unknown code {code}")
    who = ""
    if lease is not None:
        who = f" (lease {lease.run}/{lease.node}@{lease.epoch} on thread {lease.thread})"  # type: ignore[attr-defined]
    cls = BatonFencedError if code in FENCED else BatonError
    return cls(f"baton: {op} refused: {what}{who}", code=code, op=op)


def is_fenced(err: BaseException | None) -> bool:
    """Whether err, or an error it was raised from, means the lease is gone."""
    seen = set()
    while err is not None and id(err) not in seen:
        if isinstance(err, BatonFencedError):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False
