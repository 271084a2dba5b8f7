"""The Celery application. Configuration lives in settings under the CELERY_ prefix."""

import os
import threading

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
# Celery's Django fix-up runs every system check when a worker starts, importing the whole URL
# configuration (with litellm at the top of chat/llm.py that was ~3 s; now ~0.06 s, measured). They
# run once per start, in `manage.py prepare`, before any worker, and a worker has nothing to add to
# them. Set CELERY_SKIP_CHECKS= (empty) to run them.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

app = Celery("inspector")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def warm_up_token_counting(**kwargs) -> None:
    """Import litellm and load its tokenizer in the background once the worker is ready.

    Every tool call counts tokens with litellm (tools/tokens.py), and the first count in a process
    costs ~3.8 s of CPU (the import, then the tokenizer). Nothing imports litellm at start any more,
    so the worker answers pings seconds sooner (bench/cold_start.py); without this, the first call
    after a start would pay those seconds instead.
    """

    def count_once() -> None:
        from tools import tokens

        tokens.count("warm-up")

    threading.Thread(target=count_once, name="warm-up-token-counting", daemon=True).start()
