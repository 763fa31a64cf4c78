"""The reviewer's contact with GitHub: auth, REST client, payload models, MCP host, guard."""
