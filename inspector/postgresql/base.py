"""Django's PostgreSQL backend, with batches that fit in one statement's parameters.

Why: the app binds parameters on the server (`server_side_binding`, inspector/settings.py), and
PostgreSQL takes at most 65,535 parameters a statement. Django's PostgreSQL backend batches
without a limit (it was written for parameters bound on the client). Here each batch Django sizes
with `bulk_batch_size` (`bulk_create`, `bulk_update`, the delete collector's batches) stays under
the limit. A long `__in` list is one array parameter instead (inspector/postgresql/lookups.py):
the collector joins its batches into one statement, so batching alone cannot keep a big delete
under the limit.
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
