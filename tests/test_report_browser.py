"""The report as a browser shows it: headless Chromium (images/packages.txt) opens each page of
`wearlab report` on small made-up results (tests/synthetic_results.py), takes a screenshot, and the
page's own DOM after loading says whether every image decoded and every claim row has text in
each cell. A broken copy of a page proves the check finds both faults. The figures' own data:
tests/test_report_html.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from conftest import need_tool
from synthetic_results import HTTP_CLAIMS, STREAM_CLAIMS, http_results, stream_results
from wearlab.report import html_report

WINDOW = (1280, 1600)
# Appended to a copy of a page: after loading, write what the browser made of it into the DOM.
CHECK = """<script>
window.addEventListener('load', function () {
  var images = [].map.call(document.images, function (i) {
    return {alt: i.alt, decoded: i.complete && i.naturalWidth > 0, width: i.naturalWidth};
  });
  var rows = [].map.call(document.querySelectorAll('tr.claim'), function (tr) {
    return {id: tr.id, empty: [].filter.call(tr.cells, function (td) { return !td.innerText.trim(); }).length,
            cells: tr.cells.length};
  });
  var pre = document.createElement('pre');
  pre.id = 'wearlab-check';
  pre.textContent = JSON.stringify({images: images, rows: rows});
  document.body.appendChild(pre);
});
</script>"""


def _chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    argv = [need_tool("chromium"), "--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            f"--user-data-dir={profile}", *args]
    if os.geteuid() == 0:
        argv.insert(1, "--no-sandbox")      # Chromium refuses to run as root with its sandbox
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def browser_view(page: Path, profile: Path) -> dict:
    """The page's images and claim rows as Chromium loaded them."""
    probe = page.with_name(page.stem + ".check.html")
    probe.write_text(page.read_text().replace("</body>", CHECK + "</body>"))
    r = _chromium(profile, "--dump-dom", probe.as_uri())
    m = re.search(r'<pre id="wearlab-check">(.*?)</pre>', r.stdout, re.S)
    assert m, f"Chromium did not load {probe}: {r.stderr[-2000:]}"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


def faults(view: dict) -> list[str]:
    return [f"image '{i['alt']}' did not decode" for i in view["images"] if not i["decoded"]] + \
           [f"claim row {r['id']}: {r['empty']} empty cells" for r in view["rows"] if r["empty"]]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("browser")
    dirs = [http_results(base / "fetch"), stream_results(base / "stream")]
    out = base / "report"
    html_report.write_report(dirs, out)
    return out


@pytest.mark.parametrize("page, images, claims", [("synthetic-fetch.html", 5, len(HTTP_CLAIMS)),
                                                  ("synthetic-handover.html", 7, len(STREAM_CLAIMS)),
                                                  ("index.html", 0, 0)])
def test_chromium_shows_every_image_and_claim(report, tmp_path, page, images, claims):
    view = browser_view(report / page, tmp_path / "profile")
    assert not faults(view), faults(view)
    assert len(view["images"]) == images and all(i["width"] > 300 for i in view["images"])
    assert len(view["rows"]) == claims and all(r["cells"] == 7 for r in view["rows"])
    shot = tmp_path / "page.png"
    r = _chromium(tmp_path / "profile", f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={shot}",
                  (report / page).as_uri())
    assert shot.is_file(), r.stderr[-2000:]
    with Image.open(shot) as im:
        assert im.size == WINDOW
        colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours and len(colours) > 50, "the screenshot is (nearly) blank"


def test_the_check_finds_a_missing_image_and_an_empty_claim_row(report, tmp_path):
    page = (report / "synthetic-fetch.html").read_text()
    broken = re.sub(r'src="data:image/png;base64,[^"]*"', 'src="data:image/png;base64,AAAA"', page, count=1)
    broken = re.sub(r'(<tr class="claim"[^>]*>.*?<td class="num">)[^<]*(</td>)', r"\1\2", broken, count=1, flags=re.S)
    assert broken != page
    copy = tmp_path / "broken.html"
    copy.write_text(broken)
    found = faults(browser_view(copy, tmp_path / "profile"))
    assert len(found) == 2 and "did not decode" in found[0] and "1 empty cells" in found[1], found
