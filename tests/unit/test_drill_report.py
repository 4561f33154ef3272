"""The drill's report folder from a recorded drill (``data/drill/drill.json``, written by a real
drill on the integration clusters): schema-valid, its headline derived from the rest, every
figure in report.md and report.html equal to the JSON's, PNG plots of real size embedded in the
HTML as data: URIs and nothing fetched from elsewhere."""

from __future__ import annotations

import base64
import copy
import html.parser
import json
import re
import struct
from pathlib import Path

import jsonschema
import pytest

from mm2spec.ops.drill.drill import headline
from mm2spec.ops.drill.plots import switch_windows
from mm2spec.ops.drill.report import PLOTS, format_markdown, headline_rows, seconds, write_report
from mm2spec.resources import schema_path

RECORDED = Path(__file__).parent / "data" / "drill" / "drill.json"
MIN_PNG_BYTES = 10_000
"""A plot with axes, lines and labels is tens of KB; a blank or failed one a few hundred bytes."""


@pytest.fixture
def data() -> dict:
    return json.loads(RECORDED.read_text())


@pytest.fixture
def report(data, tmp_path) -> Path:
    write_report(data, tmp_path / "report")
    return tmp_path / "report"


def _schema() -> dict:
    return json.loads(schema_path("drill-report.schema.json").read_text())


def test_the_recorded_drill_is_schema_valid_and_the_schema_can_fail(data):
    jsonschema.validate(data, _schema())
    jsonschema.validate(data["phases"][2]["playbook"], json.loads(schema_path("playbook-report.schema.json").read_text()))
    broken = copy.deepcopy(data)
    broken["formatVersion"] = 2
    broken["probes"][0]["result"] = "maybe"
    assert len(list(jsonschema.Draft202012Validator(_schema()).iter_errors(broken))) == 2


def test_the_recorded_drill_is_a_complete_passing_drill(data):
    assert data["passed"] and [p["name"] for p in data["phases"]] == [
        "prepare", "verify", "failover", "probe-dr", "failback", "probe-primary", "verify-after", "records"]
    assert [name for name, _start, _end in switch_windows(data)] == ["failover", "failback"]
    assert data["headline"] == headline(data), "the headline is derived from the rest of the document"


def _markdown_table(text: str, title: str) -> list[list[str]]:
    section = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines()
            if line.startswith("|") and not line.startswith("|---")]
    return rows[1:]


class _Tables(html.parser.HTMLParser):
    """Every table of a page as rows of cell texts, and every <img> src."""

    def __init__(self):
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.images: list[str] = []
        self._cell: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "img":
            self.images.append(dict(attrs)["src"])

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self._cell)
            self._cell = None

    def handle_data(self, text):
        if self._cell is not None:
            self._cell += text


def test_markdown_and_html_show_the_jsons_figures(data, report):
    markdown = (report / "report.md").read_text()
    page = _Tables()
    page.feed((report / "report.html").read_text())
    head = data["headline"]
    expected = {"RPO (records lost)": str(head["rpoRecords"]), "RPO (seconds)": seconds(head["rpoSeconds"]),
                "RTO failover (s)": seconds(head["rtoSeconds"]["failover"]),
                "RTO failback (s)": seconds(head["rtoSeconds"]["failback"]),
                "RTO total (s)": seconds(head["rtoSeconds"]["total"]),
                "Records skipped by groups": str(head["skipped"]), "Records re-read by groups": str(head["reread"]),
                "Records written": str(head["recordsWritten"]),
                **{f"Records found on {a}": str(n) for a, n in head["recordsFound"].items()}}
    for shown in (dict(_markdown_table(markdown, "Headline")), dict(page.tables[0])):
        assert {k: shown[k] for k in expected} == expected
        assert shown["Result"] == "passed"
    phases = [[p["name"], p["status"], seconds(p["seconds"])] for p in data["phases"]]
    assert [[r[0], r[1], r[3]] for r in _markdown_table(markdown, "Phases")] == phases
    assert [[r[0], r[1], r[3]] for r in page.tables[1][1:]] == phases
    groups = [[g["switch"], g["group"], str(g["partitions"]), str(g["skipped"]), str(g["reread"])] for g in head["groups"]]
    assert [r[:5] for r in _markdown_table(markdown, "Groups after each switch")] == groups
    assert [r[:5] for r in page.tables[3][1:]] == groups


def _png_size(blob: bytes) -> tuple[int, int]:
    assert blob[:8] == b"\x89PNG\r\n\x1a\n" and blob[12:16] == b"IHDR"
    return struct.unpack(">II", blob[16:24])


def test_the_plots_are_real_pngs_embedded_in_the_self_contained_html(report):
    page_text = (report / "report.html").read_text()
    page = _Tables()
    page.feed(page_text)
    embedded = [base64.b64decode(src.split(",", 1)[1]) for src in page.images if src.startswith("data:image/png;base64,")]
    assert len(embedded) == len(page.images) == len(PLOTS)
    for name in PLOTS.values():
        blob = (report / name).read_bytes()
        width, height = _png_size(blob)
        assert len(blob) > MIN_PNG_BYTES and width > 600 and height > 250, (name, len(blob), width, height)
        assert blob in embedded
    assert not re.search(r"(src|href)=\"(?!data:)", page_text) and "http" not in page_text.replace("http-equiv", "")
    assert all(f"![{n}]({f})" in (report / "report.md").read_text() for n, f in PLOTS.items())
    assert json.loads((report / "drill.json").read_text())["headline"] == json.loads(RECORDED.read_text())["headline"]


def test_a_failed_drill_says_where_it_stopped(data):
    failed = copy.deepcopy(data)
    failed.update(passed=False, stoppedAt="failback", exitCode=1)
    failed["phases"][4].update(status="failed", message="failback failed at [Copy]: the source is unreachable")
    failed["headline"] = headline(failed)
    rows = dict(headline_rows(failed))
    assert rows["Result"] == "FAILED at failback"
    markdown = format_markdown(failed)
    assert markdown.startswith(f"# DR drill: {data['spec']}") and "FAILED at failback" in markdown.splitlines()[0]
    assert "the source is unreachable" in markdown
