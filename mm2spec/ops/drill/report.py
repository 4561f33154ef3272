"""A drill's report folder, from its JSON document alone (``Drill.to_json``): ``drill.json``,
``report.md``, a self-contained ``report.html`` (plots embedded as data: URIs, no external
fetch) and PNG plots made with matplotlib: throughput and replication lag over time with the
failover and failback marked, and a timeline of the phases and the switches' tasks.

Markdown and HTML are rendered from the same tables (``_tables``), so their figures cannot
disagree with each other or with the JSON they come from.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from mm2spec.errors import OutputUnwritable
from mm2spec.ops.drill import plots

PLOTS = {"throughput": "throughput.png", "lag": "lag.png", "timeline": "timeline.png"}
"""Plot name -> its file in the report folder."""


def seconds(value: float | None) -> str:
    """How every duration is shown: one decimal, ``-`` when unknown."""
    return "-" if value is None else f"{value:.1f}"


def headline_rows(data: dict) -> list[tuple[str, str]]:
    """(figure, value) rows of the headline table."""
    head = data["headline"]
    rto = head["rtoSeconds"]
    rows = [("Result", "passed" if data["passed"] else f"FAILED at {data['stoppedAt']}"),
            ("RPO (records lost)", str(head["rpoRecords"])),
            ("RPO (seconds)", seconds(head["rpoSeconds"])),
            ("RTO failover (s)", seconds(rto["failover"])),
            ("RTO failback (s)", seconds(rto["failback"])),
            ("RTO total (s)", seconds(rto["total"])),
            ("Writes paused (s)", ", ".join(seconds(s) for s in head["writePauseSeconds"]) or "-"),
            ("Records skipped by groups", str(head["skipped"])),
            ("Records re-read by groups", str(head["reread"])),
            ("Records written", "-" if head["recordsWritten"] is None else str(head["recordsWritten"]))]
    rows += [(f"Records found on {alias}", str(n)) for alias, n in head["recordsFound"].items()]
    return rows


def _tables(data: dict) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of every table after the headline."""
    phases = [[p["name"], p["status"], seconds(p["start"]), seconds(p["seconds"]), seconds(p["rtoSeconds"]), p["message"]]
              for p in data["phases"]]
    groups = [[g["switch"], g["group"], str(g["partitions"]), str(g["skipped"]), str(g["reread"]), str(g["unknown"])]
              for g in data["headline"]["groups"]]
    tasks = [[p["name"], t["task"], t["status"], seconds(t["start"]), seconds(t["seconds"])]
             for p in data["phases"] for t in p["tasks"]]
    switches = [[s["name"], f"{s['from']} -> {s['to']}", seconds(s["rtoSeconds"]), seconds(s["playbookSeconds"]),
                 str(s["lostRecords"]), seconds(s["rpoSeconds"]), _others_after(s)] for s in data["switches"]]
    return [
        ("Phases", ["phase", "status", "start (s)", "time (s)", "RTO (s)", "detail"], phases),
        ("Switches", ["switch", "direction", "RTO (s)", "playbook (s)", "records lost", "RPO (s)", "other flows after it"],
         switches),
        ("Groups after each switch", ["switch", "group", "partitions", "skipped", "re-read", "unknown"], groups),
        ("Topics each group moved between", ["switch", "group", "from -> to", "partitions", "exact"], topic_moves(data)),
        ("Tasks of each phase", ["phase", "task", "status", "start (s)", "time (s)"], tasks),
    ]


def topic_moves(data: dict) -> list[list[str]]:
    """Per switch, group and topic: where it moved (``remote, <flow>`` for an active-active remote
    topic, the reverse flow's copy on the source), its partitions, and how many resumed exactly."""
    rows: dict[tuple[str, str, str], list[int]] = {}
    for r in data["probes"]:
        moved = f"{r['topic']} -> {r['targetTopic']}" + (f" (remote, {r['remote']})" if r.get("remote") else "")
        counts = rows.setdefault((r["switch"], r["group"], moved), [0, 0])
        counts[0] += 1
        counts[1] += r["result"] == "exact"
    return [[switch, group, moved, str(n), str(exact)] for (switch, group, moved), (n, exact) in rows.items()]


def _others_after(switch: dict) -> str:
    return ", ".join(f"{o['flow']} {'mirroring' if o['running'] else 'NOT mirroring'}"
                     for o in switch.get("otherFlows", [])) or "-"


def _flow_text(flow: dict) -> str:
    """A flow, its clusters, and its probe topics' names on each (local -> remote)."""
    pair = f"{flow['source']} -> {flow['target']}, " if "source" in flow else ""
    names = zip(flow["probeTopics"], flow.get("targetTopics", flow["probeTopics"]))
    shown = ", ".join(local if local == remote else f"{local} -> {remote}" for local, remote in names)
    return f"{flow['flow']} ({pair}probe topics {shown})"


def _summary(data: dict) -> str:
    env = f" env {data['environment']}" if data["environment"] else ""
    flows = ", ".join(_flow_text(f) for f in data["flows"])
    others = data.get("otherFlows") or []
    if others:
        flows += "; left mirroring: " + ", ".join(f"{o['flow']} ({o['relation']}, {o['source']} -> {o['target']})"
                                                  for o in others)
    settings = data["settings"]
    return (f"Spec {data['spec']}{env}, engine {data['engine']}, {data['source']} -> {data['target']}: {flows}; "
            f"probe groups {', '.join(data['probeGroups']) or 'none'}. Load {settings['rate']:g} records/s of "
            f"{settings['recordBytes']} bytes, {settings['duration']:g} s on each side. Started {data['startedAt']}, "
            f"took {seconds(data['seconds'])} s (drill id {data['id']}).")


def _title(data: dict) -> str:
    return f"DR drill: {data['spec']}" + (f" ({data['environment']})" if data["environment"] else "") + \
        (" passed" if data["passed"] else f" FAILED at {data['stoppedAt']}")


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]


def format_markdown(data: dict) -> str:
    lines = [f"# {_title(data)}", "", _summary(data), "", "## Headline", ""]
    lines += _md_table(["figure", "value"], [list(r) for r in headline_rows(data)])
    for title, header, rows in _tables(data):
        lines += ["", f"## {title}", ""] + (_md_table(header, rows) if rows else ["(none)"])
    lines += ["", "## Plots", ""] + [f"![{name}]({file})" for name, file in PLOTS.items()]
    return "\n".join(lines) + "\n"


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_STYLE = ("body{font-family:sans-serif;max-width:72rem;margin:2rem auto;color:#222}"
          "table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{border:1px solid #ccc;padding:.25rem .6rem;"
          "text-align:left}th{background:#f3f3f3}img{max-width:100%;display:block;margin:1rem 0}"
          ".passed{color:#1b7f3b}.failed{color:#b3261e}")


def format_html(data: dict, images: dict[str, bytes]) -> str:
    """The report as one HTML file; ``images`` (plot name -> PNG bytes) are embedded as data: URIs."""
    state = "passed" if data["passed"] else "failed"
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(_title(data))}</title>"
             f"<style>{_STYLE}</style></head><body>",
             f"<h1 class=\"{state}\">{html.escape(_title(data))}</h1>", f"<p>{html.escape(_summary(data))}</p>",
             "<h2>Headline</h2>", "<table id=\"headline\"><tbody>"
             + "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in headline_rows(data))
             + "</tbody></table>"]
    for title, header, rows in _tables(data):
        parts += [f"<h2>{html.escape(title)}</h2>", _html_table(header, rows) if rows else "<p>(none)</p>"]
    parts.append("<h2>Plots</h2>")
    for name in PLOTS:
        if name in images:
            uri = "data:image/png;base64," + base64.b64encode(images[name]).decode()
            parts.append(f"<img alt=\"{name}\" src=\"{uri}\">")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(data: dict, out: Path) -> dict[str, Path]:
    """Write the report folder; the paths written, by name. OutputUnwritable names the problem."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        images = plots.render(data)
        paths = {"json": out / "drill.json", "markdown": out / "report.md", "html": out / "report.html"}
        for name, png in images.items():
            paths[name] = out / PLOTS[name]
            paths[name].write_bytes(png)
        paths["json"].write_text(json.dumps(data, indent=2) + "\n")
        paths["markdown"].write_text(format_markdown(data))
        paths["html"].write_text(format_html(data, images))
    except OSError as exc:
        raise OutputUnwritable(f"cannot write the drill report to {out}: {exc.strerror or exc}") from None
    return paths
