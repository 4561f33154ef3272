"""``mm2spec dev up|status|down|seed|wait-mirrored``: local clusters and demo data.

Argument parsing only; the work is in :mod:`mm2spec.dev.stack` and :mod:`mm2spec.dev.demo`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mm2spec.dev.stack import DEFAULT_ROOT, READY_TIMEOUT_S, DevStack
from mm2spec.spec.load import load_desired_state


def add_parsers(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``dev`` and its subcommands; each sets ``func`` to a handler returning an exit code."""
    dev = subparsers.add_parser(
        "dev",
        help="run local Kafka clusters (primary, dr) and a Connect worker for development",
        description="Start, inspect and stop local single-node Kafka clusters 'primary' (127.0.0.1:19092) "
        "and 'dr' (127.0.0.1:29092) and a Kafka Connect worker (http://127.0.0.1:8083), without Docker.",
    )
    commands = dev.add_subparsers(dest="dev_command", metavar="{up,status,down,seed,wait-mirrored}", required=True)

    up = commands.add_parser("up", help="start the clusters (and Connect) and wait until they answer")
    security = up.add_mutually_exclusive_group()
    security.add_argument(
        "--secure",
        action="store_true",
        help="SASL/SCRAM-SHA-512 with the StandardAuthorizer: users admin (super user) and mm2 (no ACLs)",
    )
    security.add_argument(
        "--tls",
        action="store_true",
        help="TLS with a private CA per cluster: mTLS on the client port (users are CN=admin, CN=mm2, CN=intruder) "
        "and SASL_SSL/SCRAM-SHA-512 on a second port (primary 19094, dr 29094), with the StandardAuthorizer",
    )
    worker = up.add_mutually_exclusive_group()
    worker.add_argument("--no-connect", action="store_true", help="do not start a Kafka Connect worker")
    worker.add_argument(
        "--connect-config",
        type=Path,
        metavar="FILE",
        help="connect-distributed.properties for the worker (e.g. from `mm2spec render`); "
        "default: a minimal worker on the dr cluster",
    )
    up.add_argument("--mm2-config", type=Path, metavar="FILE", help="also run MirrorMaker 2 in dedicated mode with this file")
    up.add_argument("--timeout", type=float, default=READY_TIMEOUT_S, metavar="SECONDS",
                    help=f"readiness deadline per step (default {READY_TIMEOUT_S:.0f})")
    _add_dir(up)
    up.set_defaults(func=_up)

    status = commands.add_parser("status", help="show what runs where")
    _add_dir(status)
    status.set_defaults(func=_status)

    down = commands.add_parser("down", help="stop what `dev up` started (safe to repeat)")
    down.add_argument("--wipe", action="store_true", help="also delete the clusters' data and logs")
    _add_dir(down)
    down.set_defaults(func=_down)

    seed = commands.add_parser("seed", help="create the spec's source topics, produce demo records, commit group offsets")
    _add_spec(seed)
    seed.add_argument("--records", type=int, default=3000, help="records per topic (default 3000)")
    seed.set_defaults(func=_seed)

    wait = commands.add_parser("wait-mirrored", help="wait until every mirrored partition holds its source's records")
    _add_spec(wait)
    wait.add_argument("--timeout", type=float, default=180, metavar="SECONDS", help="give up after (default 180)")
    wait.set_defaults(func=_wait_mirrored)
    return dev


def _add_spec(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="the DR spec YAML file")
    parser.add_argument("--env", help="the environment (default: the base spec)")


def _add_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"data, logs and state folder (default: $MM2SPEC_DEV_DIR or {DEFAULT_ROOT})",
    )


def _up(args: argparse.Namespace) -> int:
    stack = DevStack(args.dir, secure=args.secure, tls=args.tls)
    stack.up(
        with_connect=not args.no_connect,
        connect_config=args.connect_config,
        mm2_config=args.mm2_config,
        timeout=args.timeout,
    )
    return 0


def _status(args: argparse.Namespace) -> int:
    stack = DevStack(args.dir)
    state = stack.status()
    print(stack.describe(state))
    return 0 if state and all(p.alive() for p in state.processes) else 1


def _down(args: argparse.Namespace) -> int:
    stack = DevStack(args.dir)
    stopped = stack.down(wipe=args.wipe)
    print(f"stopped {', '.join(stopped)}" if stopped else f"nothing running from {stack.root}")
    if args.wipe:
        print(f"deleted the dev data in {stack.root}")
    return 0


def _seed(args: argparse.Namespace) -> int:
    from mm2spec.dev import demo  # the Kafka client loads only for the commands that produce and read records

    for line in demo.seed(load_desired_state(args.spec, args.env), args.records):
        print(line, flush=True)
    return 0


def _wait_mirrored(args: argparse.Namespace) -> int:
    from mm2spec.dev import demo

    complete, rows = demo.wait_mirrored(load_desired_state(args.spec, args.env), args.timeout)
    print(f"{'flow':<16} {'source topic':<18} {'target topic':<24} {'source':>8} {'target':>8}")
    for row in rows:
        print(f"{row.flow:<16} {row.source_topic:<18} {row.target_topic:<24} {row.source_records:>8} {row.target_records:>8}")
    if complete:
        print("every mirrored partition holds as many records as its source")
        return 0
    print(f"error: the target did not catch up within {args.timeout:.0f} s", file=sys.stderr)
    return 1
