"""Open every page of build/site/ in headless Chromium and check what a reader would get (``make site-test``).

For each page: it loads, the browser console shows no error, every ``<img>`` has a non-zero
natural width, and every request the page makes is to ``file:`` or ``data:`` (all requests are
recorded; anything else fails: the site must work offline). A screenshot of each whole page
is kept under build/site-shots/ (named after the page's path) for a person to look at.

The browser is driven by Playwright's Python package. Which browser: ``COURSE_BROWSER`` (a path
or a command name) when set; else the first of chromium, chromium-browser, google-chrome,
google-chrome-stable, chrome on PATH; else the Chromium Playwright downloads for the user
(``python -m playwright install chromium``, no root needed). Without any, it sets itself up as
CI does on a fresh machine: as root with apt-get (Debian, Ubuntu), it installs Debian's
``chromium`` and says so; elsewhere it stops with one line saying what to install.

    python tools/site_test.py             # every page of build/site/
    python tools/site_test.py --page claims.html --page index.html
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "build" / "site"
SHOTS = ROOT / "build" / "site-shots"
BROWSER_ENV = "COURSE_BROWSER"
BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
ALLOWED_SCHEMES = ("file", "data")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class PageReport:
    """What one page did in the browser: its problems (empty when it passed) and its requests."""

    page: str
    problems: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


def leaving_requests(urls: list[str]) -> list[str]:
    """The requests whose scheme is neither ``file:`` nor ``data:`` (they would leave the machine)."""
    return [url for url in urls if urlparse(url).scheme not in ALLOWED_SCHEMES]


def shot_name(page: Path, site: Path = SITE) -> str:
    """The screenshot's file name for a page: its path under the site, '/' as '__', '.png'."""
    return str(page.relative_to(site).with_suffix("")).replace(os.sep, "__") + ".png"


def find_browser(env: dict[str, str] | None = None, which=shutil.which) -> Path | None:
    """The Chromium-family browser to drive: ``COURSE_BROWSER`` (a path, or a name looked up on
    PATH) when set, else the first of ``BROWSER_NAMES`` on PATH; None for Playwright's own
    download. A ``COURSE_BROWSER`` that names nothing runnable is a SystemExit saying so.

    Used by ``make site-test``.
    """
    setting = (os.environ if env is None else env).get(BROWSER_ENV, "")
    if setting:
        found = which(setting)
        if not found:
            raise SystemExit(
                f"site_test: {BROWSER_ENV}={setting!r} is not a runnable browser; set it to "
                f"a Chromium or Chrome executable, or unset it to look for {', '.join(BROWSER_NAMES)}"
            )
        return Path(found)
    return next((Path(found) for name in BROWSER_NAMES if (found := which(name))), None)


NO_BROWSER = (
    f"make site-test needs Chromium or Chrome: install one on PATH ({', '.join(BROWSER_NAMES)}), "
    f"set {BROWSER_ENV}=/path/to/chrome, or run `.venv/bin/python -m playwright install chromium` "
    "(no root needed)"
)


APT_BROWSER = "chromium"  # Debian's package; Ubuntu's is a snap wrapper, so CI images ship Chrome


def can_install_system_packages(which=shutil.which, uid: int | None = None) -> bool:
    """True where apt-get is on PATH and we are root (CI, containers): a browser can be installed."""
    return which("apt-get") is not None and (os.geteuid() if uid is None else uid) == 0


def install_browser(run=subprocess.run, which=shutil.which) -> Path:
    """Install Debian's ``chromium`` with apt-get (as root), saying so; its path on PATH.

    A failed install is a SystemExit naming the command and what to do instead.
    """
    print(
        f"site_test: no Chromium or Chrome here; installing Debian's {APT_BROWSER} "
        "(apt-get, as root; a minute or two)",
        flush=True,
    )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", APT_BROWSER],
    ):
        if run(cmd, env=env).returncode != 0:
            raise SystemExit(f"site_test: `{' '.join(cmd)}` failed; {NO_BROWSER}")
    found = which(APT_BROWSER)
    if not found:
        raise SystemExit(
            f"site_test: apt-get installed {APT_BROWSER} but it is not on PATH; {NO_BROWSER}"
        )
    return Path(found)


def check_page(context, page_path: Path, shots: Path) -> PageReport:
    """Open one page, wait for it and its images, collect console errors and requests, screenshot it."""
    report = PageReport(str(page_path.relative_to(SITE)))
    page = context.new_page()
    page.on("request", lambda request: report.requests.append(request.url))
    page.on(
        "console",
        lambda msg: (
            report.problems.append(f"console {msg.type}: {msg.text}")
            if msg.type == "error"
            else None
        ),
    )
    page.on("pageerror", lambda err: report.problems.append(f"script error: {err}"))
    try:
        response = page.goto(page_path.as_uri(), wait_until="load", timeout=30_000)
        if response is not None and not response.ok:
            report.problems.append(f"loading it answered {response.status}")
        page.wait_for_function(
            "Array.from(document.images).every(img => img.complete)", timeout=15_000
        )
        broken = page.evaluate("""() => Array.from(document.images)
            .filter(img => !(img.complete && img.naturalWidth > 0))
            .map(img => img.getAttribute('src'))""")
        report.problems += [f"image not shown (naturalWidth 0): {src}" for src in broken]
        page.screenshot(path=str(shots / shot_name(page_path)), full_page=True)
    except Exception as err:  # a page that does not load is a finding, not a crash of the test
        report.problems.append(f"did not load: {err}")
    finally:
        page.close()
    report.problems += [
        f"request leaves the machine: {url}" for url in leaving_requests(report.requests)
    ]
    return report


def site_pages(site: Path = SITE) -> list[Path]:
    """Every HTML page a reader can open: all of ``site`` but the theme's files under _static/."""
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.relative_to(site).parts)


def run(pages: list[Path], shots: Path = SHOTS) -> list[PageReport]:
    """Check ``pages`` in one headless Chromium with a fresh profile; screenshots go to ``shots``."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as err:
        raise SystemExit(
            "make site-test needs Playwright's Python package: .venv/bin/pip install -e '.[site]'"
        ) from err
    browser = find_browser()
    if shots.exists():
        shutil.rmtree(shots)
    shots.mkdir(parents=True)
    with (
        tempfile.TemporaryDirectory(prefix="site-test-profile-") as profile,
        sync_playwright() as pw,
    ):
        if browser is None and not Path(pw.chromium.executable_path).exists():
            if not can_install_system_packages():
                raise SystemExit(NO_BROWSER)
            browser = install_browser()
        try:
            context = pw.chromium.launch_persistent_context(
                profile,
                executable_path=str(browser) if browser else None,
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": 1280, "height": 900},
                service_workers="block",
            )
        except Exception as err:  # Playwright's Error: no browser of its own downloaded, or one that will not start
            raise SystemExit(
                f"{NO_BROWSER}\n({browser or 'Playwright Chromium'}: {str(err).splitlines()[0]})"
            ) from err
        try:
            return [check_page(context, page, shots) for page in pages]
        finally:
            context.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--page", action="append", default=[], help="a page under build/site/ (repeatable)"
    )
    args = parser.parse_args()
    if not (SITE / "index.html").exists():
        raise SystemExit(f"no site at {SITE}: run `make site` first")
    pages = [SITE / p for p in args.page] or site_pages()
    reports = run(pages)
    failed = [r for r in reports if r.problems]
    for r in failed:
        print(f"FAIL {r.page}")
        for problem in r.problems:
            print(f"  {problem}")
    print(
        f"{len(reports) - len(failed)} of {len(reports)} pages pass; {sum(len(r.requests) for r in reports)} "
        f"requests, all file: or data: unless listed above; screenshots in {SHOTS}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
