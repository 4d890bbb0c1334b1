"""Session fixtures: one redis-server and one batonctl build for every test."""

from __future__ import annotations

import itertools
import shutil
import sys

import pytest
import redis

from harness import Batonctl, RedisServer, drop_prefix, go_build, tmpdir

_n = itertools.count(1)


@pytest.fixture(scope="session")
def redis_server():
    srv = RedisServer()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def redis_url(redis_server) -> str:
    return redis_server.url


@pytest.fixture(scope="session")
def bin_dir():
    d = tmpdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def batonctl_bin(bin_dir) -> str:
    return go_build("./js/internal/batonctl", bin_dir, "batonctl")


@pytest.fixture(scope="session")
def ctl(batonctl_bin, redis_url):
    c = Batonctl(batonctl_bin, redis_url)
    yield c
    c.close()


@pytest.fixture
def rdb(redis_url):
    c = redis.Redis.from_url(redis_url, decode_responses=True)
    yield c
    c.close()


@pytest.fixture
def prefix(rdb):
    p = f"py{next(_n)}"
    yield p
    drop_prefix(rdb, p)


@pytest.fixture(scope="session")
def runner_bin(bin_dir) -> str:
    return go_build("./cmd/runner", bin_dir, "runner")


@pytest.fixture
def start_runner(runner_bin, redis_url, prefix, tmp_path):
    """Starts real runners on the test's prefix; all stopped at the test's end."""
    from harness import Runner

    started = []

    def start(runner_id: str, **env: str) -> Runner:
        # The agents run as [sys.executable, "agent.py"]: trusting that
        # command with the runner's Redis (EXEC_STORE_COMMANDS) gives their
        # saver BATON_REDIS_URL.
        env = {"LEASE_TTL": "2s", "GRACE": "200ms", "SWEEP_INTERVAL": "200ms", "CONCURRENCY": "4",
               "EXEC_STORE_COMMANDS": sys.executable, **env}
        r = Runner(runner_bin, redis_url, prefix, runner_id, log_dir=str(tmp_path), **env)
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop()
