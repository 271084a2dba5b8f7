"""An LLM judge: a model (through litellm, like any other) scores an answer against a rubric.

Why a plain completion and a JSON reply: the judge must work with any provider litellm speaks,
including local ones without tool calling or response formats. The judge sees the user's
prompts, the tool calls with the projections the model saw (never a full result) and the final
answer; it never sees a key or a server's settings.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings

from chat.models import ProviderKey
from evals.checks import Judge, Observation
from evals.models import Suite

INSTRUCTIONS = (
    "You grade an AI assistant's answer against a rubric. Reply with one JSON object only: "
    '{"score": <a number from 0 to 1>, "reason": "<one sentence>"}.'
)
PROJECTION_CHARS = 2000


def credentials(suite: Suite, user) -> dict[str, str]:
    """The judge's api_base/api_key: the suite's own key, else the runner's provider key; a
    custom api_base never gets the deployment's environment key (as in chat/llm.py)."""
    kwargs: dict[str, str] = {}
    if suite.judge_api_base:
        kwargs["api_base"] = suite.judge_api_base
    key = suite.judge_api_key
    if not key and "/" in suite.judge_model:
        saved = ProviderKey.objects.filter(user=user, provider=suite.judge_model.split("/", 1)[0]).first()
        key = saved.api_key if saved else ""
    if key:
        kwargs["api_key"] = key
    elif suite.judge_api_base:
        kwargs["api_key"] = "no-key"
    return kwargs


def transcript(prompts: list[str], seen: Observation) -> str:
    lines = [f"User: {p}" for p in prompts]
    for call in seen.calls:
        lines.append(f"Tool call {call.server}/{call.tool} {json.dumps(call.arguments)[:500]}")
        if call.projection:
            lines.append(f"Tool result (as the assistant saw it): {call.projection[:PROJECTION_CHARS]}")
    lines.append(f"Assistant's final answer: {seen.answer}")
    return "\n".join(lines)


def parse_verdict(text: str) -> tuple[float, str]:
    """The score and reason from the judge's reply (the first JSON object in it)."""
    match = re.search(r"\{.*\}", text, re.S)
    if not match:
        raise ValueError(f"the judge did not answer with JSON: {text[:200]!r}")
    data = json.loads(match.group(0))
    score = float(data["score"])
    if not 0 <= score <= 1:
        raise ValueError(f"the judge's score {score} is not between 0 and 1")
    return score, str(data.get("reason", ""))[:1000]


def grade(suite: Suite, user, rule: Judge, prompts: list[str], seen: Observation) -> dict[str, Any]:
    """Ask the judge; {"score", "reason", "threshold", "passed", "model"} or {"error", "passed": False}."""
    from chat.llm import describe_provider_error, load_litellm

    out: dict[str, Any] = {"model": suite.judge_model, "threshold": rule.threshold, "rubric": rule.rubric}
    if not suite.judge_model:
        return {**out, "passed": False, "error": "The case has a judge rubric but the suite has no judge model."}
    litellm = load_litellm()
    try:
        reply = litellm.completion(
            model=suite.judge_model, timeout=settings.LLM_TIMEOUT, temperature=0,
            messages=[{"role": "system", "content": INSTRUCTIONS},
                      {"role": "user", "content": f"Rubric: {rule.rubric}\n\n{transcript(prompts, seen)}"}],
            **credentials(suite, user),
        )
        text = reply.choices[0].message.content or ""
    except Exception as exc:  # noqa: BLE001 - a provider error is the judge's verdict: could not grade
        return {**out, "passed": False, "error": describe_provider_error(exc)}
    try:
        score, reason = parse_verdict(text)
    except (ValueError, KeyError, TypeError) as exc:
        return {**out, "passed": False, "error": str(exc)}
    return {**out, "score": score, "reason": reason, "passed": score >= rule.threshold}
