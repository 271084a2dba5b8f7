"""Signals the tools app sends, so apps above it (review) can follow a server without tools importing them."""

from django.dispatch import Signal

# Sent by tools/runtime/remote.py `sync_tools` in the worker (or a management command) once a server's
# tools and self-description were listed and stored. Arguments: `server` (the row, before the
# update), `info` (server_info, protocol_version, capabilities, instructions, tools: the raw
# wire dicts), `user_id` (whose refresh, or None). Receivers must not raise: a refresh that
# listed fine stays a success (review/receivers.py logs its own failures).
server_listed = Signal()
