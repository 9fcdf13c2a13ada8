"""What the report tests read a page with: its summary table, its charts, a browser to render it."""

import re
import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

CHART_IDS = ["chart-gpu-by-class", "chart-timeline", "chart-kernels-per-step", "chart-memcpy-bytes",
             "chart-tensor-core", "chart-cudnn-plan", "chart-occupancy"]
SVG_NS = "{http://www.w3.org/2000/svg}"

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None,
                                    reason="no chromium binary (CI: apt-get install -y chromium)")


class _Table(HTMLParser):
    """The rows of <table id="summary-table">: (data-trace, [cell texts])."""

    def __init__(self):
        super().__init__()
        self.rows, self._inside, self._cell = [], False, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and attrs.get("id") == "summary-table":
            self._inside = True
        elif self._inside and tag == "tr" and "data-trace" in attrs:
            self.rows.append((attrs["data-trace"], []))
        elif self._inside and tag == "td" and self.rows:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "table":
            self._inside = False
        elif tag == "td" and self._cell is not None:
            self.rows[-1][1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def table_rows(html):
    parser = _Table()
    parser.feed(html)
    return parser.rows


def svg(html, chart_id):
    match = re.search(rf'<svg id="{chart_id}".*?</svg>', html, flags=re.S)
    assert match, f"no <svg id={chart_id}>"
    return ET.fromstring(match.group(0))
