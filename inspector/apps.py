from django.apps import AppConfig


class InspectorConfig(AppConfig):
    name = "inspector"
    verbose_name = "Inspector"

    def ready(self) -> None:
        # Before the first database connection: its adapters are copied from psycopg's global ones.
        from inspector import pg_nul
        from inspector.postgresql import lookups

        pg_nul.install()
        # `__in` a long list: one array parameter on PostgreSQL (65,535 parameters a statement at most).
        lookups.install()
