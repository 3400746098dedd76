"""Open a built site in headless Chromium (Debian's ``chromium`` + ``chromium-driver``,
through selenium) and read what a user would see: the readiness flag, the error count, the
resources the page requested, screenshots.

Used by the browser tests and ``reproduce/report-screenshots/site.py``; not by the library itself.
WebGL runs on SwiftShader (software rendering) in headless mode.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["find_chromium", "PageState", "Browser", "CHROMIUM_NAMES"]

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> tuple[str | None, str | None]:
    """Paths of the Chromium binary and its chromedriver (``C2NP_CHROMIUM`` /
    ``C2NP_CHROMEDRIVER`` override the search), None where missing."""
    browser = os.environ.get("C2NP_CHROMIUM") or next(
        (p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)
    driver = os.environ.get("C2NP_CHROMEDRIVER") or shutil.which("chromedriver")
    return browser, driver


@dataclass(frozen=True)
class PageState:
    """What a page reported after loading.

    Attributes:
        url: the page.
        ready: ``data-c2np-ready`` ("1" once every plot and viewer rendered).
        errors: ``data-c2np-errors`` (errors caught by ``window.onerror``).
        done: every render task settled.
        messages: the error messages the page recorded.
        requests: every URL the page requested (from the DevTools network log).
        viewer_ms: first render time of the viewer (ms), when the page has one.
        seconds: time from navigation until settled.
    """

    url: str
    ready: str
    errors: int
    done: bool
    messages: tuple[str, ...]
    requests: tuple[str, ...]
    viewer_ms: float | None
    seconds: float


class Browser:
    """A headless Chromium browser driven by WebDriver (context manager)."""

    def __init__(self, *, width: int = 1400, height: int = 1000) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        binary, driver = find_chromium()
        if binary is None or driver is None:
            raise RuntimeError("Chromium and chromedriver are needed (Debian: apt-get install -y "
                               "chromium chromium-driver)")
        opts = webdriver.ChromeOptions()
        opts.binary_location = binary
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}",
                    "--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--hide-scrollbars",
                    "--allow-file-access-from-files", "--disable-background-networking",
                    "--no-first-run", "--disable-extensions"):
            opts.add_argument(arg)
        opts.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
        self.driver = webdriver.Chrome(service=Service(driver), options=opts)
        self.driver.set_script_timeout(600)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """End the browser."""
        self.driver.quit()

    def _requests(self) -> list[str]:
        urls = []
        for entry in self.driver.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            if msg.get("method") == "Network.requestWillBeSent":
                urls.append(msg["params"]["request"]["url"])
        return urls

    def open(self, path: str | os.PathLike[str], *, timeout_s: float = 60.0) -> PageState:
        """Load a local page and wait until its render tasks settled (or ``timeout_s``)."""
        url = Path(path).resolve().as_uri()
        self._requests()  # drop older log entries
        t0 = time.perf_counter()
        self.driver.get(url)
        body: dict[str, Any] = {}
        while time.perf_counter() - t0 < timeout_s:
            body = self.driver.execute_script(
                "var b = document.body; return b ? {ready: b.getAttribute('data-c2np-ready'),"
                " errors: b.getAttribute('data-c2np-errors'), done: b.getAttribute('data-c2np-done'),"
                " viewer: b.getAttribute('data-c2np-viewer-ms'),"
                " messages: (window.C2NP && window.C2NP.messages) || []} : {}")
            if body.get("done") == "1" or int(body.get("errors") or 0) > 0:
                break
            time.sleep(0.1)
        seconds = time.perf_counter() - t0
        return PageState(url=url, ready=str(body.get("ready")), errors=int(body.get("errors") or 0),
                         done=body.get("done") == "1", messages=tuple(body.get("messages") or ()),
                         requests=tuple(self._requests()),
                         viewer_ms=float(body["viewer"]) if body.get("viewer") else None, seconds=seconds)

    def screenshot(self, path: str | os.PathLike[str], *, element_css: str | None = None) -> Path:
        """PNG of the window (or of one element)."""
        from selenium.webdriver.common.by import By

        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        png = (self.driver.find_element(By.CSS_SELECTOR, element_css).screenshot_as_png if element_css
               else self.driver.get_screenshot_as_png())
        p.write_bytes(png)
        return p
