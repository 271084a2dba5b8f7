"""A model's columns in a hand-written SELECT, and the model instances built from its rows.

For the few queries of the hot path written as SQL through Django's connection (issue 31.3:
tools/call_sql.py, the API token's lookup in inspector/models.py): compiling the ORM's version of
each on every request cost more than running it. The instances come out as the ORM makes them:
each column goes through the converters SQLCompiler.get_converters gives it (JSON decoded,
datetimes made aware, encrypted fields decrypted), then `Model.from_db`.
"""

from __future__ import annotations

from django.db import connection
from django.db.models import Model


class Columns:
    """Some concrete columns of one model in a SELECT: their SQL, and the instance built from them
    (fields left out are deferred, loaded on first access as with `.only()`). Made once per process
    by a query's builder: the converters are the database backend's, the same for all its connections."""

    def __init__(self, model: type[Model], alias: str, keep=lambda field: True) -> None:
        self.model = model
        self.fields = [f for f in model._meta.concrete_fields if f.primary_key or keep(f)]
        self.attnames = [f.attname for f in self.fields]
        self.pk_index = next(i for i, f in enumerate(self.fields) if f.primary_key)
        q = connection.ops.quote_name
        self.sql = ", ".join(f"{alias}.{q(f.column)}" for f in self.fields)
        self.converters = []  # what SQLCompiler.get_converters gives the ORM for the same columns
        for field in self.fields:
            col = field.get_col(alias)
            self.converters.append((connection.ops.get_db_converters(col) + col.get_db_converters(connection), col))

    def __len__(self) -> int:
        return len(self.fields)

    def build(self, values) -> Model:
        converted = []
        for value, (converters, col) in zip(values, self.converters):
            for convert in converters:
                value = convert(value, col, connection)
            converted.append(value)
        return self.model.from_db(connection.alias, self.attnames, converted)

    def build_or_none(self, values) -> Model | None:
        """None for the columns of a LEFT JOIN that matched no row (a NULL primary key)."""
        return None if values[self.pk_index] is None else self.build(values)
