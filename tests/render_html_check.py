"""Render servewise's HTML report in headless Chromium and check that it displays offline.

Usage (needs a `chromium` binary; `apt-get install -y chromium` on Debian/Ubuntu):

    python tests/render_html_check.py [WORKLOAD.yaml] [--keep DIR]

It writes the report with `servewise plan WORKLOAD --format html`, opens it from a file:// URL with
networking features off, takes a screenshot (PNG) and dumps the DOM, then checks that the PNG is a
real image and that the inline SVG graph was parsed. Exit 0 when all is well, 1 otherwise, 77
(skipped) when Chromium is not installed. `tests/test_auditor.py` runs the same check and skips
cleanly where Chromium is absent (e.g. CI).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run")


def chromium() -> str | None:
    """The Chromium binary, if installed."""
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def render(html: Path, workdir: Path, binary: str, timeout: int = 120) -> tuple[Path, str]:
    """Screenshot and DOM of ``html`` (a file path), rendered by headless Chromium."""
    png = workdir / "report.png"
    url = html.resolve().as_uri()
    base = [binary, *FLAGS, f"--user-data-dir={workdir / 'profile'}"]
    subprocess.run([*base, "--window-size=1280,2000", f"--screenshot={png}", url],
                   check=False, capture_output=True, timeout=timeout)
    dom = subprocess.run([*base, "--dump-dom", url], check=False, capture_output=True, text=True,
                         timeout=timeout).stdout
    return png, dom


def problems(png: Path, dom: str) -> list[str]:
    """What is wrong with a rendering (empty list: fine)."""
    out = []
    if not png.exists():
        out.append("no screenshot was produced")
    else:
        data = png.read_bytes()
        if not data.startswith(b"\x89PNG\r\n\x1a\n"):
            out.append("the screenshot is not a PNG")
        if len(data) < 10_000:
            out.append(f"the screenshot is suspiciously small ({len(data)} bytes): blank page?")
    if "<svg" not in dom or "<rect" not in dom:
        out.append("the DOM has no rendered SVG graph")
    if "Explanation chain" not in dom:
        out.append("the DOM lacks the explanation chain section")
    return out


def main(argv: list[str]) -> int:
    keep = None
    if "--keep" in argv:
        i = argv.index("--keep")
        keep = Path(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    workload = argv[0] if argv else str(ROOT / "examples" / "chat-70b-online.yaml")
    binary = chromium()
    if binary is None:
        print("skipped: chromium is not installed")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        work = keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        html = work / "report.html"
        from click.testing import CliRunner

        from servewise.cli.main import cli

        result = CliRunner().invoke(cli, ["plan", workload, "--format", "html", "-o", str(html)])
        if not html.exists():
            print(f"FAIL: servewise plan wrote no report: {result.output}")
            return 1
        png, dom = render(html, work, binary)
        found = problems(png, dom)
        for p in found:
            print(f"FAIL: {p}")
        if not found:
            print(f"ok: {html} rendered offline, screenshot {png.stat().st_size} bytes")
        return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
