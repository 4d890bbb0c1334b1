"""The Lua scripts BatonSaver runs: the very text of scripts/lua as Redis runs
it for baton itself, copied into ./lua by `go run ./js/gen`
(a Go test keeps the copies identical). Never edit the copies."""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any

from redis.exceptions import NoScriptError


class Script:
    """One script, called with EVALSHA and loaded with EVAL on NOSCRIPT."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = resources.files(__package__).joinpath("lua", f"{name}.lua").read_text("utf-8")
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()

    def run(self, client: Any, keys: list[str], args: list[Any]) -> Any:
        try:
            return client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return client.eval(self.source, len(keys), *keys, *args)

    async def arun(self, client: Any, keys: list[str], args: list[Any]) -> Any:
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await client.eval(self.source, len(keys), *keys, *args)


CHECKPOINT = Script("checkpoint")
CHECKPOINT_WRITES = Script("checkpoint_writes")
CHECKPOINT_DELETE = Script("checkpoint_delete")
