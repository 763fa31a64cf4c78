"""Child process for crash tests: runs one turn of a test session, to be SIGKILLed mid-way."""

import asyncio
import sys
from pathlib import Path

from tests.harness.agent_kit import make_harness


async def main(tmp: str, base_url: str, session_id: str, prompt: str) -> None:
    h = make_harness(Path(tmp), base_url, tool_timeout_s=120)
    agent = await h.agents.get_or_open(session_id)
    print("started", flush=True)
    await agent.followup(prompt)
    await h.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
