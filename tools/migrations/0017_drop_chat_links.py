"""ToolCall without foreign keys into chat. No dependency on chat: chat's copy migration
(0010_tool_call_callers) says `run_before` this one, so the data is copied first."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('tools', '0016_caller_context'),
    ]

    operations = [
        migrations.RemoveField(model_name='toolcall', name='conversation'),
        migrations.RemoveField(model_name='toolcall', name='turn'),
    ]
