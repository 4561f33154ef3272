"""``mm2spec validate|render|promote``: the offline commands on a spec file."""

from __future__ import annotations

import argparse
import json
import sys

from mm2spec.cli.error_report import error_entries, error_text
from mm2spec.errors import Mm2specError
from mm2spec.render import render_files, write_files
from mm2spec.render.files import check_output_folder
from mm2spec.spec import promote
from mm2spec.spec.load import load_desired_state, load_valid
from mm2spec.spec.validate import environments


def cmd_validate(args: argparse.Namespace) -> int:
    """Every file is checked and reported (a pre-commit hook passes all it matches at once); exit 1 when
    any is invalid."""
    results = [_validate_file(path, args.env, args.format) for path in args.spec]
    valid = all(result["valid"] for result in results)
    if args.format == "json":
        print(json.dumps({"valid": valid, "files": results}, indent=2))
    return 0 if valid else 1


def _validate_file(path: str, env: str | None, output: str) -> dict:
    """One file's entry of ``validate --format json``; in text, its line (valid) or its errors (stderr)."""
    try:
        root = load_valid(path, env, all_environments=env is None)
    except Mm2specError as exc:
        text = error_text(exc, path)
        if output != "json":
            print(text, file=sys.stderr)
        return {"file": path, "valid": False, "environments": [], "errors": error_entries(exc, text, path)}
    checked = [env] if env else ["base"] + environments(root)
    if output != "json":
        print(f"{path}: valid ({', '.join(checked)})")
    return {"file": path, "valid": True, "environments": checked, "errors": []}


def cmd_render(args: argparse.Namespace) -> int:
    check_output_folder(args.out)  # before loading: a large spec takes time and memory to render
    for path in write_files(render_files(load_desired_state(args.spec, args.env)), args.out):
        print(f"wrote {path}")
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    result = promote.promote(args.spec, args.source_env, args.target_env, args.baseline)
    render = {"json": promote.to_json, "markdown": promote.to_markdown}.get(args.format, promote.to_text)
    sys.stdout.write(render(result))
    return 2 if args.detailed_exitcode and result.has_changes else 0


def _same_environments(args: argparse.Namespace) -> str | None:
    if args.source_env == args.target_env:
        return (f"--from and --to are both {args.source_env}: promote compares the environment a change was "
                "proven in with another one, e.g. --from staging --to prod")
    return None


def add_parsers(commands) -> None:
    p = commands.add_parser("validate", help="check DR specs against the schema and semantic rules")
    p.add_argument("spec", nargs="+", help="the DR spec YAML files (each is checked and reported)")
    p.add_argument("--env", help="validate this environment only (default: the base and every environment)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_validate)

    p = commands.add_parser("render", help="write Connect, MM2 and Spark configs for one environment")
    p.add_argument("spec", help="the DR spec YAML file")
    p.add_argument("--env", help="the environment to render (default: the base spec)")
    p.add_argument("--out", required=True, help="folder to write the files into")
    p.set_defaults(func=cmd_render)

    p = commands.add_parser("promote", help="show what promoting the spec from one environment to another changes")
    p.add_argument("spec", help="the DR spec YAML file")
    p.add_argument("--from", dest="source_env", required=True, help="the environment the change was proven in")
    p.add_argument("--to", dest="target_env", required=True, help="the environment to promote to")
    p.add_argument("--baseline", help="the spec the target runs today: a file, or git:REV (default git:HEAD if tracked)")
    p.add_argument("--format", choices=["text", "markdown", "json"], default="text")
    p.add_argument("--detailed-exitcode", action="store_true",
                   help="exit 0 when promotion changes nothing, 2 when it does, 1 on error")
    p.set_defaults(func=cmd_promote, usage_problem=_same_environments)
