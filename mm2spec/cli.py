"""The ``mm2spec`` command line. Commands parse flags, call one function and map errors to exit codes.

Exit codes: 0 success; 1 invalid input or failure; 2 (``plan --detailed-exitcode``) changes present.
No command prints a traceback for a user error; set MM2SPEC_DEBUG=1 to see one for internal errors.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from mm2spec import __version__
from mm2spec.compile import compile_spec
from mm2spec.document import SpecSyntaxError, load_file
from mm2spec.errors import Mm2specError
from mm2spec.render import render_files, write_files
from mm2spec.validate import SpecInvalid, environments, resolve, validate


def _load_valid(spec: str, env: str | None, all_environments: bool = False):
    root = load_file(spec)
    if env is not None:
        resolve(root, env)  # unknown --env fails here, before anything else
    problems = validate(root, env, all_environments=all_environments)
    if problems:
        raise SpecInvalid(problems)
    return root


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        root = _load_valid(args.spec, args.env, all_environments=args.env is None)
    except SpecInvalid as exc:
        if args.format == "json":
            print(json.dumps({"valid": False, "errors": [d.to_json() for d in exc.diagnostics]}, indent=2))
            return 1
        raise
    checked = [args.env] if args.env else ["base"] + environments(root)
    if args.format == "json":
        print(json.dumps({"valid": True, "environments": checked}, indent=2))
    else:
        print(f"{args.spec}: valid ({', '.join(checked)})")
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    root = _load_valid(args.spec, args.env)
    state = compile_spec(resolve(root, args.env), args.env, args.spec)
    written = write_files(render_files(state), args.out)
    for path in written:
        print(f"wrote {path}")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from mm2spec.kafka import KafkaAdmin
    from mm2spec.plan import build_plan
    from mm2spec.planformat import to_json, to_markdown, to_text

    root = _load_valid(args.spec, args.env)
    state = compile_spec(resolve(root, args.env), args.env, args.spec)
    from mm2spec import mirror

    plan = build_plan(state, lambda alias: KafkaAdmin(state.cluster(alias), timeout=args.timeout),
                      spark_deployed=lambda desired: mirror.deployed_job(desired.name))
    if args.format == "json":
        sys.stdout.write(to_json(plan))
    elif args.format == "markdown":
        sys.stdout.write(to_markdown(plan))
    else:
        colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty() and not os.environ.get("NO_COLOR"))
        sys.stdout.write(to_text(plan, colour=colour))
    if plan.refused:
        print(f"error: {len(plan.refused)} change(s) cannot be applied (see above)", file=sys.stderr)
        return 1
    return 2 if args.detailed_exitcode and plan.has_changes else 0


def cmd_promote(args: argparse.Namespace) -> int:
    from mm2spec import promote

    result = promote.promote(args.spec, args.source_env, args.target_env, args.baseline)
    render = {"json": promote.to_json, "markdown": promote.to_markdown}.get(args.format, promote.to_text)
    sys.stdout.write(render(result))
    return 2 if args.detailed_exitcode and result.has_changes else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mm2spec", description="Declarative Kafka disaster recovery with MirrorMaker 2.")
    parser.add_argument("--version", action="version", version=f"mm2spec {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    p = commands.add_parser("validate", help="check a DR spec against the schema and semantic rules")
    p.add_argument("spec", help="the DR spec YAML file")
    p.add_argument("--env", help="validate this environment only (default: the base and every environment)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_validate)

    p = commands.add_parser("render", help="write Connect, MM2 and Spark configs for one environment")
    p.add_argument("spec", help="the DR spec YAML file")
    p.add_argument("--env", help="the environment to render (default: the base spec)")
    p.add_argument("--out", required=True, help="folder to write the files into")
    p.set_defaults(func=cmd_render)

    p = commands.add_parser("plan", help="show what applying the spec would change on the live clusters")
    p.add_argument("spec", help="the DR spec YAML file")
    p.add_argument("--env", help="the environment to plan (default: the base spec)")
    p.add_argument("--format", choices=["text", "markdown", "json"], default="text")
    p.add_argument("--detailed-exitcode", action="store_true",
                   help="exit 0 when there are no changes, 2 when there are, 1 on error")
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    p.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for each cluster (default 15)")
    p.set_defaults(func=cmd_plan)

    p = commands.add_parser("promote", help="show what promoting the spec from one environment to another changes")
    p.add_argument("spec", help="the DR spec YAML file")
    p.add_argument("--from", dest="source_env", required=True, help="the environment the change was proven in")
    p.add_argument("--to", dest="target_env", required=True, help="the environment to promote to")
    p.add_argument("--baseline", help="the spec the target runs today: a file, or git:REV (default git:HEAD if tracked)")
    p.add_argument("--format", choices=["text", "markdown", "json"], default="text")
    p.add_argument("--detailed-exitcode", action="store_true",
                   help="exit 0 when promotion changes nothing, 2 when it does, 1 on error")
    p.set_defaults(func=cmd_promote)

    _register_optional(commands)
    return parser


def _register_optional(commands) -> None:
    """Commands that live in their own modules (each exposes add_parser(subparsers))."""
    from mm2spec import commands as extra

    for add_parser in extra.ADDERS:
        add_parser(commands)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except Mm2specError as exc:
        # Spec problems already read FILE:LINE:COL: ...; other errors get an "error:" prefix.
        located = isinstance(exc, (SpecInvalid, SpecSyntaxError))
        print(str(exc) if located else f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # an internal error: say so briefly, never dump a traceback by default
        if os.environ.get("MM2SPEC_DEBUG"):
            traceback.print_exc()
        print(f"internal error: {type(exc).__name__}: {exc} (set MM2SPEC_DEBUG=1 for details)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
