"""``mm2spec plan``: desired state against the live clusters, printed as text, markdown or JSON."""

from __future__ import annotations

import argparse
import os
import sys

from mm2spec.live import KAFKA_REQUEST_TIMEOUT_S


def cmd_plan(args: argparse.Namespace) -> int:
    # Imported here: the Kafka client library loads only for commands that talk to clusters.
    from mm2spec.engines import engine_for
    from mm2spec.live.kafka import KafkaAdmin
    from mm2spec.plan.build import build_plan
    from mm2spec.plan.formats import to_json, to_markdown, to_text
    from mm2spec.spec.load import load_desired_state

    state = load_desired_state(args.spec, args.env)
    engine = engine_for(state)
    plan = build_plan(state, lambda alias: KafkaAdmin(state.cluster(alias), timeout=args.timeout),
                      deployment=engine.plan_changes, worker_version=engine.worker_version)
    if args.format == "json":
        sys.stdout.write(to_json(plan))
    elif args.format == "markdown":
        sys.stdout.write(to_markdown(plan))
    else:
        colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty() and not os.environ.get("NO_COLOR"))
        sys.stdout.write(to_text(plan, colour=colour))
    if args.pulumi_import_file:
        from mm2spec.components import require_module

        require_module("pulumi")
        from mm2spec.provision.plugin_package import write_import_file

        written = write_import_file(state, args.pulumi_import_file, args.pulumi_component, args.timeout)
        print(f"wrote {args.pulumi_import_file}: {written} existing resource(s) to import; run "
              f"`pulumi import --file {args.pulumi_import_file} --protect=false --generate-code=false`", file=sys.stderr)
    if plan.refused:
        print(f"error: {len(plan.refused)} change(s) cannot be applied (see above)", file=sys.stderr)
        return 1
    return 2 if args.detailed_exitcode and plan.has_changes else 0


def add_parsers(commands) -> None:
    p = commands.add_parser("plan", help="show what applying the spec would change on the live clusters")
    p.add_argument("spec", help="the DR spec YAML file")
    p.add_argument("--env", help="the environment to plan (default: the base spec)")
    p.add_argument("--format", choices=["text", "markdown", "json"], default="text")
    p.add_argument("--detailed-exitcode", action="store_true",
                   help="exit 0 when there are no changes, 2 when there are, 1 on error")
    p.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    p.add_argument("--timeout", type=float, default=KAFKA_REQUEST_TIMEOUT_S,
                   help=f"seconds to wait for each cluster (default {KAFKA_REQUEST_TIMEOUT_S:.0f})")
    p.add_argument("--pulumi-import-file", metavar="FILE",
                   help="also write Pulumi's import file (pulumi import --file FILE) for the spec's resources that "
                        "exist: topics, ACL resources, connectors (served by the provider plugin, the default)")
    p.add_argument("--pulumi-component", metavar="NAME",
                   help="the DisasterRecovery component the imported resources go under (default: the name of "
                        "./Pulumi.yaml, as the bundled program names it; '' for the stack's root)")
    p.set_defaults(func=cmd_plan)
