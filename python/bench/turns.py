"""Submit -> result of a two-node graph, one turn at a time on one real
runner and redis-server: the example's Python graph through the warm graph
worker (kind "graph", LANGGRAPH_CONFIG) and through today's exec path (a new
Python process per turn, run_node), and the JS fixture's TypeScript graph
through the JS worker. Prints p50 and p99 of each, measured by the client
(submit to the end event of the run's SSE follow) and by the store
(created_at to finished_at), then turns/s with 16 clients at once through
the Python worker.

    python/.venv/bin/python python/bench/turns.py [N]
"""

from __future__ import annotations

import json
import statistics
import threading
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests")]

from harness import PACKAGE_DIR, REPO_ROOT, RedisServer, Runner, go_build  # noqa: E402

from baton_langgraph.client import BatonClient  # noqa: E402


def ts(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def measure(c: BatonClient, name: str, node: dict, n: int) -> None:
    wall, store = [], []
    for i in range(n + 2):
        t0 = time.perf_counter()
        c.submit({"id": f"{name}-{i}", "thread": f"{name}-t{i}", "nodes": [node]})
        run = c.wait(f"{name}-{i}")
        took = time.perf_counter() - t0
        assert run["status"] == "SUCCEEDED", run
        assert run["nodes"][0]["result"]["answer"].endswith("fencing in 2 steps"), run
        if i >= 2:  # the first turns warm the runner up
            wall.append(took * 1000)
            store.append((ts(run["finished_at"]) - ts(run["created_at"])) * 1000)
    for what, xs in (("client", wall), ("store", store)):
        xs.sort()
        p99 = xs[min(len(xs) - 1, int(len(xs) * 0.99))]
        print(f"{name:6} {what:6} p50 {statistics.median(xs):8.1f} ms  p99 {p99:8.1f} ms  (n={len(xs)})")


def concurrent(c: BatonClient, node: dict, clients: int, per: int) -> None:
    def one(k: int) -> None:
        for i in range(per):
            rid = f"conc-{k}-{i}"
            c.submit({"id": rid, "thread": f"conc-t{k}-{i}", "nodes": [node]})
            assert c.wait(rid)["status"] == "SUCCEEDED"
    t0 = time.perf_counter()
    threads = [threading.Thread(target=one, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - t0
    print(f"graph  {clients} clients: {clients * per / took:.1f} turns/s ({clients * per} turns in {took:.1f} s)")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    tmp = tempfile.mkdtemp(prefix="baton-bench-")
    srv = RedisServer()
    runner = None
    try:
        binary = go_build("./cmd/runner", tmp, "runner")
        runner = Runner(binary, srv.url, "bench", "bench-1", log_dir=tmp, LOG_LEVEL="warn", EXEC_STORE_COMMANDS=sys.executable,
                        LANGGRAPH_CONFIG=str(REPO_ROOT / "examples" / "langgraph" / "langgraph.json"),
                        LANGGRAPH_PYTHON=sys.executable, PYTHONPATH=str(PACKAGE_DIR), EXEC_ENV="PYTHONPATH")
        c = BatonClient(runner.url)
        graph = {"id": "agent", "kind": "graph", "input": {"graph": "agent", "input": {"topic": "fencing"}}}
        exe = {"id": "agent", "kind": "exec", "input": {
            "command": [sys.executable, str(HERE / "two_node_exec.py")], "dir": str(PACKAGE_DIR),
            "env": {"PYTHONPATH": str(PACKAGE_DIR), "GRAPH_INPUT": json.dumps({"topic": "fencing"})}}}
        measure(c, "graph", graph, n)
        measure(c, "exec", exe, n)
        concurrent(c, graph, 16, 10)
        runner.stop()
        runner = None
        js = REPO_ROOT / "js"
        if (js / "node_modules" / "tsx").is_dir():
            runner = Runner(binary, srv.url, "bench-js", "bench-2", log_dir=tmp, LOG_LEVEL="warn",
                            LANGGRAPH_CONFIG=str(js / "test" / "fixtures" / "project" / "langgraph.json"),
                            LANGGRAPH_JS_WORKER=str(js / "src" / "worker.js"))
            measure(BatonClient(runner.url), "js", {"id": "agent", "kind": "graph", "input": {
                "graph": "agent", "input": {"topic": "fencing"}}}, n)
    finally:
        if runner is not None:
            runner.stop()
        srv.stop()


if __name__ == "__main__":
    main()
