"""The example's two-node graph as today's exec node runs it: a new Python
process per turn, run_node as its main (bench/turns.py compares it with
the warm graph worker)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "langgraph"))

from agent import graph  # noqa: E402

from baton_langgraph import run_node  # noqa: E402

if __name__ == "__main__":
    run_node(graph)
