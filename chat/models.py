"""Conversations, turns, messages, widget model context and provider keys."""

from __future__ import annotations

from django.conf import settings
from django.db import models, transaction
from django.db.models import Max, Q

from chat.events import conversation_group
from inspector.encrypted import EncryptedTextField


class ConversationQuerySet(models.QuerySet):
    def visible_to(self, user) -> "ConversationQuerySet":
        """What a user may read: their own conversations and those shared with the team.

        Only the owner changes a conversation or continues it; the others (viewers too) read it
        in the replay player.
        """
        if not user.is_authenticated:
            return self.none()
        return self.filter(Q(owner=user) | Q(shared=True))


class Conversation(models.Model):
    class Status(models.TextChoices):
        IDLE = "idle"
        RUNNING = "running"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    # Readable (never changeable) by everyone who signs in, viewers included (inspector/roles.py).
    shared = models.BooleanField("shared with the team", default=False)
    title = models.CharField(max_length=200, blank=True)
    model = models.CharField(max_length=200, help_text="A litellm model name, e.g. openai/gpt-4o-mini.")
    api_base = models.URLField("API base", max_length=500, blank=True, help_text="For Ollama, vLLM, LM Studio or any OpenAI-compatible endpoint.")
    api_key = EncryptedTextField("API key", blank=True, help_text="Stored encrypted; never shown again.")
    system_prompt = models.TextField(blank=True)
    temperature = models.FloatField(null=True, blank=True)
    servers = models.ManyToManyField("tools.Server", blank=True, related_name="conversations")
    # Offer the model only these of its servers' tools ("tool" or "server/tool"); empty: all of them.
    # Set by an eval case that tests a subset (evals/runs.py); chat/history.py applies it.
    offered_tools = models.JSONField(default=list, blank=True,
                                     help_text="Only these tools are offered (tool or server/tool names); empty: every tool.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.IDLE)
    # An imported conversation is evidence from elsewhere: shown by the player and re-run, never continued.
    read_only = models.BooleanField(default=False)
    # A view's ui/message is sent as a user message: ask the person first unless they turned it off.
    confirm_view_messages = models.BooleanField(default=True)
    # Tools an App view registers (its own, run in the browser) are offered to the model only if asked.
    offer_view_tools = models.BooleanField(default=False)
    # A tool whose taskSupport is "optional" is called as an MCP task only if asked (one that requires it always is).
    use_tasks = models.BooleanField("run tools that allow tasks as tasks", default=False)
    # For an imported one: the file's header, its servers (names, tool definitions, views), no secrets.
    imported = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ConversationQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"

    @property
    def group_name(self) -> str:
        """The Channels group that receives this conversation's live events."""
        return conversation_group(self.pk)

    def append_message(self, **fields) -> "Message":
        """Add a message with the next sequence number (serialised per conversation)."""
        with transaction.atomic():
            Conversation.objects.select_for_update().filter(pk=self.pk).first()
            seq = (self.messages.aggregate(m=Max("seq"))["m"] or 0) + 1
            return Message.objects.create(conversation=self, seq=seq, **fields)

    def active_turn(self) -> "Turn | None":
        return self.turns.filter(status=Turn.Status.RUNNING).order_by("-created_at").first()


class Turn(models.Model):
    """One user message and everything the agent loop did to answer it."""

    class Status(models.TextChoices):
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        STOPPED = "stopped"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    steps = models.PositiveIntegerField(default=0, help_text="The last step a delivery claimed.")
    step_claimed_at = models.DateTimeField(null=True, blank=True)
    stop_requested = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self) -> str:
        return f"Turn {self.pk} of “{self.conversation}” ({self.status})"


class Message(models.Model):
    class Role(models.TextChoices):
        SYSTEM = "system"
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    turn = models.ForeignKey(Turn, null=True, blank=True, on_delete=models.SET_NULL, related_name="messages")
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=10, choices=Role.choices)
    step = models.PositiveIntegerField(null=True, blank=True, help_text="For assistant messages: the turn's LLM step.")
    text = models.TextField(blank=True)
    # For assistant messages: [{"id", "name" (the LLM-facing name), "arguments" (a JSON string)}]
    tool_calls = models.JSONField(default=list, blank=True)
    # For tool messages: the tool call whose projection is this message's content.
    tool_call = models.ForeignKey("tools.ToolCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages")
    llm_tool_call_id = models.CharField(max_length=200, blank=True, help_text="For tool messages: the id the model gave the call.")
    # For user messages an App view sent (ui/message): the tool call whose view sent it.
    from_view = models.ForeignKey("tools.ToolCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    model = models.CharField(max_length=200, blank=True)
    usage = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["seq"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="unique_message_seq"),
            # A redelivered step can never store a second answer (and a second set of tool calls).
            models.UniqueConstraint(fields=["turn", "step"], condition=models.Q(role="assistant"), name="one_answer_per_step"),
        ]


class ModelContext(models.Model):
    """What a widget asked the model to know (`ui/update-model-context`, or OpenAI `setWidgetState`).

    One row per view (the tool call that rendered it): a new update replaces the previous one.
    """

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="model_contexts")
    tool_call = models.OneToOneField("tools.ToolCall", on_delete=models.CASCADE, related_name="model_context")
    content = models.JSONField(default=list, blank=True)
    structured = models.JSONField(null=True, blank=True)
    widget_state = models.JSONField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)


class ViewTools(models.Model):
    """The tools an App view registered (its answer to the host's `tools/list`), per view.

    They run in the view, in the browser: offered to the model when the conversation says so
    (`offer_view_tools`), and run by the chat page that shows the view (tools/view_calls.py).
    """

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="view_tools")
    tool_call = models.OneToOneField("tools.ToolCall", on_delete=models.CASCADE, related_name="view_tools")
    tools = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)


class ProviderKey(models.Model):
    """A user's saved key for an LLM provider (litellm's provider prefix, e.g. `openai`)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="provider_keys")
    provider = models.CharField(max_length=50)
    api_key = EncryptedTextField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "provider"], name="unique_provider_key")]

    @property
    def masked(self) -> str:
        key = self.api_key or ""
        return f"••••{key[-4:]}" if len(key) >= 12 else "••••"


class ReplayRun(models.Model):
    """One replay of a conversation: its recorded tool calls run again ("recorded"), or its user
    messages sent again to a model as a new conversation ("live"), compared with the original."""

    class Kind(models.TextChoices):
        RECORDED = "recorded"
        LIVE = "live"

    class Status(models.TextChoices):
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"

    class Verdict(models.TextChoices):
        SAME = "same"
        DIFFERENT = "different"
        ERROR = "error"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="replay_runs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="replay_runs")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.RECORDED)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING, db_index=True)
    verdict = models.CharField(max_length=10, choices=Verdict.choices, blank=True)
    ignore_paths = models.JSONField(default=list, blank=True, help_text="Volatile JSON paths left out of the diffs.")
    server_map = models.JSONField(default=dict, blank=True, help_text="Recorded server name -> the server id it ran on.")
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    # Live runs: the new conversation the user messages were sent to, and the comparison.
    live_conversation = models.ForeignKey(
        Conversation, null=True, blank=True, on_delete=models.SET_NULL, related_name="live_replay_of"
    )
    comparison = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Replay {self.pk} of “{self.conversation}” ({self.kind}, {self.status})"


class ReplayItem(models.Model):
    """One recorded tool call of a run, the call that re-ran it, and the differences."""

    class Verdict(models.TextChoices):
        PENDING = "pending"
        SAME = "same"
        DIFFERENT = "different"
        ERROR = "error"

    run = models.ForeignKey(ReplayRun, on_delete=models.CASCADE, related_name="items")
    position = models.PositiveIntegerField()
    original = models.ForeignKey("tools.ToolCall", null=True, on_delete=models.SET_NULL, related_name="replay_items")
    server_name = models.CharField(max_length=200, blank=True)
    tool_name = models.CharField(max_length=200)
    arguments = models.JSONField(default=dict, blank=True)
    call = models.ForeignKey("tools.ToolCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    verdict = models.CharField(max_length=10, choices=Verdict.choices, default=Verdict.PENDING)
    error = models.TextField(blank=True)
    before = models.JSONField(default=dict, blank=True, help_text="status, duration, sizes and tokens of the original.")
    after = models.JSONField(default=dict, blank=True)
    full_diff = models.JSONField(null=True, blank=True)
    projection_diff = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["run", "position"]
        constraints = [models.UniqueConstraint(fields=["run", "position"], name="unique_replay_item_position")]
