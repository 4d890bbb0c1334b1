"""The seeds' chat service, with nothing hand-written: LangGraph's own SDK,
pointed at a baton runner that serves this project (LANGGRAPH_CONFIG=
examples/langgraph/langgraph.json). Every write the graphs make is fenced.

    python chat_client.py http://127.0.0.1:2024   # the URL the runner logs (agent_api_listening)
"""

import asyncio
import sys

from langgraph_sdk import get_client


async def main(url: str) -> None:
    client = get_client(url=url)

    # A chat turn, its model's tokens streamed as they come.
    thread = (await client.threads.create())["thread_id"]
    async for part in client.runs.stream(thread, "chat", input={"messages": [{"role": "user", "content": "hi"}]},
                                         stream_mode="messages-tuple"):
        if part.event == "messages":
            print(part.data[0]["content"], end="", flush=True)
    print()

    # A person in the loop: the graph asks with interrupt(), the thread
    # waits (no worker held) until someone answers with Command(resume).
    thread = (await client.threads.create())["thread_id"]
    asked = await client.runs.wait(thread, "review", input={"change": "v2"})
    print("asks:", asked["__interrupt__"][0]["value"]["question"])
    done = await client.runs.wait(thread, "review", command={"resume": {"approved": True}})
    print(done["published"])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:2024"))
