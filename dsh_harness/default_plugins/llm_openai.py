"""Built-in plugin: OpenAI-compatible chat completions (DeepSeek is the default provider)."""

from ..hookspecs import hookimpl
from ..llm.openai_provider import OpenAICompatibleProvider


@hookimpl
def dsh_register_llm_providers(register):
    register("openai", lambda name, config: OpenAICompatibleProvider(name, config))
