"""Loading the graphs a langgraph.json names, as LangGraph's server does: a
file path and an attribute, "./src/agent.py:graph", whose value is a
compiled graph or a function returning one. The graph worker loads every
graph at start, so that a graph that fails to import stops the runner then,
not at its first run."""

from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any

from .errors import BatonError


class GraphSpec:
    """One graph of the project: its id, its file and its attribute, and
    what the attribute held (a compiled graph, or a factory called for each
    attempt)."""

    def __init__(self, graph_id: str, path: str, attr: str, value: Any) -> None:
        self.id, self.path, self.attr = graph_id, path, attr
        self.value = value
        self.factory = not _is_graph(value)
        self.own_checkpointer = None if self.factory else _checkpointer_name(value)

    async def graph(self, config: dict[str, Any]) -> Any:
        """The compiled graph for one attempt: the attribute itself, or what
        its factory returns (called with the attempt's config when it takes
        an argument, awaited when it is a coroutine)."""
        if not self.factory:
            return self.value
        f = self.value
        takes = len(inspect.signature(f).parameters) > 0
        g = f(config) if takes else f()
        if inspect.isawaitable(g):
            g = await g
        if not _is_graph(g):
            raise BatonError(f"baton: graph {self.id!r}: {self.path}:{self.attr}() returned a "
                             f"{type(g).__name__}, not a compiled graph")
        return g


def _is_graph(v: Any) -> bool:
    from langgraph.pregel import Pregel
    return isinstance(v, Pregel)


def _checkpointer_name(g: Any) -> str | None:
    cp = getattr(g, "checkpointer", None)
    if cp in (None, True, False):
        return None
    return type(cp).__name__


def load(graph_id: str, ref: str) -> GraphSpec:
    """Imports "path/to/file.py:attr" (an absolute path) and returns its
    graph. The file's folder is put on sys.path, as LangGraph's server does,
    so a graph module imports its neighbours. Raises ImportError (with the
    module's own error chained), or BatonError for a missing attribute or one
    that is neither a graph nor callable."""
    path, sep, attr = ref.rpartition(":")
    if not sep or not path or not attr:
        raise BatonError(f"baton: graph {graph_id!r}: {ref!r} is not path:attribute")
    file = Path(path)
    if not file.is_file():
        raise BatonError(f"baton: graph {graph_id!r}: no file {path}")
    folder = str(file.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = f"baton_graph_{graph_id.replace('-', '_').replace('.', '_')}_{file.stem}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise BatonError(f"baton: graph {graph_id!r}: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)  # the module's own errors propagate, with their traceback
    if not hasattr(module, attr):
        raise BatonError(f"baton: graph {graph_id!r}: {path} has no attribute {attr!r}")
    value = getattr(module, attr)
    if not _is_graph(value) and not callable(value):
        raise BatonError(f"baton: graph {graph_id!r}: {path}:{attr} is a {type(value).__name__}, "
                         "neither a compiled graph nor a function returning one")
    return GraphSpec(graph_id, path, attr, value)
