"""A thin client of baton's HTTP API (/v1/, runner/admin/api.go), sync and
async, over httpx. Answers are the API's JSON as dicts; refusals raise
``BatonAPIError`` (``NotFoundError``, ``ConflictError``, ...) naming what the
server said was wrong. It links nothing of the worker side: a web service
that only submits and watches runs imports this module alone.

    with BatonClient("http://127.0.0.1:8080", token=...) as baton:
        run = baton.submit({"thread": "chat-1", "multitask": "enqueue", "nodes": [...]})
        for event in baton.follow(run["id"]):
            print(event["type"])
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import httpx

from .errors import BatonError
from .ids import validate_id, validate_ns

RunSpec = Mapping[str, Any]


class BatonAPIError(BatonError):
    """The API refused a call: ``status`` is the HTTP status, ``message`` the
    server's error, ``problems`` the fields of a refused run spec."""

    def __init__(self, status: int, message: str, *, op: str, problems: list | None = None) -> None:
        detail = "; ".join(f"{p.get('field')}: {p.get('message')}" for p in problems or [])
        super().__init__(f"baton: {op}: HTTP {status}: {message}" + (f" ({detail})" if detail else ""),
                         code=status, op=op)
        self.status = status
        self.message = message
        self.problems = problems or []


class BadRequestError(BatonAPIError):
    """400 (or 413, too large): bad input (a run spec, an id, a resume value
    that is not JSON or over the input cap); nothing was stored."""


class UnauthorizedError(BatonAPIError):
    """401/403: the API token is missing or wrong (the runner's API_TOKEN)."""


class NotFoundError(BatonAPIError):
    """404: no such run or thread (or it expired)."""


class ConflictError(BatonAPIError):
    """409: the run or thread is not in a state that allows it (a busy thread
    with multitask reject, a retry of a running run, a resume of a node that
    is not waiting or of a run that ended, ...)."""


_BY_STATUS = {400: BadRequestError, 401: UnauthorizedError, 403: UnauthorizedError, 404: NotFoundError,
              409: ConflictError, 413: BadRequestError}


def _raise_for(resp: httpx.Response, op: str) -> None:
    if resp.status_code < 400:
        return
    try:
        body = resp.json()
        message, problems = body.get("error") or resp.reason_phrase, body.get("problems")
    except ValueError:
        message, problems = resp.text.strip() or resp.reason_phrase, None
    cls = _BY_STATUS.get(resp.status_code, BatonAPIError)
    raise cls(resp.status_code, message, op=op, problems=problems)


def _spec_body(spec: RunSpec | str | bytes) -> tuple[bytes, str]:
    if isinstance(spec, (str, bytes)):
        raw = spec.encode() if isinstance(spec, str) else spec
        return raw, "application/json" if raw.lstrip()[:1] in (b"{", b"[") else "application/yaml"
    return json.dumps(spec).encode(), "application/json"


def _run_path(run: str, tail: str = "") -> str:
    return f"/v1/runs/{validate_id('run id', run)}{tail}"


def _resume_call(run: str, node: str, value: Any, wait_id: str | None) -> tuple[str, dict[str, Any]]:
    path = _run_path(run, f"/nodes/{validate_id('node id', node)}/resume")
    body: dict[str, Any] = {"value": value}
    if wait_id:
        body["wait_id"] = validate_id("wait_id", wait_id)
    try:
        return path, {"content": json.dumps(body, allow_nan=False).encode(),
                      "headers": {"Content-Type": "application/json"}}
    except (TypeError, ValueError) as e:
        raise BatonError(f"baton: resume {run}/{node}: the value is not JSON: {e}") from None


def _checkpoints_params(ns: str, limit: int | None, cursor: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {"ns": validate_ns(ns)}
    if limit is not None:
        params["limit"] = limit
    if cursor:
        params["cursor"] = cursor
    return params


class _SSE:
    """Server-Sent Events parsing: feed lines, get (event, id, data) once a
    blank line ends an event; comments (": keep-alive") are dropped."""

    def __init__(self) -> None:
        self.event, self.id, self.data = "message", None, []

    def feed(self, line: str) -> tuple[str, str | None, str] | None:
        if line == "":
            if not self.data:
                self.event = "message"
                return None
            out = (self.event, self.id, "\n".join(self.data))
            self.event, self.data = "message", []
            return out
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self.event = value
        elif name == "data":
            self.data.append(value)
        elif name == "id":
            self.id = value
        return None


END = "end"
"""The type of the last item follow() yields: {"type": "end", "id": run, "status": ...}."""


class BatonClient:
    """The sync client. base_url is a runner's admin address
    (http://127.0.0.1:8080); token its API_TOKEN, when set."""

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> BatonClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _json(self, op: str, method: str, path: str, **kw: Any) -> dict:
        resp = self._http.request(method, path, **kw)
        _raise_for(resp, op)
        return resp.json()

    def submit(self, spec: RunSpec | str | bytes) -> dict:
        """Submits a run (a dict, or JSON/YAML text); returns {id, status, created, ...}."""
        body, ctype = _spec_body(spec)
        return self._json("submit", "POST", "/v1/runs", content=body, headers={"Content-Type": ctype})

    def status(self, run: str) -> dict:
        """The run with its nodes (id, state, attempt, epoch, owner, progress, result, error)."""
        return self._json("status", "GET", _run_path(run))

    def runs(self, *, status: str | None = None, limit: int | None = None) -> list[dict]:
        params = {k: v for k, v in (("status", status), ("limit", limit)) if v is not None}
        return self._json("runs", "GET", "/v1/runs", params=params)["runs"]

    def events(self, run: str, *, after: str | None = None, limit: int | None = None) -> dict:
        """One page of the run's events: {events: [...], next}; pass next as after to read on."""
        params = {k: v for k, v in (("after", after), ("limit", limit)) if v is not None}
        return self._json("events", "GET", _run_path(run, "/events"), params=params)

    def follow(self, run: str, *, after: str | None = None, reconnects: int = 5) -> Iterator[dict]:
        """The run's events as they happen (the API's SSE stream), each a dict
        with its stream id under "id"; ends with {"type": "end", "id": run,
        "status": ...} once the run has ended. A dropped connection is
        resumed after the last event seen (Last-Event-ID)."""
        path = _run_path(run, "/events")
        last, left = after, reconnects
        while True:
            headers = {"Accept": "text/event-stream"}
            if last:
                headers["Last-Event-ID"] = last
            try:
                with self._http.stream("GET", path, params={"follow": "1"}, headers=headers,
                                       timeout=httpx.Timeout(self._http.timeout.connect, read=None)) as resp:
                    if resp.status_code >= 400:
                        resp.read()
                        _raise_for(resp, "follow")
                    sse = _SSE()
                    for line in resp.iter_lines():
                        ev = sse.feed(line)
                        if ev is None:
                            continue
                        kind, eid, data = ev
                        if kind == END:
                            yield {"type": END, **json.loads(data)}
                            return
                        item = json.loads(data)
                        last = eid or last
                        item.setdefault("id", eid)
                        yield item
            except (httpx.TransportError, httpx.RemoteProtocolError):
                if left <= 0:
                    raise
                left -= 1

    def wait(self, run: str) -> dict:
        """Follows the run until it ends; returns its status."""
        for ev in self.follow(run):
            if ev["type"] == END:
                break
        return self.status(run)

    def cancel(self, run: str, reason: str | None = None) -> dict:
        return self._json("cancel", "POST", _run_path(run, "/cancel"),
                          json={"reason": reason} if reason else None)

    def retry(self, run: str, *, idempotency_key: str | None = None) -> dict:
        headers = {"Idempotency-Key": validate_id("Idempotency-Key", idempotency_key)} if idempotency_key else {}
        return self._json("retry", "POST", _run_path(run, "/retry"), headers=headers)

    def resume(self, run: str, node: str, value: Any, wait_id: str | None = None) -> dict:
        """Answers the wait of a parked (WAITING) node with value, any JSON
        value; its next attempt reads it (run_node resumes the graph with
        ``Command(resume=value)``). wait_id names the wait answered (the
        node's ``wait.id`` in status()); None answers the wait the node is
        parked on now. Returns {id, node, answer: {value}, already}: already
        is true when that wait was answered before, and answer is then the
        first answer (nothing changed). A node that is not waiting (or waits
        on another wait), or a run that ended, is ConflictError; an unknown
        run or node NotFoundError; a value over the input cap BadRequestError."""
        path, kw = _resume_call(run, node, value, wait_id)
        return self._json("resume", "POST", path, **kw)

    def thread(self, thread: str) -> dict:
        """The thread: its active run, the runs waiting, its namespaces."""
        return self._json("thread", "GET", f"/v1/threads/{validate_id('thread', thread)}")

    def checkpoints(self, thread: str, *, ns: str = "", limit: int | None = None, cursor: str | None = None) -> dict:
        """One page of a namespace's checkpoints, newest first: {checkpoints, next}."""
        return self._json("checkpoints", "GET", f"/v1/threads/{validate_id('thread', thread)}/checkpoints",
                          params=_checkpoints_params(ns, limit, cursor))

    def workers(self) -> list[dict]:
        return self._json("workers", "GET", "/v1/workers")["workers"]


class AsyncBatonClient:
    """The async client: the same calls as BatonClient, awaited."""

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncClient(base_url=base_url, headers=headers, timeout=timeout, transport=transport)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncBatonClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _json(self, op: str, method: str, path: str, **kw: Any) -> dict:
        resp = await self._http.request(method, path, **kw)
        _raise_for(resp, op)
        return resp.json()

    async def submit(self, spec: RunSpec | str | bytes) -> dict:
        body, ctype = _spec_body(spec)
        return await self._json("submit", "POST", "/v1/runs", content=body, headers={"Content-Type": ctype})

    async def status(self, run: str) -> dict:
        return await self._json("status", "GET", _run_path(run))

    async def runs(self, *, status: str | None = None, limit: int | None = None) -> list[dict]:
        params = {k: v for k, v in (("status", status), ("limit", limit)) if v is not None}
        return (await self._json("runs", "GET", "/v1/runs", params=params))["runs"]

    async def events(self, run: str, *, after: str | None = None, limit: int | None = None) -> dict:
        params = {k: v for k, v in (("after", after), ("limit", limit)) if v is not None}
        return await self._json("events", "GET", _run_path(run, "/events"), params=params)

    async def follow(self, run: str, *, after: str | None = None, reconnects: int = 5) -> AsyncIterator[dict]:
        path = _run_path(run, "/events")
        last, left = after, reconnects
        while True:
            headers = {"Accept": "text/event-stream"}
            if last:
                headers["Last-Event-ID"] = last
            try:
                async with self._http.stream("GET", path, params={"follow": "1"}, headers=headers,
                                             timeout=httpx.Timeout(self._http.timeout.connect, read=None)) as resp:
                    if resp.status_code >= 400:
                        await resp.aread()
                        _raise_for(resp, "follow")
                    sse = _SSE()
                    async for line in resp.aiter_lines():
                        ev = sse.feed(line)
                        if ev is None:
                            continue
                        kind, eid, data = ev
                        if kind == END:
                            yield {"type": END, **json.loads(data)}
                            return
                        item = json.loads(data)
                        last = eid or last
                        item.setdefault("id", eid)
                        yield item
            except (httpx.TransportError, httpx.RemoteProtocolError):
                if left <= 0:
                    raise
                left -= 1

    async def wait(self, run: str) -> dict:
        async for ev in self.follow(run):
            if ev["type"] == END:
                break
        return await self.status(run)

    async def cancel(self, run: str, reason: str | None = None) -> dict:
        return await self._json("cancel", "POST", _run_path(run, "/cancel"),
                                json={"reason": reason} if reason else None)

    async def retry(self, run: str, *, idempotency_key: str | None = None) -> dict:
        headers = {"Idempotency-Key": validate_id("Idempotency-Key", idempotency_key)} if idempotency_key else {}
        return await self._json("retry", "POST", _run_path(run, "/retry"), headers=headers)

    async def resume(self, run: str, node: str, value: Any, wait_id: str | None = None) -> dict:
        path, kw = _resume_call(run, node, value, wait_id)
        return await self._json("resume", "POST", path, **kw)

    async def thread(self, thread: str) -> dict:
        return await self._json("thread", "GET", f"/v1/threads/{validate_id('thread', thread)}")

    async def checkpoints(self, thread: str, *, ns: str = "", limit: int | None = None,
                          cursor: str | None = None) -> dict:
        return await self._json("checkpoints", "GET", f"/v1/threads/{validate_id('thread', thread)}/checkpoints",
                                params=_checkpoints_params(ns, limit, cursor))

    async def workers(self) -> list[dict]:
        return (await self._json("workers", "GET", "/v1/workers"))["workers"]
