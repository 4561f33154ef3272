"""Entry point of the Spark mirroring job: ``python spark/mirror_job.py --config spark-mirror.json``.

Runs in the foreground until SIGTERM/SIGINT; normally started by ``mm2spec mirror`` or by
``mm2spec.runtime.deployment.start()`` (the Pulumi Spark deployment). The driver runs here (client deploy
mode); ``spark.master`` in the config picks local[N] or a spark:// standalone cluster.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mm2spark.config import JobConfigError, load_job_config
from mm2spark.writer import INSTALL_HINT, WRITER_JAR
from mm2spec.errors import ComponentMissing, Mm2specError


def default_jars() -> list[str]:
    """Spark's Kafka connector (scripts/install-spark.sh), from mm2spec's component lookup."""
    from mm2spec.components import components

    return [str(p) for p in components().spark_kafka_jars]


def main(argv: list[str] | None = None) -> int:
    # No abbreviations: a flag mistyped in a deployment must fail, not match another flag's prefix.
    parser = argparse.ArgumentParser(description="Mirror Kafka topics with Spark, in MM2's formats.", allow_abbrev=False)
    parser.add_argument("--config", required=True, help="the rendered spark-mirror.json")
    parser.add_argument("--status-file", help="where to keep the JSON status (default: <checkpoint>/status.json)")
    parser.add_argument("--jars", help="comma-separated jars for spark.jars (default: the installed connector)")
    parser.add_argument("--master", help="override spark.master from the config")
    parser.add_argument("--max-restarts", type=int, help="give up after this many failed-query restarts")
    parser.add_argument("--control-file", help='JSON {"paused": [flow names]}: flows whose queries stay stopped '
                        "while the others run (read at start and about once a second)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("py4j", "py4j.clientserver"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        job = load_job_config(args.config)
    except (JobConfigError, Mm2specError) as exc:
        return _user_error(exc)
    if args.master:
        from dataclasses import replace

        job = replace(job, spark=replace(job.spark, master=args.master))
    try:
        jars = args.jars.split(",") if args.jars else default_jars()
    except ComponentMissing as exc:  # its message says how to install
        return _user_error(exc)
    if not any(Path(j).name == WRITER_JAR for j in jars):
        return _user_error(f"the mm2spec writer jar ({WRITER_JAR}) is missing from spark.jars; {INSTALL_HINT}")
    status_file = args.status_file or str(Path(job.spark.checkpoint_location) / "status.json")
    from mm2spark.pipeline import run

    try:
        return run(job, jars, status_file, max_restarts=args.max_restarts, control_file=args.control_file)
    except (JobConfigError, Mm2specError) as exc:  # at start: a cluster away, an unusable setting
        return _user_error(exc)


def _user_error(problem: Exception | str) -> int:
    """A problem the user can fix: its message on stderr, exit code 1, no traceback."""
    print(f"error: {problem}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
