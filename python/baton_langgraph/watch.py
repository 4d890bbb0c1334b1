"""The claim watcher: how an exec child learns, without writing, that its
claim is gone.

An exec child is a separate process: pausing its runner (SIGSTOP, a long GC,
a partition) does not pause it, and its runner stops renewing the lease. The
watcher reads the node's hash and Redis's clock about once per heartbeat
interval and reports the claim lost when the node's epoch or claim id moved
on, the node is no longer RUNNING, its run was cancelled, or its lease
deadline passed on Redis's clock: the same check as the LangGraph.js saver's
(js/src/watch.js). When Redis cannot be read it trusts the last deadline it saw, measured
on the local monotonic clock from when that read started, and no longer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .errors import LeaseLostError
from .keys import Keys
from .lease import Lease

MIN_INTERVAL = 0.05
MAX_INTERVAL = 10.0


class ClaimWatcher:
    """Watches one claim from a daemon thread; calls on_lost(err) once."""

    def __init__(self, client: Any, keys: Keys, lease: Lease, on_lost: Callable[[BaseException], None], *,
                 interval: float | None = None) -> None:
        self._client = client
        self._node_key = keys.node(lease.thread, lease.run, lease.node)
        self._run_key = keys.run(lease.thread, lease.run)
        self._lease = lease
        self._on_lost = on_lost
        self._fixed = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"baton-watch-{lease.node}@{lease.epoch}", daemon=True)
        self.checks = 0
        """How many reads succeeded (for tests and logs)."""
        self.last_error: Exception | None = None
        """The last read that failed, if any."""

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def check(self) -> tuple[LeaseLostError | None, float, float]:
        """One read, one round trip (a MULTI of HMGET node, HGET run cancel,
        TIME): (why the claim is gone or None, seconds until the lease's
        deadline, the lease's length as the runner renews it)."""
        pipe = self._client.pipeline(transaction=True)
        pipe.hmget(self._node_key, "state", "epoch", "claim", "lease_until", "heartbeat_at", "started_at")
        pipe.hget(self._run_key, "cancel")
        pipe.time()
        (state, epoch, claim, until, beat, started), cancel, (sec, usec) = pipe.execute()
        now = int(sec) * 1000 + int(usec) // 1000
        lease = self._lease
        who = f"{lease.run}/{lease.node}@{lease.epoch}"

        def lost(reason: str, what: str, code: int) -> tuple[LeaseLostError, float, float]:
            return LeaseLostError(f"baton: lease {who} lost: {what}", reason=reason, code=code, op="watch"), 0.0, 0.0

        if state is None:
            return lost("node_missing", "the node is gone (the run expired or was deleted)", -1)
        if epoch != str(lease.epoch) or claim != lease.claim:
            return lost("claimed_again", f"the node was claimed again (epoch {epoch}): another worker took it over", -10)
        if state != "RUNNING":
            return lost("not_running", f"the node is {state}, no longer RUNNING under this claim", -12)
        if cancel == "1":
            return lost("cancelled", "the run was cancelled", -12)
        until_ms = int(until or 0)
        if not until_ms > now:
            return lost("lease_expired",
                        f"its lease ran out {now - until_ms} ms ago on Redis's clock: the runner stopped renewing it", -10)
        since = max(int(beat or 0), int(started or 0))
        ttl = (until_ms - since) / 1000 if 0 < since < until_ms else (until_ms - now) / 1000
        return None, (until_ms - now) / 1000, ttl

    def _interval(self, ttl: float) -> float:
        if self._fixed is not None:
            return self._fixed
        return min(MAX_INTERVAL, max(MIN_INTERVAL, ttl / 3))

    def _loop(self) -> None:
        deadline = None  # local monotonic time the last seen lease runs out
        interval = self._fixed if self._fixed is not None else MIN_INTERVAL
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                err, left, ttl = self.check()
            except Exception as e:  # Redis unreachable: trust the last deadline, no longer
                if deadline is not None and time.monotonic() >= deadline:
                    self._lost(LeaseLostError(
                        f"baton: lease {self._lease.run}/{self._lease.node}@{self._lease.epoch} lost: unconfirmed: "
                        f"Redis cannot be read ({e}) and the lease it last confirmed has run out",
                        reason="unconfirmed", op="watch"))
                    return
                # Not printed: a paused runner reads no pipe, and a full one
                # must never block the watcher.
                self.last_error = e
            else:
                self.checks += 1
                if err is not None:
                    self._lost(err)
                    return
                deadline = started + left
                interval = self._interval(ttl)
            wait = interval
            if deadline is not None:
                # Wake no later than the deadline, so an unrenewed lease is seen at once.
                wait = max(0.0, min(interval, deadline - time.monotonic() + 0.01))
            self._stop.wait(wait)

    def _lost(self, err: BaseException) -> None:
        if not self._stop.is_set():
            self._on_lost(err)
