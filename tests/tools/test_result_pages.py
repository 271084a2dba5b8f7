"""Pages that show a full result show a bounded preview of a big one, its size and a streamed
download (issue 25.6): the admin's change page of a 40 MB result was a 42 MB HTML page and cost
daphne +240 MB (a structuredContent: 115 MB and +960 MB), bench/big_results.py."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from tests.helpers import login_page, refresh_tools, run_call
from tools.runtime import stored_result
from tools.models import ToolResult

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker")]

# The admin's own page around the preview (header, fields, projection), with room to spare.
PAGE_OVERHEAD = 128 * 1024


def test_the_admin_page_of_a_big_result_shows_a_preview_and_downloads_it_whole(browser, live_app, basic_server,
                                                                                admin_user, screenshots):
    refresh_tools(basic_server)
    big = run_call(basic_server, "big_text", {"megabytes": 6})
    small = run_call(basic_server, "big_text", {"megabytes": 0.01})
    assert big.status == small.status == "succeeded", (big.error, small.error)
    full = ToolResult.objects.only("size_bytes").get(pk=big.pk)
    assert full.size_bytes > 6 * 1024 * 1024

    page = login_page(browser, live_app, "root", "root-pass-123")
    response = page.goto(f"{live_app.url}/admin/tools/toolcall/{big.pk}/change/")
    assert response.status == 200
    html = response.body()
    limit = settings.RESULT_PREVIEW_BYTES
    assert len(html) < limit + PAGE_OVERHEAD, len(html)
    note = page.locator("#full-preview-note").inner_text().replace("\xa0", " ")  # filesizeformat's
    assert "Showing the first 256.0 KB of 6.0 MB" in note, note
    preview = page.locator("#full-json").text_content().rstrip("\n")  # admin-toolcall.js ends each line so
    stored_text = stored_result.open_stored(big.pk).whole().decode()  # SQLite's text as sent, PostgreSQL's jsonb text
    assert stored_text.startswith(preview) and "0123456789abcdef" * 1000 in preview
    assert limit - 64 < len(preview) <= limit  # its first bytes, as stored (ASCII here)
    download = page.locator("#full-download")
    assert download.get_attribute("href") == f"/admin/tools/toolcall/{big.pk}/result/"
    page.locator("#full-json").scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "admin-big-result-preview.png"))

    # The download is the stored text, byte for byte, streamed with its length and as a file.
    answer = page.request.get(f"{live_app.url}{download.get_attribute('href')}")
    assert answer.status == 200
    # size_bytes counts the compact text; PostgreSQL's jsonb text (what it stores and sends) is longer.
    assert answer.headers["content-length"] == str(len(stored_text.encode()))
    assert answer.headers["content-disposition"] == f'attachment; filename="tool-call-{big.pk}-result.json"'
    body = answer.body()
    stored = stored_result.open_stored(big.pk)
    assert body == stored.whole()
    assert json.loads(body)["content"][0]["text"] == "0123456789abcdef" * (6 * 1024 * 1024 // 16)

    # A small result is shown whole, indented, with the same download and no preview note.
    page.goto(f"{live_app.url}/admin/tools/toolcall/{small.pk}/change/")
    assert "Showing the first" not in page.locator("#full-preview-note").inner_text()
    assert json.loads(page.locator("#full-json").inner_text()) == ToolResult.objects.get(pk=small.pk).raw
    assert '\n  "content": [' in page.locator("#full-json").inner_text()
    assert page.locator("#full-download").get_attribute("href") == f"/admin/tools/toolcall/{small.pk}/result/"
    page.context.close()


def test_only_those_who_may_see_a_call_in_the_admin_download_its_result(browser, live_app, basic_server, staff_user):
    """A staff member without the tool call's view permission gets no result (the admin's own check)."""
    refresh_tools(basic_server)
    call = run_call(basic_server, "big_text", {"megabytes": 0.01})
    page = login_page(browser, live_app, "stella", "stella-pass-123")
    answer = page.request.get(f"{live_app.url}/admin/tools/toolcall/{call.pk}/result/")
    assert answer.status == 403
    page.context.close()
