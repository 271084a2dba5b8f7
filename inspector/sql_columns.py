"""A model's columns in hand-written SQL: the instances built from a SELECT's rows, and the
INSERT of a new instance.

For the few statements of the hot path written as SQL through Django's connection (issue 31.3:
tools/call_sql.py, the worker's load and claim, the API token's lookup in inspector/models.py):
compiling the ORM's version of each on every call cost more than running it. The instances come
out as the ORM makes them: each column goes through the converters SQLCompiler.get_converters
gives it (JSON decoded, datetimes made aware, encrypted fields decrypted), then `Model.from_db`;
an insert sends each field's value as `Model.save` would (`pre_save`, then `get_db_prep_save`).
"""

from __future__ import annotations

import functools

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


@functools.cache
def _insert_sql(model: type[Model], numbered: bool = False) -> tuple[list, str, str]:
    """The fields an INSERT of `model` writes, its head and its tail: all local columns, or with
    `numbered` all but the primary key, which the database numbers and RETURNING gives back."""
    fields = [f for f in model._meta.local_concrete_fields if not (numbered and f.primary_key)]
    q = connection.ops.quote_name
    columns = ", ".join(q(f.column) for f in fields)
    tail = f" RETURNING {q(model._meta.pk.column)}" if numbered else ""
    return fields, f"INSERT INTO {q(model._meta.db_table)} ({columns}) VALUES ", tail


def _row(obj: Model, fields: list, params: list) -> str:
    """The VALUES row of `obj` (its parameters appended to `params`), each value as `Model.save`
    sends it (`pre_save`, then `get_db_prep_save`); an expression that needs no compiler (such as
    tools/runtime/stored_result.py `JSONText`) as its own SQL."""
    placeholders = []
    for field in fields:
        value = field.get_db_prep_save(field.pre_save(obj, True), connection)
        if hasattr(value, "as_sql"):
            sql, value_params = getattr(value, f"as_{connection.vendor}", value.as_sql)(None, connection)
            placeholders.append(sql)
            params.extend(value_params)
        else:
            placeholders.append("%s")
            params.append(value)
    return f"({', '.join(placeholders)})"


def _inserted(obj: Model) -> None:
    obj._state.adding = False
    obj._state.db = connection.alias


def insert(obj: Model) -> None:
    """Insert a new instance in one INSERT built once per model, for the hot path's rows (a new
    tool call, its full result, its projection): `Model.save` compiled its INSERT on every call
    (py-spy: ~13% of daphne's Python time per `POST …/call/`).

    Only for a model whose primary key is set before the insert (a UUID default, a one-to-one
    key) and whose values are plain values or expressions that need no compiler: no
    `db_default`, no F(). It skips what `save` does beyond the INSERT: the model's own `save()`,
    signals, parent models."""
    if obj.pk is None:
        raise ValueError(f"insert() needs the primary key of a new {type(obj).__name__} set beforehand")
    fields, head, _ = _insert_sql(type(obj))
    params: list = []
    with connection.cursor() as cursor:
        cursor.execute(head + _row(obj, fields, params), params)
    _inserted(obj)


def insert_numbered(objs: list[Model]) -> None:
    """Insert new instances of one model whose primary key the database numbers, in one
    `INSERT … VALUES (…), (…) RETURNING` (SQLite ≥ 3.35 and PostgreSQL), each instance getting its
    key: `bulk_create` compiled that INSERT on every batch of the JSON-RPC log (two frames a call).
    Keys numbered by one INSERT rise in the order of its VALUES; RETURNING's own row order is not
    promised (SQLite), so they are sorted first. The same limits as `insert`."""
    if not objs:
        return
    fields, head, tail = _insert_sql(type(objs[0]), numbered=True)
    params: list = []
    rows = ", ".join(_row(obj, fields, params) for obj in objs)
    with connection.cursor() as cursor:
        cursor.execute(head + rows + tail, params)
        keys = sorted(key for (key,) in cursor.fetchall())
    for obj, key in zip(objs, keys, strict=True):
        obj.pk = key
        _inserted(obj)
