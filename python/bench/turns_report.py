"""The agent-turns tables: every system's figures, then the ratios against
issue 43's targets."""

from __future__ import annotations

NAMES = {"floor": "in-process floor (InMemorySaver, sync)", "baton-py": "baton graph worker, Python",
         "baton-js": "baton graph worker, JS", "exec": "baton exec (run_node per turn)",
         "baton-api": "baton Agent Server API (SDK)", "langgraph-dev": "langgraph dev 0.16.7 (SDK)"}


def _f(v, fmt: str = "{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def _pp(d: dict, a: str) -> str:
    p50, p99 = d.get(a + "_p50"), d.get(a + "_p99")
    return "-" if p50 is None else f"{p50:.1f} / {p99:.1f}"


def report(res: dict) -> None:
    print()
    print(f"agent turns (load average before {res['load_before'][0]:.2f}, after {res['load_after'][0]:.2f}; "
          "ms p50 / p99; per-turn costs at 16 clients)")
    head = ("system", "node started", "result", "first update", "token", "turns/s", "Redis cmds", "scripts",
            "CPU ms", "idle RSS MiB")
    rows = []
    for key, name in NAMES.items():
        d = res.get(key, {})
        if "skipped" in d:
            print(f"  {name}: skipped: {d['skipped']}")
            continue
        if not d:
            continue
        result = _pp(d, "wait") if "wait_p50" in d else _pp(d, "result")
        rss = None if "rss_worker" not in d else d["rss_worker"]
        rows.append((name, _pp(d, "started"), result, _pp(d, "first"), _pp(d, "token"), _f(d.get("turns_s")),
                     _f(d.get("redis_cmds"), "{:.0f}") if key.startswith("baton") or key == "exec" else "-",
                     _f(d.get("scripts"), "{:.1f}") if key.startswith("baton") or key == "exec" else "-",
                     _f(d.get("cpu_ms")), _f(rss)))
    w = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  " + "  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)))
    print("  (result: submit -> result by the client; runs.wait on a new thread for the SDK rows. "
          "CPU: runner + worker + redis-server, or langgraph dev's process tree)")
    for key, name in NAMES.items():
        d = res.get(key, {})
        if d.get("cpu_ms_own") is not None and key != "floor":
            print(f"  CPU ms per turn, {name}: {d['cpu_ms_own']:.1f} "
                  f"{'langgraph dev' if key == 'langgraph-dev' else 'runner'}, {d['cpu_ms_children']:.1f} its children"
                  + (f", {d['cpu_ms_others']:.1f} redis-server" if key != "langgraph-dev" else "")
                  + f"; the bench's client {d['cpu_ms_client']:.1f}")

    fl, api, py, lg = (res.get(k, {}) for k in ("floor", "baton-api", "baton-py", "langgraph-dev"))
    print()
    print(f"  {'target':48} {'measured':34} {'goal':9} met")

    def row(what: str, v, goal: str, ok) -> None:
        print(f"  {what:48} {v:34} {goal:9} {'-' if ok is None else ('yes' if ok else 'NO')}")

    for label, d, key in (("SDK runs.wait", api, "wait"), ("native submit->result", py, "result")):
        if fl.get("result_p50") is not None and d.get(key + "_p50") is not None:
            o50, o99 = d[key + "_p50"] - fl["result_p50"], d[key + "_p99"] - fl["result_p99"]
            row(f"overhead over floor p50 ({label})", f"{o50:.1f} ms", "<= 5 ms", o50 <= 5)
            row(f"overhead over floor p99 ({label})", f"{o99:.1f} ms", "<= 25 ms", o99 <= 25)
    if api.get("turns_s") and lg.get("turns_s"):
        x = api["turns_s"] / lg["turns_s"]
        row("turns/s vs langgraph dev (16 clients)", f"{api['turns_s']:.1f} / {lg['turns_s']:.1f} = {x:.1f}x", ">= 5x", x >= 5)
    if api.get("first_p50") is not None:
        s = f"{api['first_p50']:.1f} ms"
        if lg.get("first_p50"):
            s += f" ({lg['first_p50'] / api['first_p50']:.0f}x faster than dev)"
        row("first updates event p50", s, "<= 20 ms", api["first_p50"] <= 20)
    if api.get("token_p50") is not None:
        row("token latency p50 (model yield -> SSE)", f"{api['token_p50']:.1f} ms", "<= 5 ms", api["token_p50"] <= 5)
    if "wait_p50" not in api:
        row("SDK targets", "baton-api " + api.get("skipped", "missing")[:60], "", None)
