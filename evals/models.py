"""Eval suites, their cases, runs across models, and one row per attempt (a case, a model, a repeat).

Why rows and not a result blob: a run lives on the workers for minutes, each attempt is an ordinary
chat conversation that may outlive a worker, so the state a run needs to carry on (which attempt
runs, which turn it is on, what was judged) is in the database and any worker can pick it up
(evals/runs.py).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from inspector.encrypted import EncryptedTextField


class SuiteQuerySet(models.QuerySet):
    def visible_to(self, user) -> "SuiteQuerySet":
        """Like conversations: your own suites and those shared with the team."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(Q(owner=user) | Q(shared=True))


class Suite(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="eval_suites")
    shared = models.BooleanField("shared with the team", default=False)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    # The servers every case's conversation is given; a run uses the runner's server of the same name.
    servers = models.ManyToManyField("tools.Server", blank=True, related_name="eval_suites")
    system_prompt = models.TextField(blank=True)
    judge_model = models.CharField(max_length=200, blank=True, help_text="litellm model name of the LLM judge.")
    judge_api_base = models.URLField("judge API base", max_length=500, blank=True)
    judge_api_key = EncryptedTextField("judge API key", blank=True, help_text="Stored encrypted; never shown again.")
    # For a suite imported from a file: the file's SHA-256, so `manage.py evals run FILE` imports it once.
    imported_sha256 = models.CharField(max_length=64, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = SuiteQuerySet.as_manager()

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return self.name


class Case(models.Model):
    """A prompt (or a short script of user turns) and what a good answer does (evals/checks.py)."""

    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="cases")
    position = models.PositiveIntegerField(default=0)
    name = models.CharField(max_length=200)
    prompts = models.JSONField(default=list, help_text="The user turns, in order (strings).")
    expectations = models.JSONField(default=dict, blank=True, help_text="evals/checks.py Expectations.")
    tools = models.JSONField(default=list, blank=True,
                             help_text="The tools offered to the model (tool or server/tool names); empty: every tool of the suite's servers.")
    threshold = models.FloatField(default=1.0, help_text="Pass rate (0-1) of its attempts a model needs for the case to pass.")
    source_conversation = models.ForeignKey("chat.Conversation", null=True, blank=True, on_delete=models.SET_NULL,
                                            related_name="+", help_text="The stored conversation it was made from.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["suite", "position", "pk"]

    def __str__(self) -> str:
        return self.name


class Run(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        COMPLETED = "completed"
        CANCELLED = "cancelled"
        FAILED = "failed"

    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="runs")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="eval_runs")
    # [{"model": "openai/gpt-4o-mini", "api_base": ""}], in the order they are shown.
    model_specs = models.JSONField(default=list)
    api_key = EncryptedTextField("API key", blank=True, help_text="For every model of the run; else provider keys as in chat.")
    repeat = models.PositiveIntegerField(default=1)
    concurrency = models.PositiveIntegerField(default=4, help_text="Attempts running at once per provider, in this run.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING, db_index=True)
    cancel_requested = models.BooleanField(default=False)
    # The advance chain's token: a task holding an older one is a duplicate and does nothing (evals/runs.py).
    tick = models.PositiveIntegerField(default=0)
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Run {self.pk} of “{self.suite}” ({self.status})"


class Attempt(models.Model):
    """One case sent to one model once: its own stored conversation, then the checks' verdict."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        EVALUATING = "evaluating"
        PASSED = "passed"
        FAILED = "failed"
        ERROR = "error"  # could not run: the model or the turn failed
        CANCELLED = "cancelled"

    FINAL = (Status.PASSED, Status.FAILED, Status.ERROR, Status.CANCELLED)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="attempts")
    case = models.ForeignKey(Case, null=True, on_delete=models.SET_NULL, related_name="attempts")
    # The case as it was when the run started: editing a case later does not rewrite old runs.
    case_name = models.CharField(max_length=200)
    case_position = models.PositiveIntegerField(default=0)
    prompts = models.JSONField(default=list)
    expectations = models.JSONField(default=dict, blank=True)
    tools = models.JSONField(default=list, blank=True)
    threshold = models.FloatField(default=1.0)
    model = models.CharField(max_length=200)
    model_index = models.PositiveIntegerField(default=0, help_text="Its place in the run's models.")
    api_base = models.CharField(max_length=500, blank=True)
    provider = models.CharField(max_length=50, blank=True)
    repeat_index = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING, db_index=True)
    conversation = models.ForeignKey("chat.Conversation", null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="eval_attempts")
    turns_sent = models.PositiveIntegerField(default=0)
    checks = models.JSONField(default=list, blank=True)
    judge = models.JSONField(null=True, blank=True)
    answer = models.TextField(blank=True)
    steps = models.PositiveIntegerField(default=0)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    cost_usd = models.FloatField(null=True, blank=True, help_text="litellm's bundled price map; empty for an unpriced model.")
    latency_ms = models.FloatField(null=True, blank=True, help_text="From the first user message to the last turn's end.")
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["run", "case_position", "pk"]

    def __str__(self) -> str:
        return f"{self.case_name} · {self.model} #{self.repeat_index + 1} ({self.status})"
