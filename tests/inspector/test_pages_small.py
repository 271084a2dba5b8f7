"""Small things a team notices: methods pages do not accept, the top bar on a phone, the admin
tool-call list on a laptop, and the link to a replay started from the admin."""

from __future__ import annotations

import pytest

from tests.helpers import login_page, refresh_tools, run_call, wait_for
from tools.models import ToolCall


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/", "/servers/", "/chat/", "/rpc-log/", "/rpc-log/export/", "/account/tokens/"])
def test_pages_without_a_form_refuse_post(client, user, path):
    client.force_login(user)
    assert client.get(path).status_code == 200
    response = client.post(path)
    assert response.status_code == 405
    assert response.headers["Allow"] == "GET"


@pytest.mark.django_db
def test_pages_with_a_form_still_take_post_and_refuse_others(client, user, basic_server):
    client.force_login(user)
    for path in ["/chat/new/", "/account/provider-keys/", "/servers/new/", f"/servers/{basic_server.pk}/edit/"]:
        assert client.post(path).status_code in (200, 302), path
        assert client.put(path).status_code == 405, path
    for path in [f"/servers/{basic_server.pk}/", f"/servers/{basic_server.pk}/resources/"]:
        assert client.post(path).status_code == 405, path


def topbar_is_tidy(page) -> dict:
    """Every link of the top bar lies inside the dark bar, and the bar's rows."""
    return page.evaluate("""() => {
      const bar = document.querySelector(".topbar").getBoundingClientRect();
      const outside = [...document.querySelectorAll(".topbar a, .topbar button")].filter(a => {
        const r = a.getBoundingClientRect();
        return r.top < bar.top || r.bottom > bar.bottom || r.left < bar.left || r.right > bar.right + 0.5;
      }).map(a => a.textContent.trim());
      const tops = new Set([...document.querySelectorAll(".topbar a, .topbar button")].map(a => Math.round(a.getBoundingClientRect().top)));
      return {outside, height: bar.height, rows: tops.size, scrollWidth: document.documentElement.scrollWidth};
    }""")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_top_bar_fits_narrow_and_wide_screens(browser, live_app, staff_user, screenshots):
    page = login_page(browser, live_app, "stella", "stella-pass-123")
    for width in (420, 1280):
        page.set_viewport_size({"width": width, "height": 700})
        page.goto(f"{live_app.url}/servers/")
        tidy = topbar_is_tidy(page)
        page.screenshot(path=str(screenshots / f"topbar-{width}.png"))
        assert tidy["outside"] == [], (width, tidy)
        assert tidy["scrollWidth"] <= width, (width, tidy)
        assert tidy["rows"] <= (2 if width == 420 else 1), (width, tidy)
    page.context.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("celery_worker")
def test_admin_tool_call_list_fits_and_replay_links_the_new_call(browser, live_app, admin_user, basic_server, screenshots):
    basic_server.owner = admin_user
    basic_server.save()
    refresh_tools(basic_server)
    original = run_call(basic_server, "echo", {"text": "a fairly long argument to replay " * 3}, user=admin_user)
    run_call(basic_server, "add", {"a": 1, "b": 2}, user=admin_user)
    page = login_page(browser, live_app, "root", "root-pass-123")
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{live_app.url}/admin/tools/toolcall/")
    page.wait_for_selector("#result_list")
    page.screenshot(path=str(screenshots / "admin-toolcalls-1400.png"))
    fit = page.evaluate("""() => ({page: document.documentElement.scrollWidth,
        list: document.querySelector("#result_list").getBoundingClientRect().right,
        filter: document.querySelector("#changelist-filter").getBoundingClientRect().left})""")
    assert fit["page"] <= 1400, fit
    assert fit["list"] <= fit["filter"] + 1, fit  # the table does not run under the filter column

    # Replay from the admin: the message links to the new call's change page.
    page.check(f"input[name=_selected_action][value='{original.pk}']")
    page.select_option("select[name=action]", "replay")
    page.click("button[name=index]")
    link = page.wait_for_selector(".messagelist a")
    replay = wait_for(lambda: ToolCall.objects.filter(replay_of=original).first(), message="the replay row")
    assert link.get_attribute("href") == f"/admin/tools/toolcall/{replay.pk}/change/"
    page.screenshot(path=str(screenshots / "admin-replay-message.png"))
    link.click()
    page.wait_for_selector("#full-json, .evidence")
    assert str(replay.pk) in page.locator("#content").inner_text()
    wait_for(lambda: ToolCall.objects.get(pk=replay.pk).is_final, message="the replay to finish")
    page.context.close()
