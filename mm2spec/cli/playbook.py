"""``mm2spec playbook run|modules``, ``mm2spec verify``, ``failover`` and ``failback``: DR operations.

Progress goes to stderr as each task starts and ends (a spinner line for waits on a terminal);
the report goes to stdout in the chosen format. Exit codes: 0 done (or nothing to do), 2 with
``--check`` when changes are pending, 1 a task failed, the input is bad, or the run was not
confirmed.

A run that would change the clusters (a task it will run calls a module that writes: failover,
failback, ``--stranded=rebuild`` ...) first shows what its check mode says it would change and
asks on the terminal; ``--yes`` skips the question (automation). Without a terminal and without
``--yes`` it is refused before any cluster is contacted. ``--check`` and ``verify`` never ask.

``verify --serve PORT`` runs no playbook: it serves the DR exporter (``ops/modules/exporter``) for
Prometheus until Ctrl-C.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time

# A wait's progress line is redrawn at most this often on a terminal, and printed at most every
# PLAIN_PROGRESS_S when stderr is a file or pipe (a CI log should not get a line per poll).
SPINNER_S = 0.1
PLAIN_PROGRESS_S = 5.0


class Progress:
    """Prints task lines and wait spinners to stderr."""

    def __init__(self, diff: bool, quiet: bool):
        self.diff, self.quiet = diff, quiet
        self.tty = sys.stderr.isatty()
        self.spin = itertools.cycle("|/-\\")
        self.last = 0.0
        self.pending = False

    def _clear(self) -> None:
        if self.pending and self.tty:
            sys.stderr.write("\r\033[K")
        self.pending = False

    def wait(self, text: str) -> None:
        now = time.monotonic()
        if self.quiet or now - self.last < (SPINNER_S if self.tty else PLAIN_PROGRESS_S):
            return
        self.last = now
        if self.tty:
            sys.stderr.write(f"\r\033[K  {next(self.spin)} {text[:150]}")
            self.pending = True
        else:
            print(f"  ... {text}", file=sys.stderr)
        sys.stderr.flush()

    def task(self, event: str, task, result) -> None:
        from mm2spec.ops.playbooks.report import task_line

        if self.quiet:
            return
        self._clear()
        if event == "start":
            print(f"TASK [{task.name}] {task.module.name} ...", file=sys.stderr, flush=True)
        else:
            print(f"  {task_line(result, self.diff)}", file=sys.stderr, flush=True)


def run_playbook(args: argparse.Namespace, playbook_name: str) -> int:
    from mm2spec.ops.playbooks.context import Context, Options, parse_limit
    from mm2spec.ops.modules.catalogue import CATALOGUE
    from mm2spec.ops.playbooks.playbook import load_playbook
    from mm2spec.ops.playbooks.report import render
    from mm2spec.ops.playbooks.runner import run, writes
    from mm2spec.spec.load import load_desired_state

    playbook = load_playbook(playbook_name, CATALOGUE)
    state = load_desired_state(args.spec, args.env)
    flows, groups = parse_limit(args.limit)
    options = Options(check=args.check, diff=args.diff, source_unreachable=args.source_unreachable,
                      allow_rewind=args.allow_rewind, skip_active=args.skip_active, limit_flows=flows,
                      limit_groups=groups, state_dir=args.state_dir, connect_url=args.connect_url,
                      stranded=args.stranded, break_lease=args.break_lease)
    tags, skip_tags = _names(args.tags), _names(args.skip_tags)
    if not args.check and not args.yes and writes(playbook, tags, skip_tags):
        if not _confirmed(playbook, state, options, tags, skip_tags, args):
            return 1
    progress = Progress(args.diff, quiet=args.quiet)
    ctx = Context(state, options, progress=progress.wait)
    report = run(playbook, ctx, tags, skip_tags, listener=progress.task)
    progress._clear()
    sys.stdout.write(render(report, args.format, args.diff))
    return report.exit_code()


def _confirmed(playbook, state, options, tags: list[str], skip_tags: list[str], args: argparse.Namespace) -> bool:
    """Show what the run would change (its check mode) and ask on the terminal; refused without one."""
    from dataclasses import replace

    from mm2spec.errors import OperationRefused
    from mm2spec.ops.playbooks.context import Context
    from mm2spec.ops.playbooks.report import task_line
    from mm2spec.ops.playbooks.runner import run

    clusters = ", ".join(sorted({c for flow in Context(state, options).flows for c in (flow.source, flow.target)}))
    if not sys.stdin.isatty():
        raise OperationRefused(f"{playbook.name} changes clusters {clusters} and asks first, but stdin is not a "
                               "terminal: pass --yes to run it unattended (--check shows what it would change); "
                               "nothing was changed")
    print(f"{playbook.name}: reading what it would change (check mode, nothing is written) ...", file=sys.stderr)
    progress = Progress(args.diff, quiet=args.quiet)
    preview = run(playbook, Context(state, replace(options, check=True), progress=progress.wait), tags, skip_tags)
    progress._clear()
    shown = [t for t in preview.tasks if t.status in ("changed", "failed")]
    for task in shown:
        print(f"  {task_line(task, args.diff)}", file=sys.stderr)
    if preview.failed:
        print(f"{playbook.name}: the check failed (above): fix that first; nothing was changed", file=sys.stderr)
        return False
    if not shown:
        print("  the check found nothing to change", file=sys.stderr)
    print(f"Run {playbook.name} on {clusters} (spec {state.name}"
          + (f", env {state.environment}" if state.environment else "") + ")? Only y or yes goes ahead. [y/N] ",
          end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        print(f"{playbook.name} cancelled: nothing was changed", file=sys.stderr)
        return False
    return True


def serve_dr_exporter(args: argparse.Namespace) -> int:
    """``verify --serve PORT``: the DR exporter until Ctrl-C (or SIGTERM); a line per collection on stderr."""
    import signal
    import threading

    from mm2spec.errors import OperationRefused
    from mm2spec.ops.modules.exporter import REFRESH_SECONDS_DEFAULT, DrExporter
    from mm2spec.ops.playbooks.context import Context, Options, parse_limit
    from mm2spec.spec.load import load_desired_state

    if not 0 <= args.serve <= 65535:
        raise OperationRefused(f"--serve {args.serve}: a port is 1-65535 (0: any free port)")
    refresh = REFRESH_SECONDS_DEFAULT if args.refresh is None else args.refresh
    if refresh <= 0:
        raise OperationRefused(f"--refresh {refresh:g}: the seconds between collections must be above 0")
    state = load_desired_state(args.spec, args.env)
    flows, groups = parse_limit(args.limit)
    ctx = Context(state, Options(limit_flows=flows, limit_groups=groups))
    exporter = DrExporter(ctx, args.serve, refresh)
    exporter.listen()
    print(f"serving the DR figures of {state.name} on :{exporter.port}/metrics, collected every "
          f"{refresh:g}s; Ctrl-C stops", file=sys.stderr, flush=True)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())

    def report(collection) -> None:
        if not args.quiet:
            count = sum(len(rows) for rows in collection.series.values())
            print(f"  collected {count} series" + "".join(f"; {p}" for p in collection.problems),
                  file=sys.stderr, flush=True)

    exporter.run(stop, report)
    print("stopped", file=sys.stderr)
    return 0


def _names(values: list[str] | None) -> list[str]:
    return [n.strip() for v in values or () for n in v.split(",") if n.strip()]


def cmd_run(args: argparse.Namespace) -> int:
    return run_playbook(args, args.playbook)


def cmd_modules(_args: argparse.Namespace) -> int:
    from mm2spec.ops.modules.catalogue import CATALOGUE
    from mm2spec.ops.playbooks.playbook import VARIABLES

    for name, module in sorted(CATALOGUE.items()):
        params = ", ".join(sorted(module.args.get("properties", {}))) or "-"
        print(f"{name:<24} {module.summary} (arguments: {params})")
    print("\nwhen: variables")
    for name, meaning in VARIABLES.items():
        print(f"  {name:<20} {meaning}")
    return 0


# Every flag a playbook command may take, once; each command takes only those its playbook reads
# (COMMAND_FLAGS): a flag that would do nothing there is a usage error, not a silent no-op.
FLAGS = {
    "--check": dict(action="store_true", help="read live state and say what would change; write nothing"),
    "--diff": dict(action="store_true", help="show before -> after for each change"),
    "--tags": dict(action="append", metavar="T", help="run only tasks with these tags (comma-separated)"),
    "--skip-tags": dict(action="append", metavar="T", help="skip tasks with these tags"),
    "--limit": dict(action="append", metavar="flow=NAME,group=REGEX", help="only these flows and/or groups (repeatable)"),
    "--format": dict(choices=["text", "json", "markdown"], default="text", help="the report's format"),
    "--source-unreachable": dict(action="store_true",
                                 help="unplanned failover: the source is gone; translate from the checkpoints on DR"),
    "--allow-rewind": dict(action="store_true", help="let a commit move a group backwards"),
    "--skip-active": dict(action="store_true", help="leave groups with active members alone (they are not moved)"),
    "--state-dir": dict(help="the Spark job's state folder (default .mm2spec/spark/<spec name>)"),
    "--connect-url": dict(help="the Connect REST URL (default: the spec's connect.restUrl)"),
    "--quiet": dict(action="store_true", help="no progress lines on stderr"),
    "--yes": dict(action="store_true",
                  help="do not ask before changing the clusters (automation; without a terminal it is required)"),
    "--break-lease": dict(action="store_true",
                          help="take over the DR pair's lease from another run although it has not expired (only "
                               "when that run is dead: it stops at its next task)"),
    "--stranded": dict(choices=["keep", "rebuild"],
                       help="records on the source that never reached DR: keep them (before the failback point) or "
                            "rebuild those topics from DR (destructive); default: refuse, with the counts"),
}
_EVERY_RUN = ("--tags", "--skip-tags", "--limit", "--format", "--state-dir", "--connect-url", "--quiet", "--check")
_CHANGES = ("--diff", "--yes", "--break-lease", "--allow-rewind", "--skip-active")
COMMAND_FLAGS = {
    # verify writes nothing but the topic IDs it has not seen (verify.loss), which --check skips.
    "verify": _EVERY_RUN,
    "failover": _EVERY_RUN + _CHANGES + ("--source-unreachable",),
    "failback": _EVERY_RUN + _CHANGES + ("--stranded",),
    "run": tuple(FLAGS),  # a playbook of one's own may call any module
}


def _flags(p: argparse.ArgumentParser, command: str) -> None:
    """SPEC, --env and ``command``'s flags; the others keep their defaults so a handler reads every option."""
    p.add_argument("spec", help="the DR spec YAML file")
    p.add_argument("--env", help="the environment (default: the base spec)")
    for flag in COMMAND_FLAGS[command]:
        p.add_argument(flag, **FLAGS[flag])
    p.set_defaults(**{flag[2:].replace("-", "_"): _default(FLAGS[flag]) for flag in FLAGS if flag not in COMMAND_FLAGS[command]})


def _default(options: dict):
    """The value argparse gives a flag with these options when it is not on the command line."""
    return options.get("default", False if options.get("action") == "store_true" else None)


def add_parsers(commands) -> None:
    p = commands.add_parser("playbook", help="run a DR playbook (verify, failover, or your own copy)")
    sub = p.add_subparsers(dest="playbook_command", metavar="ACTION")
    sub.required = True
    r = sub.add_parser("run", help="run PLAYBOOK (a file, or a bundled name) against SPEC")
    r.add_argument("playbook", help="a playbook file, or a bundled one: verify, failover, failback")
    _flags(r, "run")
    r.set_defaults(func=cmd_run)
    m = sub.add_parser("modules", help="list the modules a playbook can call and the when: variables")
    m.set_defaults(func=cmd_modules)
    for name, text in (("verify", "is DR healthy? (the bundled verify playbook; exit 1 when not)"),
                       ("failover", "move consumers to DR (the bundled failover playbook)"),
                       ("failback", "copy DR's new records back and move consumers to the source (the bundled "
                                    "failback playbook)")):
        c = commands.add_parser(name, help=text)
        _flags(c, name)
        c.set_defaults(func=lambda args, name=name: run_playbook(args, name))
        if name == "verify":
            c.add_argument("--serve", type=int, metavar="PORT",
                           help="serve the DR figures (RPO per partition, checkpoint age per group, failover state, "
                                "cluster up) for Prometheus at :PORT/metrics until Ctrl-C, instead of one check")
            c.add_argument("--refresh", type=float, metavar="SECONDS",
                           help="with --serve: seconds between readings of the clusters (default 30)")
            c.set_defaults(func=lambda args: serve_dr_exporter(args) if args.serve is not None
                           else run_playbook(args, "verify"))
