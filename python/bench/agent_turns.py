"""make bench-agent: agent turns of a two-node LangGraph graph, side by side
in one run on one machine (issue 43's "Performance").

- baton, Python graph (examples/langgraph's agent) and JS graph (the JS
  fixture's agent) through the warm graph worker: submit -> node started and
  submit -> result p50/p99, turns/s with 16 clients on one runner
  (CONCURRENCY=16), Redis commands and CPU (runner + worker + redis-server)
  per turn, RSS of the idle warm worker;
- today's exec path (run_node in a new process per turn) on the same runner;
- the floor: the same graph in this process with InMemorySaver, durability
  "sync";
- langgraph dev --no-reload (python/bench/.venv, from requirements.lock) and
  baton's Agent Server API (AGENT_API_ADDR), both driven by langgraph-sdk:
  runs.wait on a new thread, first "updates" event of runs.stream, token
  latency of a fake streaming model (tokens.py), turns/s with 16 clients.

    python/.venv/bin/python python/bench/agent_turns.py [N [TURNS]]
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "tests")]

import httpx  # noqa: E402
import redis  # noqa: E402
from harness import PACKAGE_DIR, REPO_ROOT, RedisServer, Runner, free_port, go_build  # noqa: E402

import procstat  # noqa: E402
import sdkload  # noqa: E402
from baton_langgraph.client import BatonClient  # noqa: E402
from sdkload import pct  # noqa: E402

LGDEV = HERE / ".venv" / "bin" / "langgraph"
CLIENTS = 16


def ts(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


class Counters:
    """Redis commands (INFO commandstats, scripts' inner commands included)
    and CPU seconds of some process trees, between two reads."""

    def __init__(self, r: redis.Redis | None, pids: list[int]) -> None:
        self.r, self.pids = r, pids

    def read(self) -> tuple:
        calls = evals = 0
        if self.r is not None:
            for name, st in self.r.info("commandstats").items():
                if name not in ("cmdstat_info",):
                    calls += st["calls"]
                    if name.startswith("cmdstat_evalsha") or name.startswith("cmdstat_eval"):
                        evals += st["calls"]
        own, below = procstat.cpu_split(self.pids[0])
        rest = procstat.cpu_seconds(self.pids[1:])
        return calls, evals, own + below + rest, own, below, rest, time.process_time()

    def per_turn(self, a: tuple, b: tuple, turns: int) -> dict:
        """Per turn: Redis commands, script calls, CPU ms in all, and split
        (first process itself, its children such as the graph worker, the
        others such as redis-server), and the CPU of this process, the
        client, which shares the machine's cores."""
        d = [(y - x) / turns for x, y in zip(a, b)]
        return {"redis_cmds": d[0], "scripts": d[1], "cpu_ms": d[2] * 1000, "cpu_ms_own": d[3] * 1000,
                "cpu_ms_children": d[4] * 1000, "cpu_ms_others": d[5] * 1000, "cpu_ms_client": d[6] * 1000}


def native_latency(c: BatonClient, name: str, node: dict, n: int, check: str) -> dict:
    """submit -> node started (store clock) and submit -> result (client)."""
    wall, started, stored = [], [], []
    for i in range(n + 2):
        rid = f"{name}-{uuid.uuid4().hex[:12]}"
        t0 = time.perf_counter()
        c.submit({"id": rid, "thread": f"t-{rid}", "nodes": [node]})
        run = c.wait(rid)
        took = (time.perf_counter() - t0) * 1000
        if run["status"] != "SUCCEEDED" or not run["nodes"][0]["result"]["answer"].endswith(check):
            raise RuntimeError(f"{name}: {run}")
        if i >= 2:  # the first turns warm the runner up
            wall.append(took)
            started.append((ts(run["nodes"][0]["started_at"]) - ts(run["created_at"])) * 1000)
            stored.append((ts(run["finished_at"]) - ts(run["created_at"])) * 1000)
    return {"started_p50": pct(started, .5), "started_p99": pct(started, .99),
            "result_p50": pct(wall, .5), "result_p99": pct(wall, .99),
            "stored_p50": pct(stored, .5), "stored_p99": pct(stored, .99)}


def native_clients(c: BatonClient, name: str, node: dict, turns: int, ctr: Counters) -> dict:
    left = [turns]
    lock = threading.Lock()
    errors: list[str] = []

    def one() -> None:
        while True:
            with lock:
                if left[0] <= 0:
                    return
                left[0] -= 1
            rid = f"{name}c-{uuid.uuid4().hex[:12]}"
            c.submit({"id": rid, "thread": f"t-{rid}", "nodes": [node]})
            st = c.wait(rid)["status"]
            if st != "SUCCEEDED":
                errors.append(st)
    a = ctr.read()
    t0 = time.perf_counter()
    ths = [threading.Thread(target=one) for _ in range(CLIENTS)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    took = time.perf_counter() - t0
    b = ctr.read()
    if errors:
        raise RuntimeError(f"{name}: {len(errors)} turns did not succeed: {errors[:3]}")
    return {"turns_s": turns / took, **ctr.per_turn(a, b, turns)}


def idle_rss(runner: Runner) -> dict:
    """RSS of the runner and of its graph worker(s), idle and warm."""
    time.sleep(1)  # let the last turn's buffers settle; nothing to wait on
    kids = [p for p in procstat.descendants(runner.proc.pid) if p != runner.proc.pid]
    return {"rss_runner": procstat.rss_mib(runner.proc.pid), "rss_worker": sum(procstat.rss_mib(p) for p in kids)}


def sdk(url: str, n: int, turns: int, ctr: Counters) -> dict:
    marks: dict[str, tuple] = {}
    out = sdkload.measure(url, n, CLIENTS, turns, lambda m: marks.__setitem__(m, ctr.read()))
    out.update(ctr.per_turn(marks["start"], marks["end"], turns))
    return out


def floor(n: int, turns: int) -> dict:
    """The graph in this process, InMemorySaver, durability="sync"."""
    sys.path.insert(0, str(REPO_ROOT / "examples" / "langgraph"))
    from agent import graph  # noqa: PLC0415
    from langgraph.checkpoint.memory import InMemorySaver  # noqa: PLC0415
    g = graph.copy(update={"checkpointer": InMemorySaver()})

    async def turn() -> float:
        t0 = time.perf_counter()
        out = await g.ainvoke({"topic": "fencing"}, {"configurable": {"thread_id": uuid.uuid4().hex}}, durability="sync")
        assert out["answer"].endswith("fencing in 2 steps"), out
        return (time.perf_counter() - t0) * 1000

    async def go() -> dict:
        for _ in range(3):
            await turn()
        xs = [await turn() for _ in range(n)]
        left = [turns]

        async def one() -> None:
            while left[0] > 0:
                left[0] -= 1
                await turn()
        ctr = Counters(None, [os.getpid()])
        a = ctr.read()
        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(CLIENTS)))
        took = time.perf_counter() - t0
        b = ctr.read()
        return {"result_p50": pct(xs, .5), "result_p99": pct(xs, .99), "turns_s": turns / took, **ctr.per_turn(a, b, turns)}
    return asyncio.run(go())


def project(tmp: str) -> Path:
    """The graphs every server serves: the example's agent and tokens.py."""
    p = Path(tmp) / "project"
    p.mkdir()
    shutil.copy(REPO_ROOT / "examples" / "langgraph" / "agent.py", p / "agent.py")
    shutil.copy(HERE / "tokens.py", p / "tokens.py")
    (p / "langgraph.json").write_text(json.dumps({"dependencies": ["."], "graphs": {
        "agent": "./agent.py:graph", "tokens": "./tokens.py:graph"}}))
    return p


def wait_ok(url: str, proc: subprocess.Popen, what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while True:  # polling a starting server: no event to wait on
        try:
            if httpx.get(url + "/ok", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.1)


def lgdev(proj: Path, tmp: str, n: int, turns: int) -> dict:
    if not LGDEV.exists():
        return {"skipped": f"{LGDEV} is missing (make bench-agent installs it from python/bench/requirements.lock)"}
    port = free_port()
    log = open(os.path.join(tmp, "langgraph-dev.log"), "w")
    env = {**os.environ, "LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false",
           "LANGGRAPH_CLI_NO_ANALYTICS": "1", "PYTHONPATH": ""}
    proc = subprocess.Popen([str(LGDEV), "dev", "--no-reload", "--no-browser", "--host", "127.0.0.1",
                             "--port", str(port), "--config", str(proj / "langgraph.json")],
                            cwd=proj, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_ok(f"http://127.0.0.1:{port}", proc, f"langgraph dev (see {log.name})")
        out = sdk(f"http://127.0.0.1:{port}", n, turns, Counters(None, [proc.pid]))
        out["rss_worker"] = sum(procstat.rss_mib(p) for p in procstat.descendants(proc.pid))
        return out
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def guarded(results: dict, key: str, fn) -> None:
    """One column of the table; a column that fails prints skipped: why."""
    only = os.environ.get("AGENT_BENCH_ONLY")
    if only and key not in only.split(","):
        results[key] = {"skipped": "not in AGENT_BENCH_ONLY"}
        return
    try:
        results[key] = fn()
    except Exception as e:  # noqa: BLE001 - the bench reports and goes on
        results[key] = {"skipped": f"{type(e).__name__}: {e}"[:300]}
    print(f"agent turns: {key}: {json.dumps(results[key], default=lambda x: round(x, 2))}", flush=True)


def baton(results: dict, binary: str, srv: RedisServer, tmp: str, lang: str, config: Path, n: int, turns: int,
          env: dict) -> None:
    api_port = free_port()
    runner = Runner(binary, srv.url, f"bench-{lang}", f"bench-{lang}", log_dir=tmp, LOG_LEVEL="warn",
                    CONCURRENCY=str(CLIENTS), EVENT_STREAMS_PER_CLIENT=str(CLIENTS), LANGGRAPH_CONFIG=str(config), AGENT_API_ADDR=f"127.0.0.1:{api_port}", **env)
    r = redis.Redis.from_url(srv.url)
    try:
        c = BatonClient(runner.url, timeout=120)
        ctr = Counters(r, [runner.proc.pid, srv.proc.pid])
        graph = {"id": "agent", "kind": "graph", "input": {"graph": "agent", "input": {"topic": "fencing"}}}
        check = "fencing in 2 steps"

        def native() -> dict:
            out = native_latency(c, lang, graph, n, check)
            out.update(native_clients(c, lang, graph, turns, ctr))
            out.update(idle_rss(runner))
            return out
        guarded(results, f"baton-{lang}", native)
        if lang == "py":
            exe = {"id": "agent", "kind": "exec", "input": {
                "command": [sys.executable, str(HERE / "two_node_exec.py")], "dir": str(PACKAGE_DIR),
                "env": {"PYTHONPATH": str(PACKAGE_DIR), "GRAPH_INPUT": json.dumps({"topic": "fencing"})}}}
            guarded(results, "exec", lambda: {**native_latency(c, "exec", exe, max(5, n // 4), check),
                                              **native_clients(c, "exec", exe, CLIENTS, ctr)})

        def api() -> dict:
            url = f"http://127.0.0.1:{api_port}"
            try:
                httpx.get(url + "/ok", timeout=5).raise_for_status()
            except httpx.HTTPError as e:
                raise RuntimeError(f"no Agent Server API on AGENT_API_ADDR ({url}/ok: {e})") from None
            return sdk(url, n, turns, ctr)
        if lang == "py":
            guarded(results, "baton-api", api)
    finally:
        runner.stop()
        r.close()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    turns = int(sys.argv[2]) if len(sys.argv) > 2 else 10 * CLIENTS
    tmp = tempfile.mkdtemp(prefix="baton-agent-bench-")
    proj = project(tmp)
    results: dict = {"load_before": os.getloadavg()}
    guarded(results, "floor", lambda: floor(n, turns))
    srv = RedisServer()
    try:
        binary = go_build("./cmd/runner", tmp, "runner")
        baton(results, binary, srv, tmp, "py", proj / "langgraph.json", n, turns, {
            "LANGGRAPH_PYTHON": sys.executable, "PYTHONPATH": str(PACKAGE_DIR), "EXEC_ENV": "PYTHONPATH",
            "EXEC_STORE_COMMANDS": sys.executable})
        js = REPO_ROOT / "js"
        if (js / "node_modules" / "tsx").is_dir():
            baton(results, binary, srv, tmp, "js", js / "test" / "fixtures" / "project" / "langgraph.json", n, turns,
                  {"LANGGRAPH_JS_WORKER": str(js / "src" / "worker.js")})
        else:
            results["baton-js"] = {"skipped": "js/node_modules has no tsx (cd js && npm ci)"}
    finally:
        srv.stop()
    guarded(results, "langgraph-dev", lambda: lgdev(proj, tmp, n, turns))
    results["load_after"] = os.getloadavg()
    from turns_report import report  # noqa: PLC0415
    report(results)
    out = os.environ.get("AGENT_BENCH_JSON")
    if out:
        Path(out).write_text(json.dumps(results, indent=1))
    print(f"logs: {tmp}")


if __name__ == "__main__":
    main()
