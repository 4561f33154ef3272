"""``mm2spec mirror``: run the Spark mirroring job in the foreground, or start / stop / inspect it."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from mm2spec.components import require_module
from mm2spec.errors import MirrorError
from mm2spec.runtime import deployment
from mm2spec.runtime.job import effective_master, job_name, load_job, render_job


def _describe_flows(job: dict) -> str:
    return ", ".join(f"{f.get('name')} "
                     f"({'exactly-once' if f.get('exactly.once.source.support') == 'enabled' else 'at-least-once'})"
                     for f in job.get("flows") or [])


def cmd_mirror(args: argparse.Namespace) -> int:
    if args.job_config:
        job = load_job(args.job_config)
    elif args.spec:
        job = render_job(args.spec, args.env)
    else:
        raise MirrorError("give a DR spec (mm2spec mirror SPEC --env ENV) or --job-config FILE")
    name = job_name(job)
    folder = deployment.state_dir_of(name, args.state_dir)
    if args.status:
        current = deployment.status(folder)
        print(json.dumps(asdict(current), indent=2))
        return 0 if current.running else 1
    if args.stop:
        print(f"stopped {name}" if deployment.stop(folder) else f"{name} is not running")
        return 0
    require_module("pyspark")  # before a line says it is mirroring: the job needs the spark extra
    if args.detach:
        started = deployment.start(job, state_dir=folder, master=args.master, wait_running=args.wait)
        print(f"started {name} (pid {started.pid}); log {started.log_file}; status {started.status_file}")
        return 0
    print(f"mirroring {name}: {_describe_flows(job)}; master {effective_master(job, args.master)}; "
          f"status file {folder / 'status.json'} (Ctrl-C stops)", flush=True)
    return deployment.run_foreground(job, state_dir=folder, master=args.master)


def add_parsers(commands) -> None:
    p = commands.add_parser("mirror", help="run the Spark mirroring job (engine: spark) in the foreground",
                            description="Render the spec's Spark job config and run it: progress lines per "
                                        "micro-batch, figures in <state dir>/status.json.")
    p.add_argument("spec", nargs="?", help="the DR spec YAML file")
    p.add_argument("--env", help="the environment to run (default: the base spec)")
    p.add_argument("--job-config", help="run this rendered spark-mirror.json instead of rendering SPEC")
    p.add_argument("--master", help="override spark.master, e.g. spark://127.0.0.1:7077 or local[2]")
    p.add_argument("--state-dir", help="folder for job.json, driver.log, status.json (default .mm2spec/spark/<name>)")
    p.add_argument("--detach", action="store_true", help="start in the background and return")
    p.add_argument("--wait", type=float, default=None, help="with --detach: wait this many seconds until it runs")
    p.add_argument("--stop", action="store_true", help="stop a job started with --detach")
    p.add_argument("--status", action="store_true", help="print the job's status (exit 1 if not running)")
    p.set_defaults(func=cmd_mirror)
