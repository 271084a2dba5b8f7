"""Django's PostgreSQL backend, with batches that fit in one statement's parameters.

Why: the app binds parameters on the server (`server_side_binding`, inspector/settings.py), and
PostgreSQL takes at most 65,535 parameters a statement. Django's PostgreSQL backend batches
without a limit (it was written for parameters bound on the client), so deleting an imported
conversation with 70,000 turns built one `UPDATE … WHERE turn_id IN (70,000 parameters)` and
failed. Here each batch Django makes (cascading deletes, `bulk_create`, `bulk_update`) stays under
the limit. A lookup the app builds itself (`pk__in=` a Python list) must stay under it too: pass
a subquery instead of a long list.
"""

from __future__ import annotations

from django.db.backends.postgresql import base, operations

MAX_QUERY_PARAMS = 65_535


class DatabaseOperations(operations.DatabaseOperations):
    def bulk_batch_size(self, fields, objs) -> int:
        """As many objects as fit in one statement's parameters (one per object and field)."""
        per_object = max(len(fields), 1)
        return max(min(len(objs), MAX_QUERY_PARAMS // per_object), 1)


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
