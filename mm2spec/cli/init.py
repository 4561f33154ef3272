"""``mm2spec init [DIR]``: start a team's DR-spec repository (``mm2spec.render.repository``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mm2spec import __version__
from mm2spec.mm2.engine_facts import DEFAULT_ENGINE
from mm2spec.render.repository import (ENGINES, RepositoryOptions, check_init_folder, check_spec, copy_wheel, init_files,
                                       parse_client_cert, parse_cluster, parse_package, parse_tls_ca, write_repository)
from mm2spec.resources import schema_path


def cmd_init(args: argparse.Namespace) -> int:
    folder = Path(args.dir)
    name = args.name or _default_name(folder)
    options = RepositoryOptions(
        name=name,
        source=parse_cluster("--source", args.source) if args.source is not None else None,
        target=parse_cluster("--target", args.target) if args.target is not None else None,
        topics=tuple(args.topic or ()),
        environments=tuple(e.strip() for e in args.environments.split(",")) if args.environments.strip() else (),
        engine=args.engine,
        tls_ca=tuple(parse_tls_ca("--tls-ca", text) for text in args.tls_ca or ()),
        client_certs=tuple(parse_client_cert("--client-cert", text) for text in args.client_cert or ()),
    )
    package = parse_package(args.package, __version__)
    files = init_files(options, schema_path("dr-spec.schema.json").read_text(encoding="utf-8"), __version__, package)
    check_spec(files)
    replaced = set(check_init_folder(folder, sorted(files) + ([package.wheel_name] if package.wheel_name else []), args.force))
    written = write_repository(files, folder)
    wheel = copy_wheel(package, folder)
    for path in sorted(written + ([wheel] if wheel else [])):
        print(f"{'replaced' if path.relative_to(folder).as_posix() in replaced else 'wrote'} {path}")
    spec = next(n for n in files if n.endswith(".dr.yaml"))
    print(f"\nNext: cd {folder} && python -m venv .venv && .venv/bin/pip install -r requirements.txt "
          f"(installs {package.program}); .venv/bin/mm2spec validate {spec}; then see README.md "
          f"(pulumi stack init {options.environments[0]}, pulumi preview)")
    return 0


def _default_name(folder: Path) -> str:
    """The folder's name made a valid ``metadata.name`` (``Payments_DR`` -> ``payments-dr``);
    ``dr`` when nothing is left of it."""
    base = folder.resolve().name
    name = "-".join(part for part in "".join(c if c.isalnum() and c.isascii() else "-" for c in base.lower()).split("-")
                    if part)[:63].strip("-")
    return name or "dr"


def add_parsers(commands) -> None:
    p = commands.add_parser("init", help="start a DR-spec repository: spec, Pulumi project and stacks, program, README")
    p.add_argument("dir", nargs="?", default=".", help="the folder to write it into (default: here; created if missing)")
    p.add_argument("--name", help="the DR setup's name (metadata.name, the Pulumi project); default: from DIR")
    p.add_argument("--source", metavar="ALIAS=HOST:PORT[,...]", help="the source cluster (default: placeholders)")
    p.add_argument("--target", metavar="ALIAS=HOST:PORT[,...]", help="the DR cluster (default: placeholders)")
    p.add_argument("--topic", action="append", metavar="PATTERN",
                   help="a topic to mirror, a name or Java regex; repeat for more (default: examples)")
    p.add_argument("--environments", default="dev,staging,prod", metavar="ENV[,ENV...]",
                   help="the environments, one overlay and Pulumi stack each (default: dev,staging,prod)")
    p.add_argument("--engine", default=DEFAULT_ENGINE,
                   help=f"which runs the mirror: {', '.join(ENGINES)} (default: {DEFAULT_ENGINE})")
    p.add_argument("--package", metavar="REQUIREMENT",
                   help=f"where the repository installs mm2spec from (requirements.txt, the pre-commit hook, the CI "
                        f"workflow): a requirement (default: mm2spec=={__version__}, from the package index pip is "
                        f"configured for, PyPI or a private one by PIP_INDEX_URL; until mm2spec is on yours, give a "
                        f"wheel, which scripts/release builds, or a git URL), a URL (mm2spec @ https://..., "
                        f"https://.../mm2spec-{__version__}-py3-none-any.whl, git+https://host/org/mm2spec.git@TAG) or "
                        f"a wheel's path, which is copied into the repository's wheels/ folder (commit it)")
    p.add_argument("--force", action="store_true",
                   help="write into a folder that holds files (files of the same name are replaced, others kept)")
    p.add_argument("--tls-ca", action="append", metavar="ALIAS=CA.pem",
                   help="the cluster is reached over TLS with this CA (PEM; a private CA); repeat per cluster")
    p.add_argument("--client-cert", action="append", metavar="ALIAS=CERT.pem,KEY.pem",
                   help="the mirror's client certificate and PKCS#8 key on that cluster (mutual TLS); its principal "
                        "is read from the certificate; repeat per cluster")
    p.set_defaults(func=cmd_init)
