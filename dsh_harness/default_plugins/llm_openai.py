"""Built-in plugin: OpenAI-compatible chat completions (DeepSeek is the default provider)."""

from ..hookspecs import hookimpl


def _provider(name, config):
    # Imported on first use: the openai SDK costs every CLI command a third of a second.
    from ..llm.openai_provider import OpenAICompatibleProvider

    return OpenAICompatibleProvider(name, config)


@hookimpl
def dsh_register_llm_providers(register):
    register("openai", _provider)
