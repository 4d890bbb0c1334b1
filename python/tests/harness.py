"""Test harness: a real redis-server on a free port, and batonctl (built from
this repository: js/internal/batonctl) to submit runs and
claim their nodes through baton's Go code, so every lease a test writes with
is a live claim the real scripts know."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx
import redis

from baton_langgraph import Lease

PACKAGE_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = PACKAGE_DIR.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A redis-server of the test session's own, stopped by its pid."""

    def __init__(self) -> None:
        exe = os.environ.get("REDIS_SERVER", "redis-server")
        if shutil.which(exe) is None:
            raise RuntimeError(f"the tests start their own redis-server, and {exe} is not installed "
                               "(apt-get install redis-server)")
        self.port = free_port()
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )
        self.url = f"redis://127.0.0.1:{self.port}/0"
        probe = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                probe.ping()
                break
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.05)  # polling a starting server: no event to wait on
            finally:
                probe.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def go_build(pkg: str, out_dir: str, name: str) -> str:
    """Builds a Go package of this repository into out_dir; returns the binary."""
    go = os.environ.get("GO", "go")
    if shutil.which(go) is None:
        raise RuntimeError(f"the tests build baton's Go binaries from {REPO_ROOT}, and {go} is not on PATH")
    out = os.path.join(out_dir, name)
    subprocess.run([go, "build", "-o", out, pkg], cwd=REPO_ROOT, check=True)
    return out


class Batonctl:
    """A running batonctl: one JSON request per line, answered in order."""

    def __init__(self, binary: str, redis_url: str) -> None:
        self.proc = subprocess.Popen([binary], env={**os.environ, "REDIS_URL": redis_url}, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.lock = threading.Lock()

    def request(self, req: dict) -> dict:
        with self.lock:
            assert self.proc.stdin and self.proc.stdout
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"batonctl exited ({self.proc.poll()})")
        a = json.loads(line)
        if a.get("error"):
            raise RuntimeError(f"batonctl: {a['error']}")
        return a["lease"]

    def claim(self, prefix: str, thread: str, worker: str = "pytest", ttl_ms: int = 600_000) -> dict:
        """Submits a one-node run on thread (which must be idle) and claims its node."""
        return self.request({"op": "claim", "prefix": prefix, "thread": thread, "worker": worker, "ttl_ms": ttl_ms})

    def takeover(self, prefix: str, lease: dict, worker: str, ttl_ms: int = 600_000) -> dict:
        """Claims lease's node again once its lease ran out (epoch+1)."""
        return self.request({"op": "takeover", "prefix": prefix, "lease": lease, "worker": worker, "ttl_ms": ttl_ms})

    def heartbeat(self, prefix: str, lease: dict, ttl_ms: int) -> dict:
        return self.request({"op": "heartbeat", "prefix": prefix, "lease": lease, "ttl_ms": ttl_ms})

    def cancel(self, prefix: str, lease: dict) -> dict:
        return self.request({"op": "cancel", "prefix": prefix, "lease": lease})

    def commit(self, prefix: str, lease: dict) -> dict:
        return self.request({"op": "commit", "prefix": prefix, "lease": lease})

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)


class LeaseBook:
    """Leases for whatever threads a test writes to: the first write to a
    thread submits a one-node run on it and claims the node (a live claim
    with a long lease); later writes reuse it. This is how the conformance
    suite, which writes to many thread ids, writes fenced everywhere."""

    def __init__(self, ctl: Batonctl, prefix: str, worker: str = "pytest") -> None:
        self.ctl, self.prefix, self.worker = ctl, prefix, worker
        self.leases: dict[str, Lease] = {}

    def lease(self, thread: str) -> Lease:
        if thread not in self.leases:
            self.leases[thread] = Lease.from_dict(self.ctl.claim(self.prefix, thread, self.worker))
        return self.leases[thread]


def drop_prefix(client: redis.Redis, prefix: str) -> None:
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    if keys:
        client.delete(*keys)


def exec_env(redis_url: str, prefix: str, lease: dict) -> dict[str, str]:
    """The environment the exec kind gives a command for this lease."""
    return {
        "BATON_REDIS_URL": redis_url,
        "BATON_PREFIX": prefix,
        "BATON_FENCING_TOKEN": lease["token"],
        "BATON_THREAD_ID": lease["thread"],
        "BATON_WORKER_ID": lease["worker"],
        "BATON_RUN_ID": lease["run"],
        "BATON_NODE_ID": lease["node"],
        "BATON_EPOCH": str(lease["epoch"]),
        "BATON_ATTEMPT": str(lease.get("attempt", 1)),
    }


def tmpdir() -> str:
    return tempfile.mkdtemp(prefix="baton-py-")


class Runner:
    """One real runner process (cmd/runner) on the test's redis-server."""

    def __init__(self, binary: str, redis_url: str, prefix: str, runner_id: str, *, log_dir: str,
                 **env: str) -> None:
        self.id = runner_id
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        full = {**os.environ, "REDIS_URL": redis_url, "BATON_PREFIX": prefix, "RUNNER_ID": runner_id,
                "ADMIN_ADDR": f"127.0.0.1:{port}", "LOG_LEVEL": "warn", **env}
        self.log = open(os.path.join(log_dir, f"runner-{runner_id}.log"), "w")
        self.proc = subprocess.Popen([binary], env=full, stdout=self.log, stderr=subprocess.STDOUT)
        # A runner with LANGGRAPH_CONFIG imports every graph before it
        # listens: LangGraph (about a second) or tsx compiling TypeScript,
        # much longer on a loaded machine.
        deadline = time.monotonic() + 90
        while True:  # polling a starting server: no event to wait on
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    break
            except Exception:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"runner {runner_id} did not start; see {self.log.name}")
            time.sleep(0.05)

    def pause(self) -> None:
        os.kill(self.proc.pid, 19)  # SIGSTOP

    def resume(self) -> None:
        os.kill(self.proc.pid, 18)  # SIGCONT

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.resume()
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def exited(pid: int) -> bool:
    """Whether process pid has ended (a zombie its stopped parent has not reaped counts)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return True
    return stat[stat.rindex(")") + 2] in "ZX"


def wait_until(cond, timeout: float, what: str, every: float = 0.02):
    """Waits for a condition no event announces (a file's line, a process's
    end); returns its first truthy value."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)
