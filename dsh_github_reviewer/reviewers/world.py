"""The world of a PR session: the system prompt of the single reviewer, a persona or the
coordinator under the trusted instructions, the guard's tools and the account's limits."""

from __future__ import annotations

from dsh_harness import AgentWorld

from ..config import SetupError
from ..core.session_key import PrKey
from ..github.account import ConfiguredAccount
from ..turn.prompts import system_prompt
from ..turn.second_look import verifier_system_prompt
from .inputs import WorldInputs
from .second_look import VERIFIER
from .team.personas import (
    COORDINATOR,
    coordinator_system_prompt,
    persona_system_prompt,
    resolve,
)


def build_world(key: PrKey, acct: ConfiguredAccount, inputs: WorldInputs) -> AgentWorld:
    trusted = inputs.instructions
    review = acct.config.review
    tools = acct.guard.tools()
    if key.persona is None:
        prompt = system_prompt(trusted)
    elif key.persona == VERIFIER:
        # The second look only reads (its verdicts are applied by code).
        prompt = verifier_system_prompt(trusted)
        tools = acct.guard.read_tools()
    elif key.persona == COORDINATOR:
        prompt = coordinator_system_prompt(trusted)
    else:
        persona = resolve(key.persona, trusted)
        if persona is None:
            raise SetupError(f"persona {key.persona!r} is not defined: it is not built in "
                             "(quality, security, performance) and the trusted "
                             f"instructions have no '## Persona: {key.persona}' section")
        prompt = persona_system_prompt(persona, trusted)
        # Personas only read; the coordinator is the team's single writer.
        tools = acct.guard.read_tools()
    return AgentWorld(
        system_prompt=prompt,
        tools=tools,
        hide_global_tools=True,
        model=inputs.model,
        # The guard keeps the read and posting budgets itself (self-budgeted tools); the
        # harness's count is a backstop above both.
        max_tool_calls=review.read_calls + review.max_comment_calls,
        # The MCP host enforces tool_timeout_s on the handshake and on each call; the
        # harness bound is a backstop above both.
        tool_timeout_s=2 * review.tool_timeout_s + 5,
        tool_result_limit=review.tool_result_limit,
        turn_timeout_s=review.turn_timeout_s)
