"""The drill report's plots, drawn with matplotlib (Agg: no display needed) from the drill's JSON
document: throughput and replication lag over time, with the failover and failback windows
shaded, and a timeline of the phases and of each switch's tasks (the RTO split by phase)."""

from __future__ import annotations

import io
import math

SPAN_COLOURS = {"failover": "#f4a261", "failback": "#2a9d8f"}
"""Shading of each switch's window, the same in every plot."""
STATUS_COLOURS = {"passed": "#4c9f70", "failed": "#c0392b", "not run": "#bbbbbb", "ok": "#4c9f70",
                  "changed": "#3b7dd8", "running": "#999999"}
DPI = 110
SIZE = (10, 4)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _value(v) -> float:
    return math.nan if v is None else float(v)


def switch_windows(data: dict) -> list[tuple[str, float, float]]:
    """(switch, start, end) on the drill's clock, from the "<switch> started/ended" events."""
    starts = {e["name"].split()[0]: e["at"] for e in data["events"] if e["name"].endswith(" started")}
    ends = {e["name"].split()[0]: e["at"] for e in data["events"] if e["name"].endswith(" ended")}
    return [(name, at, ends.get(name, data["seconds"])) for name, at in starts.items()]


def _shade(ax, data: dict) -> None:
    for name, start, end in switch_windows(data):
        ax.axvspan(start, end, color=SPAN_COLOURS.get(name, "#cccccc"), alpha=0.3, label=name)


def _png(plt, fig) -> bytes:
    """The figure as PNG bytes; the figure is closed (pyplot keeps every open one in memory)."""
    try:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
        return buffer.getvalue()
    finally:
        plt.close(fig)


def throughput(data: dict) -> bytes:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=SIZE)
    at = [s["at"] for s in data["samples"]]
    ax.plot(at, [_value(s["producedPerSecond"]) for s in data["samples"]], label="produced (records/s)", color="#264653")
    for index, flow in enumerate(data["flows"]):
        ax.plot(at, [_value(s["flows"][index]["mirroredPerSecond"]) for s in data["samples"]],
                label=f"mirrored, {flow['flow']} (records/s)")
    _shade(ax, data)
    ax.set(xlabel="seconds since the drill started", ylabel="records/s", title="Throughput")
    ax.legend(loc="upper right", fontsize="small")
    ax.grid(alpha=0.3)
    return _png(plt, fig)


def lag(data: dict) -> bytes:
    plt = _pyplot()
    fig, (records, secs) = plt.subplots(2, 1, figsize=(SIZE[0], SIZE[1] * 1.5), sharex=True)
    at = [s["at"] for s in data["samples"]]
    for index, flow in enumerate(data["flows"]):
        records.plot(at, [_value(s["flows"][index]["lagRecords"]) for s in data["samples"]], label=flow["flow"])
        secs.plot(at, [_value(s["flows"][index]["lagSeconds"]) for s in data["samples"]], label=flow["flow"])
    for ax, unit in ((records, "records"), (secs, "seconds")):
        _shade(ax, data)
        ax.set_ylabel(f"lag ({unit})")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize="small")
    records.set_title("Replication lag: the passive cluster behind the active one")
    secs.set_xlabel("seconds since the drill started")
    return _png(plt, fig)


def timeline(data: dict) -> bytes:
    """One bar per phase, and under each switch one bar per task it ran."""
    plt = _pyplot()
    rows: list[tuple[str, float, float, str]] = []
    for phase in data["phases"]:
        rows.append((phase["name"], phase["start"], phase["seconds"], phase["status"]))
        rows += [(f"   {t['task'][:48]}", t["start"], t["seconds"], t["status"]) for t in phase["tasks"]
                 if phase["name"] in SPAN_COLOURS]
    fig, ax = plt.subplots(figsize=(SIZE[0], max(3.0, 0.32 * len(rows) + 1)))
    for y, (_label, start, length, status) in enumerate(rows):
        ax.broken_barh([(start, max(length, 0.05))], (y - 0.4, 0.8), color=STATUS_COLOURS.get(status, "#888888"))
        ax.text(start + max(length, 0.05), y, f" {length:.1f}s", va="center", fontsize="x-small")
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize="small")
    ax.invert_yaxis()
    ax.set(xlabel="seconds since the drill started", title="Timeline: phases and each switch's tasks (RTO by phase)")
    ax.grid(axis="x", alpha=0.3)
    return _png(plt, fig)


def render(data: dict) -> dict[str, bytes]:
    """Every plot as PNG bytes, by name (the names of ``report.PLOTS``)."""
    return {"throughput": throughput(data), "lag": lag(data), "timeline": timeline(data)}
