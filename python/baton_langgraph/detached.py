"""The saver BatonSaver.from_env() gives outside a baton exec node."""

from __future__ import annotations

from typing import Any, NoReturn

from langgraph.checkpoint.base import BaseCheckpointSaver

from .errors import BatonError

OUTSIDE_A_NODE = (
    "baton: this checkpointer is BatonSaver.from_env() outside a baton exec node "
    "(neither BATON_FENCING_TOKEN nor BATON_REDIS_URL is set). Importing the graph is fine; "
    "running it needs the node's lease: run it as an exec node, serve the project with "
    "LANGGRAPH_CONFIG (the graph worker puts its own saver in place of this one), "
    "or read a thread with BatonSaver.reader(url)")


class DetachedSaver(BaseCheckpointSaver[int]):
    """What from_env() returns when the process is not an exec node: the
    graph module that builds its checkpointer at import (as the docs
    teach) imports anywhere, a test, a notebook, the graph worker, and the
    first read or write says why it cannot run, never touching Redis."""

    lost = None

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise BatonError(OUTSIDE_A_NODE)

    get_tuple = list = put = put_writes = delete_thread = _refuse  # type: ignore[assignment]

    async def aget_tuple(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    async def aput(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    async def aput_writes(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    async def adelete_thread(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    async def alist(self, *args: Any, **kwargs: Any):  # type: ignore[override]
        self._refuse()
        yield  # an async generator, as alist is

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        pass
