"""Copy each tool call's conversation and turn into its caller columns (tools 0016), before tools
0017 drops the foreign keys; backwards, the other way. The shape is chat/tool_calls.py `caller`'s."""

from django.db import migrations

KEY_PREFIX = "conversation:"
BATCH = 500


def to_callers(apps, schema_editor):
    ToolCall = apps.get_model("tools", "ToolCall")
    Conversation = apps.get_model("chat", "Conversation")
    conversations = {c["pk"]: c for c in Conversation.objects.values("pk", "owner_id", "model")}
    rows = []
    for call in ToolCall.objects.filter(conversation__isnull=False).only("pk", "conversation_id", "turn_id").iterator():
        conv = conversations[call.conversation_id]
        context = {"groups": [f"conversation.{conv['pk']}"], "refs": {"conversation_id": conv["pk"]}}
        if conv["model"]:
            context["model"] = conv["model"]
        if call.turn_id is not None:
            context["local_refs"] = {"turn_id": call.turn_id}
        call.caller, call.owner_id, call.context = f"{KEY_PREFIX}{conv['pk']}", conv["owner_id"], context
        rows.append(call)
        if len(rows) >= BATCH:
            ToolCall.objects.bulk_update(rows, ["caller", "owner", "context"])
            rows = []
    ToolCall.objects.bulk_update(rows, ["caller", "owner", "context"])


def to_foreign_keys(apps, schema_editor):
    ToolCall = apps.get_model("tools", "ToolCall")
    Conversation, Turn = apps.get_model("chat", "Conversation"), apps.get_model("chat", "Turn")
    conversations = set(Conversation.objects.values_list("pk", flat=True))
    turns = set(Turn.objects.values_list("pk", flat=True))
    rows = []
    for call in ToolCall.objects.filter(caller__startswith=KEY_PREFIX).only("pk", "caller", "context").iterator():
        call.conversation_id = int(call.caller[len(KEY_PREFIX):])
        if call.conversation_id not in conversations:  # cannot be (its calls go with it), but a key is no constraint
            continue
        turn_id = ((call.context or {}).get("local_refs") or {}).get("turn_id")
        call.turn_id = turn_id if turn_id in turns else None
        rows.append(call)
        if len(rows) >= BATCH:
            ToolCall.objects.bulk_update(rows, ["conversation", "turn"])
            rows = []
    ToolCall.objects.bulk_update(rows, ["conversation", "turn"])


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0009_conversation_shared'),
        ('tools', '0016_caller_context'),
    ]
    run_before = [
        ('tools', '0017_drop_chat_links'),
    ]

    operations = [
        migrations.RunPython(to_callers, to_foreign_keys),
    ]
