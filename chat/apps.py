from django.apps import AppConfig
from django.db.models.signals import post_delete


class ChatConfig(AppConfig):
    name = "chat"
    verbose_name = "Chat"

    def ready(self) -> None:
        """Tell tools what chat needs from its calls; tools never names chat (tools/callers.py)."""
        from chat import tool_calls
        from chat.models import Conversation
        from chat.sampling import queue_sampling
        from tools import callers, signals

        callers.register_refs(*tool_calls.REF_NAMES)
        callers.register_visibility(tool_calls.shared_calls)
        callers.register_link(tool_calls.link)
        callers.register_view_state(tool_calls.view_state)
        post_delete.connect(tool_calls.delete_conversation_calls, sender=Conversation,
                            dispatch_uid="chat.delete_conversation_calls")
        signals.sampling_approved.connect(queue_sampling, dispatch_uid="chat.queue_sampling")
