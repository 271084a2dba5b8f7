"""Completions (issue 17.4): suggestions for prompt arguments and resource-template variables,
from the server's `completion/complete`, through a real worker; quiet for servers without them."""

from __future__ import annotations

import pytest

from tests.helpers import login_page, refresh_tools, wait_for
from tools.models import RpcFrame

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]


def complete(api, server, ref, argument, value="", context=None):
    return api.post(f"/api/servers/{server.pk}/complete/",
                    {"ref": ref, "argument": argument, "value": value, "context": context or {}})


def test_prompt_arguments_and_template_variables_get_the_servers_suggestions(api, basic_server):
    refresh_tools(basic_server)
    prompt = {"type": "ref/prompt", "name": "greet"}
    answer = complete(api, basic_server, prompt, "style", "f")
    assert answer.status_code == 200, answer.content
    assert answer.json() == {"supported": True, "values": ["friendly", "formal", "funny"], "total": 3, "hasMore": False}
    # The arguments already filled in reach the server as context.
    with_name = complete(api, basic_server, prompt, "style", "", {"name": "Ada"}).json()["values"]
    assert "ada-style" in with_name and "ada-style" not in complete(api, basic_server, prompt, "style", "").json()["values"]
    template = {"type": "ref/resource", "uri": "greeting://{name}"}
    assert complete(api, basic_server, template, "name", "G").json()["values"] == ["Grace", "Guido"]
    sent = RpcFrame.objects.filter(server=basic_server, method="completion/complete", direction="out")
    # The worker writes its log in batches, after the answers: wait for the last one (seen 3 of 4 in CI).
    wait_for(lambda: sent.count() >= 4, timeout=10, message="the four requests in the frame log")
    assert sent.count() == 4 and sent.filter(payload__params__context__arguments__name="Ada").count() == 1


def test_a_server_without_completions_is_not_asked(api, app_server):
    refresh_tools(app_server)
    assert "completions" not in app_server.__class__.objects.get(pk=app_server.pk).capabilities
    answer = complete(api, app_server, {"type": "ref/prompt", "name": "anything"}, "x", "a")
    assert answer.status_code == 200 and answer.json()["supported"] is False and answer.json()["values"] == []
    assert not RpcFrame.objects.filter(server=app_server, method="completion/complete").exists()


def test_bad_bodies_and_other_peoples_servers_get_clear_answers(api, basic_server, client, other_user):
    bad = complete(api, basic_server, {"type": "ref/tool", "name": "x"}, "a")
    assert bad.status_code == 400 and "`ref.type`" in bad.json()["error"]
    nameless = complete(api, basic_server, {"type": "ref/prompt"}, "a")
    assert nameless.status_code == 400 and "needs the prompt's `name`" in nameless.json()["error"]
    client.force_login(other_user)
    assert client.post(f"/api/servers/{basic_server.pk}/complete/", {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": "style"},
                       content_type="application/json").status_code == 404


@pytest.mark.browser
def test_suggestions_appear_under_the_field_while_typing(browser, live_app, user, basic_server, screenshots):
    refresh_tools(basic_server)
    page = login_page(browser, live_app, "alice", "alice-pass-123")
    page.goto(f"{live_app.url}/servers/{basic_server.pk}/prompts/")
    form = page.locator("form.prompt-form[data-prompt=greet]")
    form.locator("input[name=arg_name]").fill("Ada")
    style = form.locator("input[name=arg_style]")
    style.click()
    style.press_sequentially("f")
    page.wait_for_selector("form.prompt-form[data-prompt=greet] input[name=arg_style][data-suggestions='3']", timeout=15000)
    options = page.locator(f"#{style.get_attribute('list')} option")
    assert [options.nth(i).get_attribute("value") for i in range(options.count())] == ["friendly", "formal", "funny"]
    style.fill("")
    style.press_sequentially("a")  # with the name filled in, the server offers a style made for Ada
    page.wait_for_selector("form.prompt-form[data-prompt=greet] input[name=arg_style][data-suggestions='1']", timeout=15000)
    assert options.first.get_attribute("value") == "ada-style"
    page.screenshot(path=str(screenshots / "prompt-completions.png"))
    page.goto(f"{live_app.url}/servers/{basic_server.pk}/resources/")
    variable = page.locator("form.template-form[data-template='greeting://{name}'] input[data-var=name]")
    variable.press_sequentially("Gu")
    page.wait_for_selector("form.template-form input[data-var=name][data-suggestions='1']", timeout=15000)
    assert page.locator(f"#{variable.get_attribute('list')} option").first.get_attribute("value") == "Guido"
    page.context.close()
