from django.apps import AppConfig


class ToolsConfig(AppConfig):
    name = "tools"
    verbose_name = "MCP servers and tool calls"

    def ready(self) -> None:
        # The SDK's HTTP transports parse messages with json.loads first (tools/mcp/message_parsing.py
        # says why). Applied once per process here; code that uses tools.mcp outside Django calls it itself.
        from tools.mcp import message_parsing

        message_parsing.install()
