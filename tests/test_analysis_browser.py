"""The report in headless Chromium (Debian's `chromium`): no console messages, every figure shown.

CI must install the browser: `apt-get install -y chromium`. Without /usr/bin/chromium these
tests are skipped.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path

import pytest

try:
    from analysis_fixtures import copy_report, store  # noqa: F401
except ImportError:  # tests/ imported as a package
    from tests.analysis_fixtures import copy_report, store  # noqa: F401

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)")

# Written into the page by a script added to a copy of the report (the report has none).
CHECK_SCRIPT = """<script>
window.addEventListener("load", () => {
  const figures = [...document.querySelectorAll("figure")].map((f) => {
    const img = f.querySelector("img"), box = img.getBoundingClientRect();
    return {id: f.id, complete: img.complete, natural: [img.naturalWidth, img.naturalHeight],
            attrs: [+img.getAttribute("width"), +img.getAttribute("height")],
            shown: [box.width, box.height], display: getComputedStyle(img).display};
  });
  const out = document.createElement("pre");
  out.id = "figure-check";
  out.textContent = JSON.stringify(figures);
  document.body.appendChild(out);
});
</script>"""


def run_chromium(page: Path, profile: Path) -> subprocess.CompletedProcess:
    """Load a page headless; stdout is the DOM after load, stderr has the console lines."""
    command = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
               "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000",
               "--window-size=1300,900", "--dump-dom", page.as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def console_lines(stderr: str) -> list[str]:
    """Chromium logs every console message (errors, CSP violations, log calls) as CONSOLE."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def test_console_messages_are_detected(tmp_path):
    """The check is not vacuous: a broken page does produce CONSOLE lines."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><head><meta http-equiv='Content-Security-Policy' "
                    "content=\"default-src 'none'; script-src 'unsafe-inline'\"></head><body>"
                    "<img src='https://example.invalid/x.png'><script>console.error('boom');"
                    "undefinedFunction();</script></body></html>")
    lines = console_lines(run_chromium(page, tmp_path / "profile").stderr)
    assert any("boom" in line for line in lines)
    assert any("undefinedFunction" in line for line in lines)
    assert any("Content Security Policy" in line for line in lines)


def test_report_loads_without_console_messages(copy_report, tmp_path):
    report, path = copy_report
    result = run_chromium(path, tmp_path / "profile")
    assert result.returncode == 0, result.stderr[-2000:]
    assert console_lines(result.stderr) == []
    dom = result.stdout
    assert dom.count("<img") == len(report.figures)
    for name in report.figures:
        assert f'id="fig-{name}"' in dom


def test_report_shows_every_figure(copy_report, tmp_path):
    report, path = copy_report
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"<meta http-equiv='Content-Security-Policy'[^>]*>", "", text)
    page = tmp_path / "checked.html"
    page.write_text(text.replace("</body>", CHECK_SCRIPT + "</body>"), encoding="utf-8")
    result = run_chromium(page, tmp_path / "profile")
    assert console_lines(result.stderr) == []
    found = re.search(r'<pre id="figure-check">(.*?)</pre>', result.stdout, re.S)
    assert found, result.stdout[-2000:]
    figures = json.loads(html.unescape(found.group(1)))
    assert [f["id"] for f in figures] == [f"fig-{name}" for name in report.figures]
    for figure in figures:
        assert figure["complete"] and figure["display"] != "none"
        assert figure["natural"] == figure["attrs"]  # the PNG decoded at its full size
        width, height = figure["shown"]
        assert width > 200 and height > 100  # and it is laid out on the page
