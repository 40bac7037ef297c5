"""The dashboard at a phone's width, with the keyboard alone, and in light and dark."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.dashboard.conftest import WAIT_MS, Dashboard, log_in

from playwright.sync_api import expect  # isort: skip (importorskip in conftest first)

pytestmark = [
    pytest.mark.mqttq_only,  # the dashboard is mqttq's own
    pytest.mark.xdist_group("browser"),  # one chromium for both modules (conftest.browser)
]

LIGHT_BACKGROUND = "rgb(247, 248, 250)"
DARK_BACKGROUND = "rgb(15, 20, 25)"


@pytest.fixture
def phone(browser: Any) -> Iterator[Any]:
    """A page 390 px wide (a phone's), in a context of its own."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True)
    context.set_default_timeout(WAIT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


def background(page: Any) -> str:
    return str(page.evaluate("getComputedStyle(document.body).backgroundColor"))


def test_at_a_phones_width_the_views_are_behind_a_menu(phone: Any, dashboard: Dashboard) -> None:
    log_in(phone, dashboard)
    nav = phone.locator("nav#nav")
    expect(nav).to_be_hidden()
    phone.get_by_test_id("menu-toggle").click()
    expect(nav).to_be_visible()
    phone.get_by_test_id("nav-retained").click()
    expect(phone.get_by_test_id("view-retained")).to_be_visible()
    expect(nav).to_be_hidden()
    # Nothing is wider than the screen: no sideways scrolling of the page itself.
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390


def test_the_views_are_reached_with_the_keyboard(page: Any, dashboard: Dashboard) -> None:
    log_in(page, dashboard)
    for _ in range(30):  # bounded: the link is a few Tabs from the top
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.dataset.testid") == "nav-credentials":
            break
    else:
        pytest.fail("Tab never reached the Credentials link")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("view-credentials")).to_be_visible()
    page.get_by_test_id("credential-new").focus()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("credential-form")).to_be_visible()


def test_light_dark_and_the_toggle(browser: Any, dashboard: Dashboard) -> None:
    for scheme, expected in (("light", LIGHT_BACKGROUND), ("dark", DARK_BACKGROUND)):
        context = browser.new_context(color_scheme=scheme)
        context.set_default_timeout(WAIT_MS)
        try:
            page = context.new_page()
            log_in(page, dashboard)
            assert background(page) == expected
            page.get_by_test_id("theme-toggle").click()
            other = DARK_BACKGROUND if scheme == "light" else LIGHT_BACKGROUND
            expect(page.locator("body")).to_have_css("background-color", other)
            page.reload()  # the choice is kept
            expect(page.get_by_test_id("whoami")).to_be_visible()
            assert background(page) == other
        finally:
            context.close()
