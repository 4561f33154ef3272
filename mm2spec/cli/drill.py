"""``mm2spec drill SPEC --env ENV``: a DR drill on the live setup, and a report folder.

Progress goes to stderr (phases, and each playbook task as ``mm2spec failover`` shows it); the
headline figures and the report's path go to stdout. Exit 0 when the drill passed, 1 when a phase
failed (the report is written all the same and says where it stopped) or the input is bad.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

from mm2spec.cli.playbook import Progress
from mm2spec.components import require_module
from mm2spec.errors import OperationRefused, OutputUnwritable


def _settings(args: argparse.Namespace):
    from mm2spec.ops.drill.drill import DrillSettings

    for flag, value, low in (("--rate", args.rate, 0.1), ("--record-bytes", args.record_bytes, 64),
                             ("--duration", args.duration, 0), ("--probe-partitions", args.probe_partitions, 1),
                             ("--settle-timeout", args.settle_timeout, 1), ("--verify-timeout", args.verify_timeout, 0)):
        if value < low:
            raise OperationRefused(f"{flag} {value:g}: must be at least {low:g}")
    return DrillSettings(rate=args.rate, record_bytes=args.record_bytes, duration=args.duration,
                         probe_topics=tuple(args.probe_topic or ()), probe_groups=tuple(args.probe_group or ()),
                         probe_partitions=args.probe_partitions, settle_timeout=args.settle_timeout,
                         verify_timeout=args.verify_timeout, allow_existing_topics=args.allow_existing_topics)


def _out_dir(args: argparse.Namespace, spec_name: str) -> Path:
    """The report folder, made before the drill starts: a drill must not run to lose its report."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out or f"drill-{spec_name}-{stamp}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputUnwritable(f"--out {out}: cannot create the report folder: {exc.strerror or exc}") from None
    return out


class PhaseLines:
    """Prints a line when a drill phase starts and ends (stderr), between the task lines."""

    def __init__(self, progress: Progress):
        self.progress = progress

    def __call__(self, event: str, phase: dict) -> None:
        if self.progress.quiet:
            return
        self.progress._clear()
        if event == "start":
            print(f"DRILL [{phase['name']}] {phase['title']}", file=sys.stderr, flush=True)
        else:
            print(f"{phase['status']}: [{phase['name']}] ({phase['seconds']:.1f}s) {phase['message']}",
                  file=sys.stderr, flush=True)


def cmd_drill(args: argparse.Namespace) -> int:
    require_module("matplotlib")  # the plots are drawn last: a drill must not run to lose its report
    from mm2spec.ops.playbooks.context import Options, parse_limit
    from mm2spec.ops.drill.drill import Drill, plan_drill
    from mm2spec.ops.drill.report import headline_rows, write_report
    from mm2spec.spec.load import load_desired_state

    state = load_desired_state(args.spec, args.env)
    flows, groups = parse_limit(args.limit)
    options = Options(limit_flows=flows, limit_groups=groups, state_dir=args.state_dir, connect_url=args.connect_url)
    settings = _settings(args)
    plan = plan_drill(state, options, settings)
    out = _out_dir(args, state.name)
    progress = Progress(diff=False, quiet=args.quiet)
    drill = Drill(state, options, settings, plan, on_phase=PhaseLines(progress), listener=progress.task,
                  progress=progress.wait)
    try:
        drill.run()
    finally:
        progress._clear()
        data = drill.to_json()
        paths = write_report(data, out)
    width = max(len(name) for name, _ in headline_rows(data))
    for name, value in headline_rows(data):
        print(f"{name:<{width}}  {value}")
    print(f"report: {paths['html']} (and {paths['markdown'].name}, {paths['json'].name}, plots in {out})")
    return data["exitCode"]


def add_parsers(commands) -> None:
    p = commands.add_parser("drill", help="a DR drill: verify, failover, probe, failback, verify, under load; a report")
    p.add_argument("spec", help="the DR spec YAML file")
    p.add_argument("--env", help="the environment (default: the base spec)")
    p.add_argument("--out", help="the report folder (default ./drill-<spec>-<UTC time>)")
    p.add_argument("--duration", type=float, default=20.0, metavar="S",
                   help="seconds of load on each side: before the failover, on DR, after the failback (default 20)")
    p.add_argument("--rate", type=float, default=100.0, metavar="N", help="records/s written to the probe topics (default 100)")
    p.add_argument("--record-bytes", type=int, default=200, metavar="B", help="bytes per probe record (default 200)")
    p.add_argument("--probe-topic", action="append", metavar="NAME",
                   help="a topic the drill creates and writes to (repeatable; default: each flow's probe topic "
                        "mm2spec-probe-<flow>, which its mirror always carries); the flows must mirror it")
    p.add_argument("--probe-group", action="append", metavar="NAME",
                   help="a consumer group the drill runs on the probe topics (repeatable; default: each flow's probe "
                        "group mm2spec-probe-<flow>, which it always checkpoints); the flows must checkpoint it")
    p.add_argument("--probe-partitions", type=int, default=3, metavar="N", help="partitions of a new probe topic (default 3)")
    p.add_argument("--allow-existing-topics", action="store_true",
                   help="write into a probe topic that already holds records no drill wrote (a production topic)")
    p.add_argument("--settle-timeout", type=float, default=300.0, metavar="S",
                   help="longest wait for the probe topics to be mirrored, and at the end for every record (default 300)")
    p.add_argument("--verify-timeout", type=float, default=180.0, metavar="S",
                   help="how long verify is retried until DR is healthy (default 180)")
    p.add_argument("--limit", action="append", metavar="flow=NAME,group=REGEX",
                   help="only these flows and/or groups (repeatable); the flows must go from one source to one "
                        "target: on an active-active or fan-in spec, pick one direction or source, e.g. "
                        "--limit flow=primary-to-dr")
    p.add_argument("--state-dir", help="the Spark job's state folder (default .mm2spec/spark/<spec name>)")
    p.add_argument("--connect-url", help="the Connect REST URL (default: the spec's connect.restUrl)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=cmd_drill)
