"""`field__in=<a long list>` on PostgreSQL as `field = ANY(%s)`: one array parameter, not one per value.

Why: parameters are bound on the server (inspector/settings.py), and PostgreSQL takes at most
65,535 of them a statement. Django writes `IN (%s, %s, …)`, one parameter per value, and its
delete collector joins its batches into one statement (`UPDATE … WHERE turn_id IN (…) OR turn_id
IN (…)` for a SET_NULL), so batching alone cannot keep a big delete under the limit. Lists up to
ANY_FROM values keep Django's SQL; other databases are not touched (`as_postgresql` only).
"""

from __future__ import annotations

from django.core.exceptions import EmptyResultSet
from django.db.models import Field, ForeignObject
from django.db.models.expressions import ColPairs
from django.db.models.fields.related_lookups import RelatedIn
from django.db.models.lookups import In

ANY_FROM = 1000  # values in an `__in` list from which it is sent as one array


class _AsArray:
    def as_postgresql(self, compiler, connection):
        if not self.rhs_is_direct_value() or isinstance(self.lhs, ColPairs) or len(self.rhs) <= ANY_FROM:
            return self.as_sql(compiler, connection)
        try:
            values = list(dict.fromkeys(v for v in self.rhs if v is not None))
        except TypeError:  # unhashable values: Django's own SQL
            return self.as_sql(compiler, connection)
        if not values:
            raise EmptyResultSet
        sqls, params = self.batch_process_rhs(compiler, connection, values)
        if any(sql != "%s" for sql in sqls) or len(params) != len(values):  # expressions among the values
            return self.as_sql(compiler, connection)
        db_type = self.lhs.output_field.cast_db_type(connection)
        if not db_type:  # a field with no column type of its own
            return self.as_sql(compiler, connection)
        lhs_sql, lhs_params = self.process_lhs(compiler, connection)
        return f"{lhs_sql} = ANY(%s::{db_type}[])", (*lhs_params, list(params))


class ArrayIn(_AsArray, In):
    pass


class ArrayRelatedIn(_AsArray, RelatedIn):
    pass


def install() -> None:
    """Replace the `in` lookup of every field and relation (only its PostgreSQL SQL differs)."""
    Field.register_lookup(ArrayIn)
    ForeignObject.register_lookup(ArrayRelatedIn)
