"""Move passwords and tokens out of server URLs into the encrypted `url_secrets` field."""

from django.db import migrations, models

import inspector.encrypted
from tools.mcp import url_secrets


def encrypt_url_secrets(apps, schema_editor):
    """Historical models have no custom save(): split every stored URL here, row by row."""
    Server = apps.get_model("tools", "Server")
    for server in Server.objects.exclude(url="").only("pk", "url", "url_secrets"):
        try:
            masked, secrets = url_secrets.resolve(server.url, server.url_secrets, strict=False)
        except url_secrets.UrlSecretError:
            continue  # not a URL anyone could connect to; left for its owner to fix
        if masked != server.url or secrets != server.url_secrets:
            server.url, server.url_secrets = masked, secrets
            server.save(update_fields=["url", "url_secrets"])


def restore_clear_urls(apps, schema_editor):
    """Going back: the column holds the whole URL again, as before this migration."""
    Server = apps.get_model("tools", "Server")
    for server in Server.objects.exclude(url="").only("pk", "url", "url_secrets"):
        if server.url_secrets:
            server.url = url_secrets.reveal(server.url, server.url_secrets)
            server.save(update_fields=["url"])


class Migration(migrations.Migration):

    dependencies = [
        ("tools", "0003_keep_calls_of_deleted_servers"),
    ]

    operations = [
        migrations.AddField(
            model_name="server",
            name="url_secrets",
            field=inspector.encrypted.EncryptedJSONField(
                blank=True, default=dict, help_text="The URL's password and secret query values (encrypted)."
            ),
        ),
        migrations.AlterField(
            model_name="server",
            name="url",
            field=models.URLField(
                blank=True,
                help_text="A password or token in the URL (user:password@, ?token=…) is encrypted and shown masked; "
                "keep the mask to keep it.",
                max_length=1000,
                verbose_name="URL",
            ),
        ),
        migrations.RunPython(encrypt_url_secrets, restore_clear_urls),
    ]
