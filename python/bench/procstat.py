"""CPU and memory of a process tree, read from /proc (Linux): what a turn
costs the runner, its graph worker and redis-server, or langgraph dev."""

from __future__ import annotations

import os

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    return s[s.rindex(")") + 2:].split()  # fields from the 3rd (state) on


def descendants(root: int) -> list[int]:
    """root and every live process below it."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(int(d))
            if st:
                kids.setdefault(int(st[1]), []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def cpu_seconds(roots: list[int]) -> float:
    """User+system CPU of each root's tree, with the reaped children's
    (an exec node's process per turn is counted once its runner reaps it)."""
    return sum(sum(cpu_split(root)) for root in roots)


def cpu_split(root: int) -> tuple[float, float]:
    """CPU seconds of root itself (with its reaped children), and of its
    live descendants (a graph worker)."""
    own = below = 0
    for pid in descendants(root):
        st = _stat(pid)
        if st:
            t = int(st[11]) + int(st[12]) + int(st[13]) + int(st[14])
            if pid == root:
                own += t
            else:
                below += t
    return own / TICK, below / TICK


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0
