"""Eval runs end to end: a real Celery worker runs every attempt as an ordinary chat turn against
the real basic MCP server (Streamable HTTP), the scripted LLM plays two models (one passes, one
fails), and a second scripted LLM, reached by litellm like any provider, is the judge."""

from __future__ import annotations

import pytest

from chat.models import Conversation, Turn
from evals.models import Attempt, Case, Run, Suite
from tests.fake_llm import FakeLLMServer
from tests.helpers import refresh_tools, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

PRICED, UNPRICED = "openai/gpt-4o-mini", "openai/test-model"
USAGE = {"usage": {"prompt_tokens": 100, "completion_tokens": 10}}


@pytest.fixture(scope="module")
def judge_server():
    server = FakeLLMServer().start()
    yield server
    server.stop()


@pytest.fixture
def judge_llm(judge_server):
    judge_server.reset()
    yield judge_server
    judge_server.reset()


def make_suite(user, server, judge_url: str = "") -> Suite:
    suite = Suite.objects.create(owner=user, name="Arithmetic", judge_model="openai/judge-model" if judge_url else "",
                                 judge_api_base=judge_url, judge_api_key="sk-judge-secret" if judge_url else "")
    suite.servers.set([server])
    Case.objects.create(suite=suite, position=1, name="sum", prompts=["What is 2+3?"], expectations={
        "must_call": [{"server": "basic", "tool": "add", "arguments": [{"path": "a", "op": "equal", "value": 2},
                                                                        {"path": "b", "op": "equal", "value": 3}]}],
        "answer_contains": ["5"], **({"judge": {"rubric": "Says the sum is 5.", "threshold": 0.5}} if judge_url else {})})
    Case.objects.create(suite=suite, position=2, name="no echo", prompts=["Say hi", "Again"], expectations={
        "must_not_call": [{"tool": "echo"}], "max_steps": 2, "answer_regex": ["(?i)hi"]})
    return suite


def finished(run_id: int, timeout: float = 90) -> Run:
    return wait_for(lambda: (r := Run.objects.get(pk=run_id)).status != Run.Status.RUNNING and r, timeout=timeout,
                    message="the eval run to end")


def test_run_across_two_models_some_pass_some_fail_with_a_judge(api, user, fake_llm, judge_llm, basic_server):
    refresh_tools(basic_server)
    suite = make_suite(user, basic_server, judge_llm.url)
    # One provider, one attempt at a time: the attempts take the script in order
    # (sum x priced, sum x unpriced, no echo x priced, no echo x unpriced).
    fake_llm.script([
        {"tool_calls": [{"name": "basic__add", "arguments": {"a": 2, "b": 3}}], **USAGE},
        {"text": "The sum is 5.", **USAGE},
        {"tool_calls": [{"name": "basic__add", "arguments": {"a": 2, "b": 4}}], **USAGE},
        {"text": "The sum is 6.", **USAGE},
        {"text": "Hi there!", **USAGE}, {"text": "Hi again.", **USAGE},
        {"tool_calls": [{"name": "basic__echo", "arguments": {"text": "hi"}}], **USAGE},
        {"text": "hi", **USAGE}, {"text": "Bye.", **USAGE},
    ])
    judge_llm.script([{"text": '{"score": 0.9, "reason": "It says 5."}'}, {"text": '{"score": 0.1, "reason": "Wrong sum."}'}])
    resp = api.post(f"/api/evals/suites/{suite.pk}/runs/", {"models": [PRICED, UNPRICED], "api_base": fake_llm.url,
                                                            "api_key": "sk-run-secret", "concurrency": 1})
    assert resp.status_code == 202, resp.json()
    run = finished(resp.json()["id"])
    assert run.status == Run.Status.COMPLETED
    got = {(a.case_name, a.model): a for a in run.attempts.all()}
    assert {k: a.status for k, a in got.items()} == {
        ("sum", PRICED): "passed", ("sum", UNPRICED): "failed", ("no echo", PRICED): "passed", ("no echo", UNPRICED): "failed"}

    bad_sum = got[("sum", UNPRICED)]
    failed = {c["check"]: c["detail"] for c in bad_sum.checks if not c["passed"]}
    assert failed == {"calls basic/add": "called, but b is 4, not 3", "answer contains “5”": "answer: 'The sum is 6.'"}
    assert bad_sum.judge["score"] == 0.1 and bad_sum.judge["passed"] is False
    assert got[("sum", PRICED)].judge == {"model": "openai/judge-model", "threshold": 0.5, "rubric": "Says the sum is 5.",
                                          "score": 0.9, "reason": "It says 5.", "passed": True}
    echo = {c["check"]: c for c in got[("no echo", UNPRICED)].checks}
    assert not echo["does not call echo"]["passed"] and echo["at most 2 steps"]["detail"] == "3 steps"
    assert echo["answer matches /(?i)hi/"]["detail"] == "answer: 'Bye.'"  # the final answer is the last turn's
    # Both user turns of the two-turn case were sent, each its own turn.
    assert Turn.objects.filter(conversation=got[("no echo", PRICED)].conversation).count() == 2

    # Figures: tokens from the stored usage, cost from litellm's price map (none for an unpriced model), latency.
    good = got[("sum", PRICED)]
    assert (good.tokens_in, good.tokens_out, good.steps) == (200, 20, 2)
    assert good.cost_usd == pytest.approx(200 * 0.15e-6 + 20 * 0.6e-6)
    assert bad_sum.cost_usd is None and good.latency_ms > 0

    summary = api.get(f"/api/evals/runs/{run.pk}/").json()["summary"]
    assert summary["verdict"] == "fail" and summary["below_threshold"] == 2
    assert {(c["case"], c["model"]): (c["passed"], c["attempts"], c["ok"]) for c in summary["cells"]} == {
        ("sum", PRICED): (1, 1, True), ("sum", UNPRICED): (0, 1, False),
        ("no echo", PRICED): (1, 1, True), ("no echo", UNPRICED): (0, 1, False)}

    # The judge was asked through litellm on its own endpoint, with the projection the model saw and the answer,
    # with the suite's key; the run's model key never went there.
    assert len(judge_llm.requests) == 2 and len(fake_llm.requests) == 9
    asked = judge_llm.requests[0]
    prompt = asked["body"]["messages"][-1]["content"]
    assert "Rubric: Says the sum is 5." in prompt and "basic/add" in prompt and "The sum is 5." in prompt
    assert asked["headers"].get("authorization") == "Bearer sk-judge-secret"
    assert all(r["headers"].get("authorization") == "Bearer sk-run-secret" for r in fake_llm.requests)

    # Every attempt is an ordinary stored conversation of the runner, open in the replay player.
    for a in got.values():
        assert a.conversation.owner == user
        assert api.client.get(f"/chat/{a.conversation_id}/replay/").status_code == 200
    page = api.client.get(f"/evals/runs/{run.pk}/")
    assert page.status_code == 200 and b"b is 4, not 3" in page.content and b"sk-run-secret" not in page.content


def test_a_case_in_one_click_from_a_stored_conversation(api, user, other_user, fake_llm, basic_server, client):
    from chat.tasks import begin_turn

    refresh_tools(basic_server)
    conversation = Conversation.objects.create(owner=user, model=UNPRICED, api_base=fake_llm.url, title="Adding up")
    conversation.servers.set([basic_server])
    fake_llm.script([{"tool_calls": [{"name": "basic__add", "arguments": {"a": 20, "b": 22}}]}, {"text": "42"}])
    begin_turn(conversation, "What is 20+22?")
    wait_for(lambda: Conversation.objects.get(pk=conversation.pk).status == "idle", timeout=40, message="the turn")

    resp = api.client.post(f"/evals/from-conversation/{conversation.pk}/")
    case = Case.objects.get()
    assert resp.status_code == 302 and resp["Location"] == f"/evals/cases/{case.pk}/"
    assert case.suite.owner == user and list(case.suite.servers.all()) == [basic_server]
    assert case.prompts == ["What is 20+22?"] and case.source_conversation == conversation
    assert case.expectations == {"must_call": [{"server": "basic", "tool": "add", "arguments": [
        {"path": "a", "op": "equal", "value": 20}, {"path": "b", "op": "equal", "value": 22}]}]}

    # Editable in the browser's form; a bad expectation is refused with the reason and nothing changes.
    form = {"name": "sum", "threshold": "0.5", "prompts_text": "What is 20+22?\n---\nAnd 1+1?",
            "expectations_text": '{"must_call": [{"tool": "add", "arguments": [{"path": "a", "op": "regex", "value": "("}]}]}'}
    resp = api.client.post(f"/evals/cases/{case.pk}/", form)
    assert resp.status_code == 200 and b"not a valid regular expression" in resp.content
    form["expectations_text"] = '{"must_call": [{"tool": "add"}], "answer_contains": ["42"]}'
    assert api.client.post(f"/evals/cases/{case.pk}/", form).status_code == 302
    case.refresh_from_db()
    assert case.prompts == ["What is 20+22?", "And 1+1?"] and case.threshold == 0.5
    assert case.expectations == {"must_call": [{"tool": "add"}], "answer_contains": ["42"]}

    # Someone else sees neither the suite nor the case until it is shared; then reads, never edits.
    client.force_login(other_user)
    assert client.get(f"/evals/{case.suite_id}/").status_code == 404
    assert client.get(f"/evals/cases/{case.pk}/").status_code == 404
    assert client.get("/api/evals/suites/").json() == {"suites": []}
    Suite.objects.filter(pk=case.suite_id).update(shared=True)
    assert client.get(f"/evals/{case.suite_id}/").status_code == 200
    assert client.get(f"/evals/cases/{case.pk}/").status_code == 404
    assert client.post(f"/evals/{case.suite_id}/delete/").status_code == 404
    # bob cannot make a case from alice's private conversation either.
    assert client.post(f"/evals/from-conversation/{conversation.pk}/").status_code == 404


def test_cancel_stops_running_turns_and_ends_the_run(api, user, fake_llm, basic_server):
    suite = make_suite(user, basic_server)
    fake_llm.script([{"text": "slow " * 40, "chunk_delay": 0.2, "times": None}])
    resp = api.post(f"/api/evals/suites/{suite.pk}/runs/", {"models": [UNPRICED], "api_base": fake_llm.url, "repeat": 3})
    run_id = resp.json()["id"]
    wait_for(lambda: Attempt.objects.filter(run_id=run_id, status="running").count() >= 2, timeout=30,
             message="attempts to start")
    resp = api.post(f"/api/evals/runs/{run_id}/cancel/")
    assert resp.status_code == 202
    run = finished(run_id, timeout=30)
    assert run.status == Run.Status.CANCELLED and run.summary["verdict"] == "error"
    assert set(run.attempts.values_list("status", flat=True)) == {"cancelled"}
    wait_for(lambda: not Turn.objects.filter(conversation__eval_attempts__run_id=run_id, status="running").exists(),
             timeout=20, message="the running turns to stop")
    assert api.post(f"/api/evals/runs/{run_id}/cancel/").status_code == 409


def test_a_case_offers_the_model_only_its_tools(api, user, fake_llm, basic_server):
    """A case that names tools offers only those (by tool or server/tool name); one that names none offers all."""
    refresh_tools(basic_server)
    suite = Suite.objects.create(owner=user, name="Subset")
    suite.servers.set([basic_server])
    Case.objects.create(suite=suite, position=1, name="only echo", prompts=["Say hi"], tools=["echo", "basic/add"],
                        expectations={"answer_contains": ["hi"]})
    Case.objects.create(suite=suite, position=2, name="everything", prompts=["Say hi"], expectations={"answer_contains": ["hi"]})
    fake_llm.script([{"text": "hi"}, {"text": "hi"}])
    resp = api.post(f"/api/evals/suites/{suite.pk}/runs/", {"models": [PRICED], "api_base": fake_llm.url, "api_key": "sk-x",
                                                            "concurrency": 1})
    assert resp.status_code == 202, resp.json()
    run = finished(resp.json()["id"])
    assert {a.case_name: a.status for a in run.attempts.all()} == {"only echo": "passed", "everything": "passed"}
    offered = [sorted(t["function"]["name"] for t in r["body"].get("tools") or []) for r in fake_llm.requests]
    assert offered[0] == ["basic__add", "basic__echo"]
    assert len(offered[1]) > 2 and {"basic__add", "basic__echo", "basic__slow"} <= set(offered[1])
    only = run.attempts.get(case_name="only echo")
    assert only.tools == ["echo", "basic/add"] and only.conversation.offered_tools == ["echo", "basic/add"]
