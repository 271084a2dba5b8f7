"""Model fields whose values are encrypted at rest with Fernet (the `cryptography` package).

Keys come from FIELD_ENCRYPTION_KEY (comma-separated for rotation: the first encrypts,
all decrypt). Values are decrypted only in Python; never render them to a browser.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import models


@lru_cache(maxsize=1)
def _fernet() -> MultiFernet:
    return MultiFernet([Fernet(k.encode()) for k in settings.FIELD_ENCRYPTION_KEYS])


def encrypt(text: str) -> str:
    return _fernet().encrypt(text.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise ValueError("Cannot decrypt a stored secret: FIELD_ENCRYPTION_KEY changed?") from exc


class EncryptedTextField(models.TextField):
    """A string stored encrypted; empty stays empty so "not set" is visible without decrypting."""

    def from_db_value(self, value, expression, connection):
        if value in (None, ""):
            return value
        return decrypt(value)

    def get_prep_value(self, value):
        if value in (None, ""):
            return value
        return encrypt(str(value))


class EncryptedJSONField(models.TextField):
    """A JSON value (e.g. a dict of env vars or headers) stored encrypted as one token."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("default", dict)
        kwargs.setdefault("blank", True)
        super().__init__(*args, **kwargs)

    def from_db_value(self, value, expression, connection) -> Any:
        if value in (None, ""):
            return {}
        return json.loads(decrypt(value))

    def to_python(self, value):
        if isinstance(value, str):
            try:
                return json.loads(decrypt(value))
            except ValueError:
                return json.loads(value)
        return value

    def get_prep_value(self, value):
        if value is None:
            value = {}
        return encrypt(json.dumps(value, sort_keys=True))
