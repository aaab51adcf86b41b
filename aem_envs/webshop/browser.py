"""``aem/WebShopBrowser-v0``: the same WebShop episodes, acted out in a real headless Chromium.

The env serves its :class:`~aem_envs.webshop.site.app.Site` on 127.0.0.1 (a port the OS picks)
and drives Debian's Chromium through Selenium: ``click[...]`` clicks the element in the live
page, ``search[...]`` types into the search box and clicks Search; observations are read from
the live DOM (``page_view.js`` applies the text env's rules there), and the reward is read from
the done page. Everything else (actions, modes, admissible actions, reward, expert) is
:class:`~aem_envs.webshop.env.WebShopEnv`'s, so both modes give the same episode: equal
``text`` / ``text_rich`` observations and rewards (tested). ``html`` is the live DOM's
serialization and ``url`` the live address (with the server's port), so those two differ in
form from text mode's.

The browser starts on the first ``reset`` (constructing the env is cheap, so vector envs and
pickling by replay stay cheap), with a fresh profile folder; ``close()`` quits Chromium and
chromedriver, stops the server and deletes the profile. Chromium and chromedriver are given by
path (``/usr/bin/chromium`` and ``/usr/bin/chromedriver`` from ``apt-get install chromium
chromium-driver``): Selenium is never allowed to download a driver.
"""

from __future__ import annotations

import io
import shutil
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from aem_envs.core.errors import AEMError, require
from aem_envs.webshop.env import SiteClient, WebShopEnv
from aem_envs.webshop.site.app import Site
from aem_envs.webshop.site.page import CLICKABLE_SELECTOR, PAGE_VIEW_JS, Clickable, PageView
from aem_envs.webshop.site.server import SiteServer
from sandboxes.lifetime import mark_children

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: Flags that work as root and offline (see docs/toolchain.md); a fresh profile is added per env.
CHROMIUM_FLAGS = (
    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1280,900",
)  # fmt: skip
#: Longest a page may take to load before the step is reported as failed.
PAGE_TIMEOUT_S = 20.0
_POLL_S = 0.002
#: Tags the current document so that :meth:`BrowserClient._await_page` can tell the next one.
_MARK = "window.__aemOld = true;\n"
_VIEW_WHEN_LOADED = (
    "if (window.__aemOld || document.readyState !== 'complete') return null;\n" + PAGE_VIEW_JS
)


def _shutdown(driver: Any, server: SiteServer, profile: str) -> None:
    """Quit Chromium and chromedriver, stop the server, delete the profile (idempotent)."""
    try:
        driver.quit()
    finally:
        server.close()
        shutil.rmtree(profile, ignore_errors=True)


class BrowserClient(SiteClient):
    """:class:`SiteClient`'s interface, carried out by Chromium on the served site."""

    def __init__(self, site: Site, *, chromium: str, chromedriver: str) -> None:
        webdriver = require("browser", "selenium.webdriver", feature="WebShop browser mode")
        for path, package in ((chromium, "chromium"), (chromedriver, "chromium-driver")):
            if not Path(path).is_file():
                raise AEMError(
                    f"{path} does not exist; install it (apt-get install {package}) or pass "
                    "chromium_path= / chromedriver_path= to the env"
                )
        super().__init__(site)
        self._errors = require("browser", "selenium.common.exceptions", feature="WebShop")
        self._keys = require("browser", "selenium.webdriver.common.keys", feature="WebShop").Keys
        self._server = SiteServer(site)
        self.base_url = self._server.base_url
        profile = tempfile.mkdtemp(prefix="aem-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
            options.add_argument(flag)
        mark_children()  # a driver left by a killed owner is reaped (sandboxes.lifetime)
        try:
            self.driver = webdriver.Chrome(
                service=webdriver.ChromeService(executable_path=chromedriver), options=options
            )
        except Exception:
            self._server.close()
            shutil.rmtree(profile, ignore_errors=True)
            raise
        self.driver.set_page_load_timeout(PAGE_TIMEOUT_S)
        self._finalizer = weakref.finalize(self, _shutdown, self.driver, self._server, profile)

    # The page state lives in the browser; these read it from the live DOM.
    @property
    def url(self) -> str:
        return self.driver.current_url

    @property
    def view(self) -> PageView:
        if self._view is None:
            self._view = PageView.from_dom(self.driver.execute_script(PAGE_VIEW_JS))
        return self._view

    @property
    def html(self) -> str:
        return self.driver.page_source

    def open(self, path: str) -> None:
        self.driver.get(self.base_url + path)
        self._view = None

    def search(self, query: str) -> None:
        box = self.driver.execute_script(_MARK + "return document.getElementById('search_input');")
        try:
            box.send_keys(query + self._keys.ENTER)
        except self._errors.WebDriverException:
            # chromedriver cannot type characters outside the BMP (emoji): set the value.
            self.driver.execute_script(
                "arguments[0].value = arguments[1]; arguments[0].form.requestSubmit();", box, query
            )
        self._await_page()

    def click(self, clickable: Clickable) -> None:
        element = self.driver.execute_script(
            _MARK + "return document.querySelectorAll(arguments[0])[arguments[1]];",
            CLICKABLE_SELECTOR,
            clickable.index,
        )
        element.click()
        self._await_page()

    def screenshot(self) -> np.ndarray:
        image = require("browser", "PIL.Image", feature="WebShop browser screenshots")
        png = self.driver.get_screenshot_as_png()
        return np.asarray(image.open(io.BytesIO(png)).convert("RGB"))

    def close(self) -> None:
        self._finalizer()

    def _await_page(self) -> None:
        """Wait until the page an action loads is complete, and read its view.

        Why a marker: a radio navigates from a script after the click returns, so the old
        document is tagged (:data:`_MARK`) and we wait for a complete document without it.
        """
        deadline = time.monotonic() + PAGE_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                raw = self.driver.execute_script(_VIEW_WHEN_LOADED)
            except self._errors.WebDriverException:
                raw = None  # the old document was torn down mid-call; the new one is loading
            if raw is not None:
                self._view = PageView.from_dom(raw)
                return
            time.sleep(_POLL_S)
        raise AEMError(f"the page did not load within {PAGE_TIMEOUT_S:.0f} s")


class WebShopBrowserEnv(WebShopEnv):
    """WebShop in headless Chromium: :class:`WebShopEnv`'s episodes on a served site.

    ## Description

    :class:`WebShopEnv`'s goals, splits and keywords, plus ``chromium_path`` /
    ``chromedriver_path``; the site is served on 127.0.0.1 and Chromium drives it through
    Selenium (see the module docstring). The browser starts on the first ``reset``.

    ## Action space

    As :class:`WebShopEnv`: ``click[...]`` clicks the element in the live page,
    ``search[...]`` types into the search box and clicks Search.

    ## Observation

    As :class:`WebShopEnv`, read from the live DOM: ``text`` and ``text_rich`` equal text
    mode's; ``html`` is the live DOM's serialization and ``url`` the live address (with the
    server's port). ``render_mode="rgb_array"`` renders screenshots.

    ## Rewards

    As :class:`WebShopEnv`, read from the done page.

    ## Termination

    As :class:`WebShopEnv`: ``terminated`` on ``buy now``, ``truncated`` after ``max_steps``
    (default 15).

    ## Registered ids

    - ``aem/WebShopBrowser-v0``
    """

    # An instance attribute in gymnasium.Env and TextEnv, so no ClassVar (as in TextEnv).
    metadata: dict[str, Any] = {  # noqa: RUF012
        "render_modes": ["ansi", "human", "rgb_array"],
        "render_fps": 4,
    }

    def __init__(
        self,
        *,
        chromium_path: str = CHROMIUM,
        chromedriver_path: str = CHROMEDRIVER,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._chromium = chromium_path
        self._chromedriver = chromedriver_path

    def _make_client(self) -> SiteClient:
        return BrowserClient(self.site, chromium=self._chromium, chromedriver=self._chromedriver)

    def render(self) -> Any:
        if self.render_mode == "rgb_array":
            client = self.client
            assert isinstance(client, BrowserClient)
            return client.screenshot()
        return super().render()
