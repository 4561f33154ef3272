"""What ``mm2spec init`` writes: a team's own DR-spec repository, as file name -> content.

The repository works with the installed package and the team's own Pulumi CLI, nothing of this
checkout: the spec (a commented skeleton, or built from ``--source``/``--target``/``--topic``) with
the editor's schema modeline and a copy of the schema next to it, ``Pulumi.yaml`` and a stack file
per environment, the program (``__main__.py``: one ``DisasterRecovery`` component, imported from the
installed package so Pulumi pickles its providers by reference), ``requirements.txt``, the CI workflow
(``.github/workflows/dr-spec.yml``, from ``workflow``'s template), a pre-commit config, a ``.gitignore``
and a README for the team. ``requirements.txt``, the hook and the workflow install mm2spec from one
``PackageSource`` (``--package``,
``parse_package``: a requirement, a URL, or a local wheel that ``copy_wheel`` puts in ``wheels/``).
``init_files`` is pure; ``check_spec`` validates the spec it wrote with the
loader (from a temporary folder it deletes: the loader reads files); ``check_init_folder`` refuses a
folder that holds files (unless ``force``) and ``write_repository`` writes through ``write_files``.
The flags are checked by the DR spec schema's own rules (``NAME``, ``ALIAS``, ``ENVIRONMENT``) and
``--engine`` takes the engines of ``mm2spec.mm2.engine_facts``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mm2spec.components import versions
from mm2spec.errors import InitRefused, OutputUnwritable, SpecInvalid
from mm2spec.mm2.defaults import SPARK_MODE_FOR_NEW_SPECS
from mm2spec.mm2.engine_facts import DEFAULT_ENGINE, ENGINE_FACTS
from mm2spec.mm2.tls import certificate_principal
from mm2spec.render.files import check_output_folder, write_files
from mm2spec.render.workflow import WORKFLOW_FILE, ci_workflow
from mm2spec.spec.document import printable
from mm2spec.spec.load import load_valid
from mm2spec.spec.patterns import java_regex_error
from mm2spec.spec.schema import schema


def _schema_rule(*path: str) -> re.Pattern:
    """The ``pattern`` at ``path`` in the DR spec's JSON Schema, for ``fullmatch`` (its ``^``/``$`` dropped):
    init checks its flags by the schema's own rules, so the two cannot differ."""
    node = schema()
    for key in path:
        node = node[key]
    return re.compile(node["pattern"].removeprefix("^").removesuffix("$"))


NAME = _schema_rule("properties", "metadata", "properties", "name")
"""``metadata.name`` (the schema's rule); also the Pulumi project's name and its config namespace."""
ALIAS = _schema_rule("properties", "clusters", "propertyNames")
"""A cluster alias (the schema's rule)."""
ENVIRONMENT = _schema_rule("properties", "environments", "propertyNames")
"""An environment name (the schema's rule)."""
ADDRESS = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})")
"""One bootstrap address, ``host:port`` (an IPv6 host in brackets)."""
ENGINES = tuple(ENGINE_FACTS)
"""The engines ``--engine`` takes (mm2's table of engines)."""
ENGINE_CHOICES = " | ".join(name + (" (MM2 on Kafka Connect)" if facts.runs_on_connect_workers else "")
                            for name, facts in ENGINE_FACTS.items())
"""The skeleton's comment on ``engine``: ``spark | connect (MM2 on Kafka Connect)``."""
SCHEMA_FILE = "dr-spec.schema.json"
SKELETON_SOURCE = ("primary", ("primary-1.example.com:9092", "primary-2.example.com:9092"))
SKELETON_TARGET = ("dr", ("dr-1.example.com:9092", "dr-2.example.com:9092"))
"""The skeleton's placeholder clusters (alias, addresses), when init is given no --source/--target."""
FIXED = (".gitignore", ".pre-commit-config.yaml", "__main__.py")
"""The files whose names start with '.' or '_' (``write_files``'s ``fixed``)."""
WHEELS_FOLDER = "wheels"
"""Where ``--package PATH.whl`` copies the wheel in the repository (committed with it)."""
_VERSIONS = r"(?:~=|===|==|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+"
REQUIREMENT = re.compile(rf"mm2spec\s*(?:\[[A-Za-z0-9_, -]*\])?\s*(?P<rest>(?:{_VERSIONS}(?:\s*,\s*{_VERSIONS})*)?)",
                         re.IGNORECASE)
"""A PEP 508 requirement on mm2spec by version (``mm2spec==0.1.0``, ``mm2spec>=0.1,<0.2``): its extras are
replaced by each place's own (``[pulumi]`` for the program and CI, none for the hook); ``rest`` is kept."""
URL = re.compile(r"(?:git\+(?:https|ssh|http|file)|https|http|file)://[A-Za-z0-9._~:/?#@!&()*+,;=%\[\]-]+")
"""A URL pip installs from: a VCS URL (``git+https://host/org/mm2spec.git@v0.1.0``) or a wheel's. No
quotes, ``$``, braces or spaces: it is written into YAML and shell lines as it is."""
WHEEL_NAME = re.compile(r"mm2spec-[A-Za-z0-9_.+!]+(?:-[A-Za-z0-9_.]+){3,4}\.whl", re.IGNORECASE)
"""A wheel of mm2spec by its file name (``mm2spec-0.1.0-py3-none-any.whl``): what pip takes as one."""


@dataclass(frozen=True)
class RepositoryOptions:
    """What ``mm2spec init``'s flags ask for; every value is checked by ``init_files``."""

    name: str
    """``metadata.name`` and the Pulumi project's name."""
    source: tuple[str, tuple[str, ...]] | None = None
    """``(alias, bootstrap addresses)`` of the source cluster; None: the skeleton's placeholders."""
    target: tuple[str, tuple[str, ...]] | None = None
    """``(alias, bootstrap addresses)`` of the DR cluster; None: the skeleton's placeholders."""
    topics: tuple[str, ...] = ()
    """Topics to mirror (names or Java regexes); empty: the skeleton's examples."""
    environments: tuple[str, ...] = ("dev", "staging", "prod")
    """One overlay and one Pulumi stack each."""
    engine: str = DEFAULT_ENGINE
    """Which runs the mirror: one of ``ENGINES``."""
    tls_ca: tuple[tuple[str, str], ...] = ()
    """``(alias, CA PEM file)`` of clusters reached over TLS with a private CA (``--tls-ca``)."""
    client_certs: tuple[tuple[str, str, str], ...] = ()
    """``(alias, certificate, key)`` PEM files of the mirror's client certificate (``--client-cert``)."""


def parse_tls_ca(flag: str, text: str) -> tuple[str, str]:
    """``ALIAS=CA.pem`` -> (alias, path); InitRefused says what is wrong."""
    alias, equals, path = text.partition("=")
    if not equals or not alias or not path:
        raise InitRefused(f"{flag} needs ALIAS=CA.pem, e.g. {flag} primary=certs/primary-ca.pem")
    return alias, path


def parse_client_cert(flag: str, text: str) -> tuple[str, str, str]:
    """``ALIAS=CERT.pem,KEY.pem`` -> (alias, certificate, key); InitRefused says what is wrong."""
    alias, equals, files = text.partition("=")
    certificate, comma, key = files.partition(",")
    if not equals or not alias or not comma or not certificate or not key:
        raise InitRefused(f"{flag} needs ALIAS=CERT.pem,KEY.pem, e.g. {flag} primary=certs/mm2.pem,certs/mm2.key")
    return alias, certificate, key


def parse_cluster(flag: str, text: str) -> tuple[str, tuple[str, ...]]:
    """``ALIAS=HOST:PORT[,HOST:PORT...]`` -> (alias, addresses); InitRefused says what is wrong.
    An address is never echoed whole: it may carry ``user:password@``."""
    alias, equals, servers = text.partition("=")
    if not equals or not alias:
        raise InitRefused(f"{flag} needs ALIAS=HOST:PORT[,HOST:PORT...], e.g. {flag} primary=kafka-1:9092")
    if not ALIAS.fullmatch(alias):
        raise InitRefused(f"{flag}: cluster alias {printable(alias)[:70]!r} must be letters, digits, '_' or '-' "
                          "(at most 63, starting with a letter or digit)")
    addresses = tuple(a.strip() for a in servers.split(","))
    for address in addresses:
        if "@" in address:
            raise InitRefused(f"{flag} {alias}: an address holds no credentials (user:password@...); give HOST:PORT "
                              "and name the password's secret under the cluster's security.passwordSecret")
        port = ADDRESS.fullmatch(address)
        if not port or not 0 < int(port.group(2)) < 65536:
            raise InitRefused(f"{flag} {alias}: {printable(address)[:100]!r} is not HOST:PORT "
                              "(a port from 1 to 65535; several addresses separated by ',')")
    return alias, addresses


@dataclass(frozen=True)
class PackageSource:
    """Where the new repository installs mm2spec from (``init --package``), as each place names it."""

    program: str
    """What ``requirements.txt`` and the CI workflow's ``pip install`` take: with the ``pulumi`` extra."""
    hook: str | None
    """The pre-commit hook's ``additional_dependencies`` entry (the core, no extra); None for a wheel in the
    repository, which pre-commit cannot install (it installs hooks from its own folder): the hook then
    runs the mm2spec of ``.venv``, the program's virtualenv made from ``requirements.txt``."""
    wheel: Path | None = None
    """A local wheel that ``copy_wheel`` copies into ``WHEELS_FOLDER``."""

    @property
    def wheel_name(self) -> str | None:
        """The wheel's path in the repository (``wheels/mm2spec-0.1.0-py3-none-any.whl``), if one is copied."""
        return f"{WHEELS_FOLDER}/{self.wheel.name}" if self.wheel is not None else None


def parse_package(text: str | None, version: str) -> PackageSource:
    """``--package``: a PEP 508 requirement on mm2spec (``mm2spec==0.1.0``; the default, with this
    ``version``, from the package index pip is configured for), ``mm2spec @ URL``, a URL (a wheel's or
    ``git+https://...``) or a local wheel's path, which is copied into the repository and named from its
    root (requirements.txt and the CI workflow are installed from there). InitRefused says what is wrong."""
    if text is None:
        text = f"mm2spec=={version}"
    text = text.strip()
    shown = printable(text)[:200]
    name, at, url = text.partition("@")
    named = REQUIREMENT.fullmatch(name.strip()) if at and "://" not in name else None
    if named and not named["rest"]:
        text = url.strip()  # mm2spec[extras] @ URL: the URL, with each place's extras
    if URL.fullmatch(text):
        if not text.startswith("git+") and not WHEEL_NAME.fullmatch(text.rpartition("/")[2]):
            raise InitRefused(f"--package {shown!r}: a URL names a wheel of mm2spec (.../mm2spec-VERSION-py3-none-any.whl) "
                              "or a git repository (git+https://host/org/mm2spec.git@TAG)")
        return PackageSource(f"mm2spec[pulumi] @ {text}", f"mm2spec @ {text}")
    requirement = REQUIREMENT.fullmatch(text)
    if requirement:
        return PackageSource(f"mm2spec[pulumi]{requirement['rest']}", f"mm2spec{requirement['rest']}")
    if text.endswith(".whl") and "://" not in text:
        wheel = Path(text).expanduser()
        if not WHEEL_NAME.fullmatch(wheel.name):
            raise InitRefused(f"--package {shown!r}: not a wheel of mm2spec by its name (mm2spec-VERSION-py3-none-any.whl, "
                              "as the build names it)")
        if not wheel.is_file():
            raise InitRefused(f"--package {shown!r}: no such file; build it with scripts/release (dist/) or "
                              "pip wheel --no-deps PATH-TO-MM2SPEC")
        return PackageSource(f"./{WHEELS_FOLDER}/{wheel.name}[pulumi]", None, wheel.resolve())
    raise InitRefused(f"--package {shown!r}: give a requirement on mm2spec (mm2spec==VERSION, mm2spec @ URL), a URL "
                      "(https://.../mm2spec-VERSION-py3-none-any.whl, git+https://host/org/mm2spec.git@TAG) or the "
                      "path of a wheel (dist/mm2spec-VERSION-py3-none-any.whl)")


def copy_wheel(package: PackageSource, out_dir: str | Path) -> Path | None:
    """Copy ``package``'s local wheel into the repository (``WHEELS_FOLDER``); its path there, if any."""
    if package.wheel is None:
        return None
    target = Path(out_dir) / package.wheel_name
    try:
        target.parent.mkdir(exist_ok=True)
        if not (target.exists() and target.samefile(package.wheel)):  # init --force over its own repository
            shutil.copyfile(package.wheel, target)
    except OSError as exc:
        raise InitRefused(f"cannot copy {printable(str(package.wheel))} into {printable(str(target.parent))}: "
                          f"{exc.strerror or exc}") from None
    return target


def init_files(options: RepositoryOptions, schema_text: str, version: str,
               package: PackageSource | None = None) -> dict[str, str]:
    """File name -> content of the repository; ``schema_text`` is the installed DR-spec schema and
    ``version`` the installed mm2spec's. ``package`` is where the repository installs mm2spec from
    (``requirements.txt``, the pre-commit hook, the CI workflow); default: ``mm2spec==version`` from the
    package index."""
    _check(options)
    package = package or parse_package(None, version)
    spec_file = f"{options.name}.dr.yaml"
    files = {
        spec_file: _spec(options),
        SCHEMA_FILE: schema_text,
        "Pulumi.yaml": _pulumi_project(options, spec_file),
        "__main__.py": PROGRAM,
        "requirements.txt": f"# The Pulumi program's packages (Pulumi installs them into .venv).\n{package.program}\n",
        ".pre-commit-config.yaml": (PRE_COMMIT.format(requirement=json.dumps(package.hook)) if package.hook is not None
                                    else PRE_COMMIT_VENV.format(wheel=package.wheel_name)),
        ".gitignore": GITIGNORE,
        "README.md": _readme(options, spec_file, package),
        WORKFLOW_FILE: ci_workflow(spec_file, options.environments, _secret_names(options), package.program,
                                   versions()["PULUMI_VERSION"]),
    }
    for env in options.environments:
        files[f"Pulumi.{env}.yaml"] = (
            f"# Stack {env}: the spec with its {env!r} overlay. Cluster passwords: the secret named by the spec's\n"
            f"# passwordSecret, `pulumi config set --secret NAME --stack {env}`, else the environment variable NAME.\n"
            f"config:\n  {options.name}:spec: {spec_file}\n  {options.name}:environment: {env}\n")
    return files


def check_init_folder(out_dir: str | Path, names: list[str], force: bool) -> list[str]:
    """Refuse a folder ``init`` cannot use (InitRefused, naming why); the names of ``names`` that
    exist there already (replaced with ``force``; the folder's other files are never touched)."""
    out = Path(out_dir)
    shown = printable(str(out))
    if out.exists() and not out.is_dir():
        raise InitRefused(f"{shown} is not a folder: give a folder for the repository (it is created if missing)")
    present = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    clash = sorted(n for n in names if present and os.path.lexists(out / n))  # names may be paths (.github/...)
    if present and not force:
        listed = ", ".join(printable(n) for n in (clash or present)[:8]) + (" ..." if len(clash or present) > 8 else "")
        what = (f"it already has {listed}, which init would replace" if clash
                else f"it holds {len(present)} file{'s' if len(present) != 1 else ''} ({listed})")
        raise InitRefused(f"{shown} is not empty: {what}; use an empty folder, or --force to write the repository's "
                          "files into it (replacing files of the same name, leaving the others)")
    try:
        check_output_folder(out)
    except OutputUnwritable as exc:  # its message names --out; init has no such flag
        raise InitRefused(str(exc).replace("--out ", "")) from None
    return clash


def write_repository(files: dict[str, str], out_dir: str | Path) -> list[Path]:
    """Write the repository's files into ``out_dir`` (``write_files``, which writes one folder): the
    top-level files all or nothing, then those in subfolders (the CI workflow), folder by folder."""
    out = Path(out_dir)
    folders: dict[str, dict[str, str]] = {}
    for name, content in files.items():
        folder, _, base = name.rpartition("/")
        folders.setdefault(folder, {})[base] = content
    written = write_files(folders.pop(""), out, fixed=FIXED)
    for folder, inside in sorted(folders.items()):
        written += write_files(inside, out / folder, fixed=FIXED)
    return sorted(written)


def check_spec(files: dict[str, str]) -> None:
    """The spec ``init_files`` wrote passes ``mm2spec validate`` (every environment), or InitRefused
    with its problems: a flag's value the schema refuses is reported before anything is written."""
    spec_file = next(name for name in files if name.endswith(".dr.yaml"))
    with tempfile.TemporaryDirectory(prefix="mm2spec-init-") as folder:
        for name in (spec_file, SCHEMA_FILE):
            (Path(folder) / name).write_text(files[name], encoding="utf-8")
        try:
            load_valid(Path(folder) / spec_file, all_environments=True)
        except SpecInvalid as exc:
            problems = "\n".join(f"  {d.pointer}: {d.message}" + (f" ({d.hint})" if d.hint else "")
                                 for d in exc.diagnostics)
            raise InitRefused(f"the flags give a spec mm2spec would refuse:\n{problems}") from None


def _check(options: RepositoryOptions) -> None:
    if not NAME.fullmatch(options.name):
        raise InitRefused(f"--name {printable(options.name)[:70]!r}: use lowercase letters, digits and '-' "
                          "(at most 63, not starting or ending with '-'), e.g. --name payments-dr")
    if options.engine not in ENGINES:
        raise InitRefused(f"--engine {printable(options.engine)[:30]!r}: use one of {', '.join(ENGINES)}")
    if (options.source is None) != (options.target is None):
        raise InitRefused("give both --source and --target, or neither (a skeleton with placeholder clusters)")
    if options.source and options.target and options.source[0] == options.target[0]:
        raise InitRefused(f"--source and --target are both {options.source[0]!r}: give the clusters different aliases")
    if not options.environments:
        raise InitRefused("--environments names no environment: give at least one, e.g. dev,staging,prod")
    for env in options.environments:
        if not ENVIRONMENT.fullmatch(env):
            raise InitRefused(f"--environments: {printable(env)[:70]!r} must be letters, digits, '_' or '-'")
    if len(set(options.environments)) != len(options.environments):
        raise InitRefused("--environments names an environment twice")
    for topic in options.topics:
        problem = "it is empty" if not topic else java_regex_error(topic)
        if problem:
            shown = printable(topic)[:100]
            raise InitRefused(f"--topic {shown!r}: {'' if topic else 'not '}a topic name or Java regex: {problem}")
    aliases = [c[0] for c in (options.source or SKELETON_SOURCE, options.target or SKELETON_TARGET)]
    for flag, alias in [("--tls-ca", a) for a, _ in options.tls_ca] + [("--client-cert", a) for a, _, _ in options.client_certs]:
        if alias not in aliases:
            raise InitRefused(f"{flag} {printable(alias)[:70]!r}: not a cluster of the spec; its clusters: {', '.join(aliases)}")


def _flow(items) -> str:
    return "[" + ", ".join(json.dumps(item) for item in items) + "]"


def _secret_name(alias: str) -> str:
    """The passwordSecret the skeleton suggests for a cluster: an environment variable's name (so not
    starting with a digit), which the CI workflow reads from the GitHub secret of that name."""
    name = re.sub(r"[^A-Z0-9]", "_", alias.upper()) + "_MM2_PASSWORD"
    return f"_{name}" if name[0].isdigit() else name


def _secret_names(options: RepositoryOptions) -> tuple[str, ...]:
    """The passwordSecret names the spec's comments suggest (source, then target): the secrets the
    CI workflow passes on, so uncommenting a cluster's ``security`` needs no change to it."""
    return _secret_name((options.source or SKELETON_SOURCE)[0]), _secret_name((options.target or SKELETON_TARGET)[0])


def _cluster(alias: str, addresses: tuple[str, ...], placeholder: bool, options: RepositoryOptions) -> str:
    note = "   # placeholders: your brokers' host:port" if placeholder else ""
    head = f"  {alias}:\n    bootstrapServers: {_flow(addresses)}{note}\n"
    ca = dict(options.tls_ca).get(alias)
    cert = next(((c, k) for a, c, k in options.client_certs if a == alias), None)
    if ca is None and cert is None:
        return (head +
                f"    # security:                       # for secured clusters, e.g. SASL over TLS:\n"
                f"    #   protocol: SASL_SSL            # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL\n"
                f"    #   saslMechanism: SCRAM-SHA-512\n"
                f"    #   username: mm2\n"
                f"    #   passwordSecret: {_secret_name(alias)}   # a secret's NAME, never the password itself\n"
                f"    # a private CA or client certificates (mutual TLS): a tls section (mm2spec init --tls-ca,\n"
                f"    # --client-cert write one)\n")
    text = head + ("    security:\n"
                   "      protocol: SSL                   # TLS; SASL over TLS: SASL_SSL with saslMechanism, username, "
                   "passwordSecret\n")
    if cert is not None:
        principal = certificate_principal(cert[0]) or "User:CN=mm2"
        text += (f"      principal: {json.dumps(principal)}   # the certificate's subject as the brokers' default mapping "
                 f"names it (ssl.principal.mapping.rules may shorten it): its ACLs go to it\n")
    text += "    tls:\n"
    if ca is not None:
        text += f"      ca: {json.dumps(ca)}   # PEM: the CA that signed the brokers' certificates\n"
    if cert is not None:
        text += (f"      certificate: {json.dumps(cert[0])}   # PEM: the mirror's client certificate (mutual TLS)\n"
                 f"      key: {json.dumps(cert[1])}   # PEM, PKCS#8; encrypted: keyPasswordSecret: <secret NAME>\n")
    return text


def _spark_section(engine: str) -> str:
    """The Spark engine's mode for a new spec (``defaults.SPARK_MODE_FOR_NEW_SPECS``, said outright:
    a spec that names none runs micro-batches); nothing for an engine that runs no Spark job."""
    if not ENGINE_FACTS[engine].runs_spark_job:
        return ""
    return f"""spark:
  {"mode: " + SPARK_MODE_FOR_NEW_SPECS:<36}# each record written as it is fetched: MM2's lag (the RPO); a task slot per tasksMax
                                      # of every flow, for ever | microbatch: micro-batches (a trigger plus a batch late)
"""


def _spec(options: RepositoryOptions) -> str:
    skeleton = options.source is None
    source, source_servers = options.source or SKELETON_SOURCE
    target, target_servers = options.target or SKELETON_TARGET
    topics = options.topics or ("orders", "payments-.*")
    overlays = "".join(f"  {env}: {{}}\n" for env in options.environments)
    example_env = options.environments[0]
    return f"""\
# yaml-language-server: $schema={SCHEMA_FILE}
# The DR spec of {options.name}: which clusters take part, what to mirror and how, and what differs
# per environment. Check it with `mm2spec validate {options.name}.dr.yaml` (every environment, every
# problem at once); each field is described in {SCHEMA_FILE}, which your editor uses through the
# first line. Written by `mm2spec init`{'' if skeleton else ' from its flags'}: edit it freely.
apiVersion: mm2spec/v1
kind: DisasterRecovery
metadata:
  name: {options.name}

clusters:
{_cluster(source, source_servers, skeleton, options)}{_cluster(target, target_servers, skeleton, options)}
# One entry per replication flow (source -> target); more entries give active-active or fan-in.
mirrors:
  - name: {source}-to-{target}
    source: {source}
    target: {target}
    replicationPolicy: identity       # identity: same topic names on {target} (one-way only) | default: {source}.<topic>
    topics: {_flow(topics)}   # exact names or Java regular expressions
    groups: []                        # consumer groups whose offsets follow them to {target} (names or regexes)

{"engine: " + options.engine:<38}# which runs the mirror: {ENGINE_CHOICES}
{_spark_section(options.engine)}
acls:
  manage: false                       # true: create the ACLs the mirror needs on both clusters (set acls.principal)

# Environments, one Pulumi stack each (Pulumi.<env>.yaml): merged over everything above as a JSON
# Merge Patch (null deletes a key; mirrors merge by name). For example, other brokers in {example_env}:
#   {example_env}:
#     clusters:
#       {source}: {{bootstrapServers: ["127.0.0.1:19092"]}}
environments:
{overlays}"""


def _pulumi_project(options: RepositoryOptions, spec_file: str) -> str:
    return f"""\
# The Pulumi project of this DR repository: one stack per environment (Pulumi.<env>.yaml). Stack
# config: {options.name}:spec (the DR spec), {options.name}:environment (its overlay), optional
# {options.name}:outDir (rendered files; default .mm2spec/out/<stack>) and {options.name}:sparkRun,
# and the cluster passwords as secrets named as the spec's passwordSecret.
name: {options.name}
description: Kafka disaster recovery from {spec_file} (topics, ACLs, MirrorMaker 2 / Spark mirroring)
runtime:
  name: python
  options:
    virtualenv: .venv                 # python -m venv .venv && .venv/bin/pip install -r requirements.txt
# The resources are served by mm2spec's provider plugin, pulumi-resource-mm2spec, which
# requirements.txt installs into .venv/bin: named here, so the CLI finds it without PATH.
plugins:
  providers:
    - name: mm2spec
      path: .venv/bin
"""


PROGRAM = '''\
"""The Pulumi program: this stack's DR setup (topics, ACLs, the mirror's deployment) from the spec.

One ``DisasterRecovery`` component reads the stack config (<project>:spec, <project>:environment,
optional <project>:outDir and <project>:sparkRun) and declares what the spec means for the clusters
as they are. It comes from the installed package (pip install 'mm2spec[pulumi]'), so that Pulumi
records its providers by reference: keep mm2spec's code there, not here. Add your own resources
beside it; they can depend on its outputs (e.g. ``dr.target_topics``).
"""

import pulumi

from mm2spec.pulumi import DisasterRecovery

config = pulumi.Config()
dr = DisasterRecovery(pulumi.get_project(), config.require("spec"), config.get("environment"),
                      out_dir=config.get("outDir"), spark_run=bool(config.get_bool("sparkRun")))
pulumi.export("targetTopics", dr.target_topics)
pulumi.export("aclBindings", dr.acl_bindings)
pulumi.export("connectors", dr.connectors)
'''

PRE_COMMIT = """\
# pre-commit (https://pre-commit.com): `pre-commit install` once, then every commit validates the
# DR specs it touches. Installs mm2spec's light core only (no pyspark, pulumi or matplotlib).
repos:
  - repo: local
    hooks:
      - id: mm2spec-validate
        name: mm2spec validate
        entry: mm2spec validate
        language: python
        additional_dependencies: [{requirement}]
        files: '\\.dr\\.ya?ml$'
"""

PRE_COMMIT_VENV = """\
# pre-commit (https://pre-commit.com): `pre-commit install` once, then every commit validates the
# DR specs it touches. mm2spec comes from {wheel}, which pre-commit cannot install for a hook
# (it installs from its own folder): the hook runs the mm2spec of .venv, made once with
# `python -m venv .venv && .venv/bin/pip install -r requirements.txt`.
repos:
  - repo: local
    hooks:
      - id: mm2spec-validate
        name: mm2spec validate
        entry: .venv/bin/mm2spec validate
        language: system
        files: '\\.dr\\.ya?ml$'
"""

GITIGNORE = """\
# The Pulumi program's virtualenv, and what mm2spec writes while it runs (rendered configs, the
# Spark job's state and checkpoints).
.venv/
.mm2spec/
__pycache__/
*.pyc
"""


def _readme(options: RepositoryOptions, spec_file: str, package: PackageSource) -> str:
    envs = list(options.environments)
    first = envs[0]
    stacks = "".join(f"pulumi stack init {env}\n" for env in envs)
    wheel_note = (f" (the wheel in `{package.wheel_name}`: commit it; pre-commit runs the mm2spec of `.venv`)"
                  if package.wheel_name else " (from the package index pip is configured for)"
                  if package.program.startswith("mm2spec[pulumi]") and "@" not in package.program else "")
    promote = (f"mm2spec promote {spec_file} --from {envs[-2]} --to {envs[-1]}   # what promoting to {envs[-1]} changes\n"
               if len(envs) > 1 else "")
    return f"""\
# {options.name}: Kafka disaster recovery

This repository holds the DR spec of `{options.name}` ([`{spec_file}`]({spec_file})) and the Pulumi
project that applies it, one stack per environment ({', '.join(f'`{e}`' for e in envs)}).
It was started with `mm2spec init`; see mm2spec's README for every field and command.

| file | what it is |
|---|---|
| `{spec_file}` | the DR spec: clusters, mirrors, per-environment overlays |
| `{SCHEMA_FILE}` | the spec's JSON Schema, for your editor (the spec's first line names it) |
| `Pulumi.yaml`, `Pulumi.<env>.yaml` | the Pulumi project and a stack per environment (which spec, which overlay) |
| `__main__.py`, `requirements.txt` | the Pulumi program: mm2spec's `DisasterRecovery` component, from the installed package |
| `.github/workflows/dr-spec.yml` | CI: each pull request's plan, `pulumi up` in order on merge, a daily drift check |
| `.pre-commit-config.yaml` | validates the spec on every commit |

## Set up

```bash
python -m venv .venv && .venv/bin/pip install -r requirements.txt   # mm2spec and its Pulumi plugin, in .venv
source .venv/bin/activate          # mm2spec on PATH (validate, plan, promote); the Pulumi CLI: https://www.pulumi.com/docs/install/
pre-commit install                 # optional: validate on every commit
pulumi login                       # your state backend (pulumi login --local: files on this machine)
{stacks}```

`requirements.txt` installs `{package.program}`{wheel_note}; the pre-commit hook and the CI
workflow (`MM2SPEC_PACKAGE`) install the same. To take mm2spec from elsewhere (another version, a
private index, a wheel, a git URL), change it in those three places (`mm2spec init --package` says
what each form looks like). `.venv` also holds mm2spec's provider plugin
(`pulumi-resource-mm2spec`), which `Pulumi.yaml` names by its folder: make it before the first
`pulumi preview`.

Passwords never go in the spec: a secured cluster's `passwordSecret` names a secret, set per stack
with `pulumi config set --secret NAME --stack ENV` (or exported as the environment variable NAME).

## Change the DR setup

```bash
mm2spec validate {spec_file}                       # every environment, every problem at once
mm2spec plan {spec_file} --env {first}              # what differs from the live clusters
pulumi preview --stack {first}                      # what Pulumi would change
pulumi up --stack {first}                           # apply
{promote}```

Review changes in pull requests: the preview (and `mm2spec plan --format markdown`) of each
environment is the review; apply on merge, environment by environment. The workflow in
`.github/workflows/dr-spec.yml` does this on GitHub: one plan comment per pull request (every
environment, and what promotion carries from each to the next), updated on each push; `pulumi up`
per environment in order on merge to main, each job in the GitHub environment of that name (add
protection rules there, e.g. required reviewers for {envs[-1]}); a daily drift check that fails when
the clusters differ from the stacks or the spec. It reads the cluster passwords from GitHub secrets
named as the spec's `passwordSecret` ({", ".join(f"`{n}`" for n in _secret_names(options))}), and the
Pulumi state from `PULUMI_ACCESS_TOKEN` or the variable `PULUMI_BACKEND_URL` with the secret
`PULUMI_CONFIG_PASSPHRASE`; the runners must reach the clusters.
"""
