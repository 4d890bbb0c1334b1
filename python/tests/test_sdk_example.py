"""examples/langgraph/chat_client.py, the seeds' service as LangGraph's SDK
against a runner serving the example project, run as a user runs it."""

from __future__ import annotations

import subprocess
import sys

from harness import REPO_ROOT
from test_agent_server_fencing import agent_runner
from test_graph_worker import EXAMPLE


def test_the_sdk_example_chats_streams_tokens_and_answers_an_interrupt(start_runner):
    r = agent_runner(start_runner, "sdk-example", EXAMPLE)
    out = subprocess.run([sys.executable, str(REPO_ROOT / "examples" / "langgraph" / "chat_client.py"), r.agent_url],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "fencing keeps a paused worker's late writes out",
        "asks: deploy v2?",
        "deploy v2: approved",
    ]
