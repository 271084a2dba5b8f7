"""Signals tools sends to the apps above it, which connect to them in their AppConfig.ready.

Why signals: tools runs a call's life but what follows some of its steps belongs to the caller
(chat runs an approved sampling request on a model). Tools must not name its tasks.
"""

from django.dispatch import Signal

# A person approved a server's sampling/createMessage (`server_request`: the row, now
# `generating`): a receiver runs it on the model and stores the answer (chat/sampling.py). Sent
# after the row is saved; receivers should only queue work.
sampling_approved = Signal()
