"""The eval pages and API without workers: login required, own-or-shared access, the suite and
case forms, export/import through the page and the API, and no secret in any answer."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group

from evals.models import Case, Run, Suite
from tools.models import Server

pytestmark = pytest.mark.django_db


@pytest.fixture
def suite(user):
    server = Server.objects.create(name="basic", transport="streamable_http", url="http://127.0.0.1:9/mcp", owner=user)
    suite = Suite.objects.create(owner=user, name="Mine", judge_model="openai/judge", judge_api_key="sk-judge-secret-value")
    suite.servers.set([server])
    Case.objects.create(suite=suite, position=1, name="sum", prompts=["2+3?"], expectations={"must_call": [{"tool": "add"}]})
    return suite


def test_login_required_everywhere(client, suite):
    for url in ["/evals/", f"/evals/{suite.pk}/", "/evals/side-by-side/", f"/evals/{suite.pk}/export/", "/evals/new/"]:
        resp = client.get(url)
        assert resp.status_code == 302 and resp["Location"].startswith("/login/"), url
    assert client.get("/api/evals/suites/").status_code == 401


def test_suite_and_case_forms_export_import_and_no_secret(client, user, suite):
    client.force_login(user)
    for url in ["/evals/", f"/evals/{suite.pk}/", f"/evals/{suite.pk}/edit/", f"/evals/cases/{suite.cases.get().pk}/",
                f"/evals/{suite.pk}/cases/new/", "/evals/side-by-side/", "/evals/new/"]:
        resp = client.get(url)
        assert resp.status_code == 200, url
        assert b"sk-judge-secret-value" not in resp.content, url
    # Editing keeps the stored judge key when the field is left empty.
    resp = client.post(f"/evals/{suite.pk}/edit/", {"name": "Renamed", "judge_model": "openai/judge", "servers": [suite.servers.get().pk]})
    assert resp.status_code == 302
    suite.refresh_from_db()
    assert suite.name == "Renamed" and suite.judge_api_key == "sk-judge-secret-value"
    # A new case from the form.
    resp = client.post(f"/evals/{suite.pk}/cases/new/", {"name": "two turns", "threshold": "1", "prompts_text": "a\n---\nb",
                                                         "expectations_text": '{"max_steps": 2}'})
    assert resp.status_code == 302 and list(suite.cases.order_by("position").values_list("name", "prompts")) == [
        ("sum", ["2+3?"]), ("two turns", ["a", "b"])]

    exported = client.get(f"/evals/{suite.pk}/export/")
    assert exported["Content-Disposition"].startswith("attachment")
    assert b"sk-judge-secret-value" not in exported.content
    data = json.loads(exported.content)
    assert client.get(f"/api/evals/suites/{suite.pk}/export/").json() == data
    resp = client.post("/api/evals/suites/import/", data, content_type="application/json")
    assert resp.status_code == 201 and resp.json()["cases"] == 2
    bad = client.post("/api/evals/suites/import/", {"format": "x", "version": 1}, content_type="application/json")
    assert bad.status_code == 400 and "not an eval suite" in bad.json()["error"]
    # A run with a bad model list is refused with the reason.
    resp = client.post(f"/api/evals/suites/{suite.pk}/runs/", {"models": ["openai/x", "openai/x"]}, content_type="application/json")
    assert resp.status_code == 400 and "named twice" in resp.json()["error"]
    assert Run.objects.count() == 0


def test_others_see_only_shared_suites_and_viewers_change_nothing(client, suite, other_user, django_user_model):
    client.force_login(other_user)
    assert client.get(f"/evals/{suite.pk}/").status_code == 404
    assert client.get(f"/evals/{suite.pk}/export/").status_code == 404
    assert client.post(f"/api/evals/suites/{suite.pk}/runs/", {"models": ["openai/x"]}, content_type="application/json").status_code == 404
    Suite.objects.filter(pk=suite.pk).update(shared=True)
    assert client.get(f"/evals/{suite.pk}/").status_code == 200
    assert client.get(f"/evals/{suite.pk}/edit/").status_code == 404
    assert client.post(f"/evals/cases/{suite.cases.get().pk}/delete/").status_code == 404

    viewer = django_user_model.objects.create_user("vera", password="vera-pass-123")
    viewer.groups.add(Group.objects.get_or_create(name="viewer")[0])
    client.force_login(viewer)
    assert client.get(f"/evals/{suite.pk}/").status_code == 200
    assert b"run-form" not in client.get(f"/evals/{suite.pk}/").content
    assert client.post(f"/api/evals/suites/{suite.pk}/runs/", {"models": ["openai/x"]}, content_type="application/json").status_code == 403
    assert client.post("/evals/new/", {"name": "x"}).status_code == 403
