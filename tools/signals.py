"""Signals tools sends to the apps above it, which connect to them in their AppConfig.ready.

Why signals: tools runs a call's life but what follows some of its steps belongs to the caller
(chat runs an approved sampling request on a model). Tools must not name its tasks.
"""

from django.dispatch import Signal

# A person approved a server's sampling/createMessage (`server_request`: the row, now
# `generating`): a receiver runs it on the model and stores the answer (chat/sampling.py). Sent
# after the row is saved; receivers should only queue work.
sampling_approved = Signal()

# Sent by tools/runtime/remote.py `sync_tools` (in the worker, or a management command) once a
# server's tools and self-description were listed and stored. Arguments: `server` (the row, before
# the update), `info` (server_info, protocol_version, capabilities, instructions, tools: the raw
# wire dicts), `user_id` (whose refresh, or None). Receivers must not raise: a refresh that listed
# fine stays a success (review/receivers.py records the server's surface and logs its own failures).
server_listed = Signal()
