"""``mm2spec drill`` on real clusters and a real Spark mirror: a short drill passes, every group
resumes at the next record after each switch, every record written is on both clusters, and the
report's files exist, agree with drill.json, and render in a real headless Chromium."""

from __future__ import annotations

import html.parser
import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mm2spec.cli import main
from mm2spec.live.dr_state import read_states
from mm2spec.live.records import retrying
from mm2spec.ops.drill.report import PLOTS, headline_rows
from mm2spec.render import spark_job_config
from mm2spec.resources import schema_path
from mm2spec.runtime import deployment as mirror
from mm2spec.spec.load import load_desired_state
from mm2spec.spec.model import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parent))

from required import missing_component
from specs import spec_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

START_TIMEOUT = 300.0
# Chromium's first start on a loaded 2-core machine (profile, fonts) can take a minute.
BROWSER_TIMEOUT = 180.0
TOPIC = "drill-orders"
PARTITIONS = 2
RECORDS = 300
GROUPS = ["drill-app-0", "drill-app-1"]


# Short intervals: the probe topic and groups are picked up within seconds, not MM2's minutes.
MIRROR = {"name": "drill-flow", "offsetLagMax": 10, "emitCheckpointsIntervalSeconds": 1, "syncGroupOffsets": False,
          "refreshTopicsIntervalSeconds": 5, "refreshGroupsIntervalSeconds": 5}


def _spec(tmp: Path, pair) -> Path:
    """Flow ``drill-flow`` of ``drill-.*`` (topics and groups): the drill writes to the flow's probe topic
    mm2spec-probe-drill-flow (its own, no other test's mirror carries it) with group drill-mm2spec-drill-probe."""
    spec = spec_for(pair, ["drill-.*"], ["drill-.*"], name="it-drill", mirror=MIRROR)
    # spec_for's spark section holds a free /metrics port: extended, not replaced
    spec["spark"] |= {"master": "local[2]", "triggerInterval": "1 second", "checkpointLocation": str(tmp / "checkpoint")}
    (tmp / "drill.dr.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return tmp / "drill.dr.yaml"


def _seed(pair) -> None:
    """A production-like topic and groups stopped mid-way: the drill probes them too."""
    admin = AdminClient({"bootstrap.servers": pair.primary.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, -1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": pair.primary.bootstrap, "enable.idempotence": True})
    for i in range(RECORDS):
        producer.produce(TOPIC, key=f"k{i % 7}".encode(), value=f"v{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0
    rng = random.Random(11)
    cluster = Cluster("primary", (pair.primary.bootstrap,))
    for group in GROUPS:
        consumer = Consumer({"bootstrap.servers": pair.primary.bootstrap, "group.id": group, "enable.auto.commit": False})
        offsets = [TopicPartition(TOPIC, p, rng.randrange(1, RECORDS // PARTITIONS)) for p in range(PARTITIONS)]
        try:
            retrying(lambda: consumer.commit(offsets=offsets, asynchronous=False), f"commit {group}", cluster)
        finally:
            consumer.close()


@pytest.fixture(scope="module")
def drill_setup(kafka_pair, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("drill")
    _seed(kafka_pair)
    spec = _spec(tmp, kafka_pair)
    state = load_desired_state(spec, None)
    mirror.start(spark_job_config(state), state_dir=tmp / "spark", wait_running=START_TIMEOUT)
    yield spec, tmp
    mirror.stop(tmp / "spark")


def _markdown_headline(text: str) -> dict[str, str]:
    section = text.split("## Headline", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split("|") for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    return {k.strip(): v.strip() for k, v in rows[1:]}


class _HeadlineTable(html.parser.HTMLParser):
    """The rows of <table id="headline"> as {figure: value}."""

    def __init__(self):
        super().__init__()
        self.rows: dict[str, str] = {}
        self._inside, self._cell, self._cells = False, None, []

    def handle_starttag(self, tag, attrs):
        if tag == "table" and ("id", "headline") in attrs:
            self._inside = True
        elif self._inside and tag in ("th", "td"):
            self._cell = ""

    def handle_endtag(self, tag):
        if tag == "table":
            self._inside = False
        elif self._inside and tag in ("th", "td"):
            self._cells.append(self._cell)
            self._cell = None
        elif self._inside and tag == "tr":
            self.rows[self._cells[0]] = self._cells[1]
            self._cells = []

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


# Marks the page once every image has loaded and decoded with a real size; --dump-dom shows it.
IMAGE_CHECK = """<script>
window.addEventListener("load", () => {
  const images = Array.from(document.images);
  const drawn = images.filter(i => i.complete && i.naturalWidth > 0 && i.naturalHeight > 0);
  document.body.setAttribute("data-images", drawn.length + "/" + images.length);
});
</script>"""


def _browser_images(report: Path, tmp: Path) -> str:
    """Open a copy of report.html with IMAGE_CHECK in headless Chromium; what it marked."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        missing_component("chromium is not installed: run scripts/setup (Debian package chromium)")
    page = tmp / "report-checked.html"
    page.write_text(report.read_text().replace("</body>", IMAGE_CHECK + "</body>"))
    result = subprocess.run([browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
                             f"--user-data-dir={tmp / 'chromium-profile'}", "--virtual-time-budget=10000",
                             "--dump-dom", page.as_uri()],
                            capture_output=True, text=True, timeout=BROWSER_TIMEOUT)
    found = re.search(r'data-images="(\d+)/(\d+)"', result.stdout)
    assert found, f"chromium did not run the check (exit {result.returncode}): {result.stderr[-2000:]}"
    return found.group(0)


def test_a_failed_phase_stops_the_drill_before_any_switch_and_the_report_says_where(drill_setup, tmp_path, capsys):
    """verify cannot find the Spark job in an empty state folder: the drill stops there, exit 1,
    nothing failed over, and the report is written all the same."""
    spec, tmp = drill_setup
    out = tmp_path / "report"
    code = main(["drill", str(spec), "--state-dir", str(tmp_path / "no-job-here"), "--out", str(out), "--duration", "0",
                 "--rate", "20", "--verify-timeout", "0", "--settle-timeout", "180", "--quiet"])
    printed = capsys.readouterr()
    data = json.loads((out / "drill.json").read_text())
    assert code == 1 and data["exitCode"] == 1 and not data["passed"], printed.err
    assert data["stoppedAt"] == "verify" and "the mirror is not running" in data["phases"][1]["message"]
    assert [p["status"] for p in data["phases"]][2:] == ["not run"] * 6 and data["switches"] == []
    assert "Result                     FAILED at verify" in printed.out and (out / "report.html").exists()
    assert "Traceback" not in printed.err and "internal error" not in printed.err
    dr = yaml.safe_load(spec.read_text())["clusters"]["dr"]["bootstrapServers"]
    assert not read_states(Cluster("dr", tuple(dr)), "it-drill"), "nothing failed over"


def test_drill_passes_and_its_report_renders(drill_setup, tmp_path, capsys):
    spec, tmp = drill_setup
    out = tmp_path / "report"
    code = main(["drill", str(spec), "--state-dir", str(tmp / "spark"), "--out", str(out), "--duration", "3",
                 "--rate", "40", "--verify-timeout", "120", "--settle-timeout", "180"])
    printed = capsys.readouterr()
    data = json.loads((out / "drill.json").read_text())
    assert code == 0, f"{printed.err[-4000:]}\n{json.dumps(data['phases'], indent=1)[-4000:]}"

    jsonschema.validate(data, json.loads(schema_path("drill-report.schema.json").read_text()))
    assert data["passed"] and data["stoppedAt"] is None
    assert [p["status"] for p in data["phases"]] == ["passed"] * len(data["phases"])

    # Every group (the drill's and the seeded ones) resumed at the next record after each switch.
    head = data["headline"]
    switched = {r["switch"] for r in data["probes"]}
    assert switched == {"failover", "failback"}
    assert {r["group"] for r in data["probes"] if r["switch"] == "failover"} >= set(GROUPS) | set(data["probeGroups"])
    assert all(r["result"] == "exact" for r in data["probes"]), data["probes"]
    assert head["skipped"] == 0 and head["reread"] == 0 and head["unknown"] == 0

    # Nothing lost at either switch; every record written is on both clusters.
    assert head["rpoRecords"] == 0 and [s["lostRecords"] for s in data["switches"]] == [0, 0]
    records = data["records"]
    assert records["total"] > 0 and set(records["written"]) == {"primary", "dr"}
    assert {a: c["missing"] for a, c in records["clusters"].items()} == {"primary": 0, "dr": 0}
    assert head["recordsFound"] == {"primary": records["total"], "dr": records["total"]}
    assert head["rtoSeconds"]["failover"] > 0 and head["rtoSeconds"]["failback"] > 0
    assert len(data["samples"]) >= 5 and any(s["producedPerSecond"] for s in data["samples"])

    # The report's files exist and show the JSON's figures.
    for name in ("drill.json", "report.md", "report.html", *PLOTS.values()):
        assert (out / name).stat().st_size > 0, name
    for png in PLOTS.values():
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    expected = dict(headline_rows(data))
    assert _markdown_headline((out / "report.md").read_text()) == expected
    parser = _HeadlineTable()
    parser.feed((out / "report.html").read_text())
    assert parser.rows == expected
    assert "http://" not in (out / "report.html").read_text() and "https://" not in (out / "report.html").read_text()
    assert "report: " in printed.out and str(out / "report.html") in printed.out

    # A real browser renders every plot from the self-contained page.
    assert _browser_images(out / "report.html", tmp_path) == f'data-images="{len(PLOTS)}/{len(PLOTS)}"'
