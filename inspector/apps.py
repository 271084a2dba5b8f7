from django.apps import AppConfig


class InspectorConfig(AppConfig):
    name = "inspector"
    verbose_name = "Inspector"

    def ready(self) -> None:
        # Before the first database connection: its adapters are copied from psycopg's global ones.
        from inspector import pg_nul

        pg_nul.install()
