"""Property-based fuzzing of the offline commands (validate, render, promote) on hostile specs.

Three kinds of input (Hypothesis strategies):
- **structure-aware**: a valid DR spec with random edits (a field set to a hostile value, removed, or
  an environment overlay added), serialised as YAML, with a canary secret in every place a secret can
  be written (inline passwords, JAAS configs, PEM keys, URL passwords) and in the promote baseline;
- **type changes**: a valid spec (the examples, or the one here) with fields of the schema, any of
  them (``tests.kit.spec_shapes``), given a value of another type, in the base or in an overlay: the
  semantic rules, merging and rendering run on what the schema has refused and must take any shape;
- **byte-level**: the example specs with bytes, lines and hostile YAML snippets inserted, deleted or
  swapped (no canary: a mutation could legitimately move it into a place that is echoed).

Each case runs the CLI in-process (``mm2spec.cli.main``) and must hold: exit 0 or 1, never an
internal error or a traceback; the canary nowhere in stdout, stderr or any file; nothing written when
a command fails; ``--format json`` always valid JSON; no case over ``CASE_CPU_LIMIT_S`` of CPU (a
runaway computation) or ``CASE_DEADLINE_MS`` of wall time (a blocked one).

CI runs ``CI_CASES`` cases per property (``TYPE_CI_CASES`` of type changes) with a fixed seed; ``scripts/fuzz N``
runs N with a random one.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import yaml
from hypothesis import HealthCheck, event, given, settings, strategies as st

from mm2spec.cli import main
from tests.kit.spec_shapes import TYPE_CHANGES, field_paths, put

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

CANARY = "k4n4ry-S3cr3t!x"
"""A secret that must never come out. Not a valid secret *name* ('-', '!'), so no rule may legitimately
echo it as one."""
CI_CASES = 50
"""Cases per property in CI: each runs six commands (~90 ms of CPU a case; 120 cases per property took
97 s wall at a load of 13-16 on two cores), so 50 keeps the suite under a minute on a loaded machine;
``scripts/fuzz`` runs many more."""
CASES = int(os.environ.get("MM2SPEC_FUZZ_CASES", CI_CASES))
CASE_CPU_LIMIT_S = 30.0
"""CPU seconds a case may spend: more is a runaway (an alias bomb, a quadratic walk). Measured in CPU,
not wall time, because the machine's load must not decide: the slowest legitimate case (six commands
on a 50,000-element list, long run only) spends about 6 s of CPU, which took 150 s of wall time at a
load of 57 on two cores and failed a wall-clock deadline of 60 s."""
CASE_DEADLINE_MS = 900_000
"""Wall time a case may take: only a command blocked for good (waiting on input, a lock) gets there;
a slow machine does not (the 150 s above)."""

FUZZ_SETTINGS = settings(
    max_examples=CASES, deadline=CASE_DEADLINE_MS, database=None, print_blob=True,
    derandomize="MM2SPEC_FUZZ_CASES" not in os.environ,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])

# ------------------------------------------------------------------------------------ the values

SECRET_VALUES = [
    CANARY,
    f'org.apache.kafka.common.security.scram.ScramLoginModule required username="mm2" password="{CANARY}";',
    f"org.apache.kafka.common.security.plain.PlainLoginModule required username='mm2' password='{CANARY} x';",
    f"org.apache.kafka.common.security.plain.PlainLoginModule required password={CANARY};",
    f"required password={CANARY}",
    f"-----BEGIN PRIVATE KEY-----\nMIIEv{CANARY}\n-----END PRIVATE KEY-----\n",
    f"http://admin:{CANARY}@connect.internal:8083",
]
SENSITIVE_KEYS = ["password", "ssl.truststore.password", "ssl.key.password", "ssl.keystore.key", "sasl.jaas.config",
                  "sasl.oauthbearer.client.credentials.client.secret", "spark.ssl.keyStorePassword",
                  "producer.override.sasl.jaas.config", "fs.s3a.secret.key", "api.token"]
HOSTILE_TEXT = [
    "", " ", "x\nbad.yaml:1:1: /forged: error", "\x1b[31mred", "\u202eevil", "name\n", "a" * 5000, "(" * 3000,
    "a{99999999999}", "x{2147483647}{2147483647}", "(a+)+$", "[a-", "\\p{Alpha", "\\Qx", "${env:X}", ".*", "a,b",
    "../../etc/passwd", "CON", "a/b", "é" * 10, "\u2028", "-", "1e999", "0x10", "~", "null", "true",
]
NAMES = st.sampled_from(["primary", "dr", "east", "west", "a", "b-1", "x" * 70, "bad name", "dr\n", ""])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(HOSTILE_TEXT),
                    st.text(max_size=20))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(max_size=8) | NAMES, inner, max_size=4), max_leaves=12)
BIG_LISTS = st.sampled_from([20_000, 50_000]).map(lambda n: [f"topic-{i}" for i in range(n)]) | \
    st.just("h" * 20_000) | st.just([f"t{i}.*(x|y)+" for i in range(2_000)])
"""Values that once went quadratic. A case with one takes seconds of CPU (its outputs are large: 50,000
topics give 450,000 ACL bindings), so they have a property of their own with its own, small budget:
drawn among the ordinary values, they made the long run's first property take over an hour."""
BIG_CASES = int(os.environ.get("MM2SPEC_FUZZ_BIG_CASES", 2))
"""Cases of the big-input property: 2 in CI, ``scripts/fuzz`` runs more."""
BIG_SETTINGS = settings(FUZZ_SETTINGS, max_examples=BIG_CASES)
TYPE_CI_CASES = 20
"""Cases of the type-change property in CI (``scripts/fuzz N`` runs N): its cases are the example specs,
larger than the others', and ``test_rules_any_shape`` already puts every type at every field through the
rules; here the commands and overlays get a sample."""
TYPE_SETTINGS = settings(FUZZ_SETTINGS, max_examples=int(os.environ.get("MM2SPEC_FUZZ_CASES", TYPE_CI_CASES)))


def _base_spec() -> dict:
    return {
        "apiVersion": "mm2spec/v1", "kind": "DisasterRecovery", "metadata": {"name": "fuzz", "labels": {"team": "x"}},
        "clusters": {
            "primary": {"bootstrapServers": ["p-1:9092"],
                        "security": {"protocol": "SASL_SSL", "saslMechanism": "SCRAM-SHA-512", "username": "mm2",
                                     "passwordSecret": "PRIMARY_PASSWORD"}},
            "dr": {"bootstrapServers": ["d-1:9092"], "config": {"ssl.truststore.location": "/etc/ts.jks"}},
        },
        "mirrors": [{"name": "primary-to-dr", "source": "primary", "target": "dr", "topics": ["orders", "inv-.*"],
                     "groups": ["g1"], "tasksMax": 2, "producerOverrides": {"compression.type": "zstd"}}],
        "connect": {"cluster": "dr", "restUrl": "http://connect:8083", "config": {}},
        "spark": {"master": "local[2]", "config": {}},
        "environments": {"dev": {"mirrors": [{"name": "primary-to-dr", "tasksMax": 1}]}, "prod": {}},
    }


FIELD_PATHS = [
    ("metadata", "name"), ("metadata", "labels"), ("clusters",), ("clusters", "primary"),
    ("clusters", "primary", "bootstrapServers"), ("clusters", "primary", "security", "protocol"),
    ("clusters", "primary", "security", "passwordSecret"), ("clusters", "dr", "config"), ("mirrors",),
    ("mirrors", 0, "name"), ("mirrors", 0, "source"), ("mirrors", 0, "target"), ("mirrors", 0, "topics"),
    ("mirrors", 0, "groups"), ("mirrors", 0, "tasksMax"), ("mirrors", 0, "replicationPolicy"),
    ("mirrors", 0, "separator"), ("mirrors", 0, "config"), ("connect", "cluster"), ("connect", "restUrl"),
    ("connect", "internalTopicPrefix"), ("spark", "master"), ("spark", "triggerInterval"), ("engine",),
    ("acls", "principal"), ("environments",), ("environments", "dev"), ("environments", "dev", "mirrors"),
]
SECRET_PLACES = [
    ("clusters", "primary", "security"), ("clusters", "dr", "config"), ("mirrors", 0, "producerOverrides"),
    ("mirrors", 0, "consumerOverrides"), ("mirrors", 0, "config"), ("connect", "config"), ("spark", "config"),
    ("metadata", "labels"), ("clusters", "dr", "security", "admin"), ("environments", "prod", "spark", "config"),
]


def _child(node, part):
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int) and part < len(node):
        return node[part]
    return None


def _set(tree: dict, path: tuple, value) -> None:
    """Set ``path`` in ``tree`` to ``value`` (None deletes), creating mappings on the way where possible."""
    node = tree
    for part in path[:-1]:
        child = _child(node, part)
        if not isinstance(child, (dict, list)):
            if not isinstance(node, dict):
                return
            child = node[part] = {}
        node = child
    last = path[-1]
    if isinstance(node, dict) and value is None:
        node.pop(last, None)
    elif isinstance(node, dict):
        node[last] = value
    elif _child(node, last) is not None or (isinstance(node, list) and isinstance(last, int) and last < len(node)):
        node[last] = value


@st.composite
def specs(draw, big: bool = False) -> tuple[str, bool]:
    """A spec as YAML text, and whether a canary secret was planted in it (``big``: one field holds a
    value of BIG_LISTS)."""
    tree = _base_spec()
    for _ in range(draw(st.integers(0, 4))):
        _set(tree, draw(st.sampled_from(FIELD_PATHS)), draw(VALUES))
    if big:
        _set(tree, draw(st.sampled_from(FIELD_PATHS)), draw(BIG_LISTS))
    planted = draw(st.booleans())
    if planted:
        for _ in range(draw(st.integers(1, 3))):
            place = draw(st.sampled_from(SECRET_PLACES))
            _set(tree, place + (draw(st.sampled_from(SENSITIVE_KEYS)),), draw(st.sampled_from(SECRET_VALUES)))
        if draw(st.booleans()):
            _set(tree, ("connect", "restUrl"), f"http://admin:{CANARY}@connect:8083")
    text = yaml.safe_dump(tree, sort_keys=False, allow_unicode=draw(st.booleans()), width=10**6)
    if planted and draw(st.booleans()):  # a tagged scalar under a password-like key
        tag = draw(st.sampled_from(["!!binary", "!!str", "!custom", "!!python/str", "!!int", "!!bool"]))
        text += f"\nextra:\n  password: {tag} {json.dumps(CANARY)}\n"
    return text, planted


@st.composite
def type_changed_specs(draw) -> tuple[str, str]:
    """A valid spec with one to six fields of the schema set to a value of another type (a mapping,
    a list, an int, a string, null, a bool), each in the base or in an environment's overlay; and the
    spec before the changes (promote's baseline: what it carries is the changes)."""
    tree = draw(st.sampled_from([None, *EXAMPLES]).map(
        lambda path: _base_spec() if path is None else yaml.safe_load(path.read_text())))
    if draw(st.booleans()):
        tree["engine"] = draw(st.sampled_from(["spark", "connect"]))
    before = yaml.safe_dump(tree, sort_keys=False, width=10**6)
    for _ in range(draw(st.integers(1, 6))):
        place = draw(st.sampled_from([(), ("environments", "dev"), ("environments", "prod")]))
        put(tree, place + draw(st.sampled_from(field_paths())), copy.deepcopy(draw(st.sampled_from(TYPE_CHANGES))))
    return yaml.safe_dump(tree, sort_keys=False, width=10**6), before


SNIPPETS = [
    "&a [x, x, x, x, x, x, x, x, x]", "*a", "<<: *a", "<<: {x: 1}", "!!binary aGVsbG8=", "!!python/object:os.system",
    "!foo", "? [a, b]\n: 1", "1: x", "true: x", "[" * 200, "{" * 200, "\t", '"\\ud800"', '"\\x00"', "&b *b",
    "- " * 100, "!!set {a, b}", "!!omap [a: 1]", "=", "2001-12-14t21:59:43.10-05:00", ".nan", "1" * 5000, "%YAML 1.1",
    "---", "...", "\xef\xbb\xbf", "\\", "'", '"', "#", "|", ">", "@", "`", "%",
]


@st.composite
def mutated_examples(draw) -> bytes:
    """An example spec with a few byte- and line-level mutations."""
    data = bytearray(EXAMPLES[draw(st.integers(0, len(EXAMPLES) - 1))].read_bytes())
    for _ in range(draw(st.integers(1, 6))):
        where = draw(st.integers(0, len(data)))
        op = draw(st.integers(0, 4))
        if op == 0:
            data[where:where] = draw(st.sampled_from(SNIPPETS)).encode("utf-8", "surrogatepass")
        elif op == 1:
            del data[where:where + draw(st.integers(1, 200))]
        elif op == 2:
            data[where:where] = draw(st.binary(min_size=1, max_size=8))
        elif op == 3:
            lines = data.split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines[i:i] = [lines[i]] * draw(st.integers(1, 3))
            data = bytearray(b"\n".join(lines))
        else:
            start = draw(st.integers(0, len(data)))
            data[start:start] = data[where:where + draw(st.integers(1, 400))]
    return bytes(data)


# ----------------------------------------------------------------------------------- the checks

def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _files_text(folder: Path, skip: set[Path]) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in folder.rglob("*")
                     if p.is_file() and p not in skip)


def _check_offline_commands(spec_bytes: bytes, baseline_text: str, planted: bool) -> None:
    cpu = time.process_time()
    folder = Path(tempfile.mkdtemp(prefix="mm2spec-fuzz-"))
    try:
        spec, baseline = folder / "spec.yaml", folder / "baseline.yaml"
        spec.write_bytes(spec_bytes)
        baseline.write_text(baseline_text, encoding="utf-8", errors="surrogatepass")
        out = folder / "out" / "rendered"
        runs = [
            ["validate", str(spec)], ["validate", str(spec), "--format", "json"],
            ["validate", str(spec), "--env", "dev", "--format", "json"],
            ["render", str(spec), "--env", "dev", "--out", str(out)],
            ["promote", str(spec), "--from", "dev", "--to", "prod", "--baseline", str(baseline)],
            ["promote", str(spec), "--from", "dev", "--to", "prod", "--baseline", str(baseline), "--format", "json"],
        ]
        for argv in runs:
            code, stdout, stderr = _run(argv)
            what = f"mm2spec {' '.join(argv[:1] + argv[2:])}"
            event(f"{argv[0]} exit {code}")  # the outcome mix, in --hypothesis-show-statistics
            assert code in (0, 1), f"{what}: exit {code}"
            assert "internal error" not in stdout + stderr and "Traceback" not in stderr, f"{what}: {stdout}{stderr}"
            if "--format" in argv:
                json.loads(stdout)  # always one JSON document, whatever failed
            if planted:
                assert CANARY not in stdout + stderr, f"{what} printed the canary secret"
            if argv[0] == "render" and code != 0:
                assert not (folder / "out").exists(), f"{what} failed but left files behind"
        if planted:
            assert CANARY not in _files_text(folder, {spec, baseline}), "a written file holds the canary secret"
        spent = time.process_time() - cpu
        assert spent < CASE_CPU_LIMIT_S, f"the commands spent {spent:.1f} s of CPU: a runaway computation"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@FUZZ_SETTINGS
@given(spec=specs(), baseline=specs())
def test_structured_specs_never_crash_hang_or_leak(spec, baseline):
    (text, planted), (baseline_text, baseline_planted) = spec, baseline
    _check_offline_commands(text.encode("utf-8", "surrogatepass"), baseline_text, planted or baseline_planted)


@TYPE_SETTINGS
@given(specs=type_changed_specs())
def test_fields_of_another_type_never_crash(specs):
    spec, baseline = specs
    _check_offline_commands(spec.encode("utf-8"), baseline, planted=False)


@BIG_SETTINGS
@given(spec=specs(big=True), baseline=specs())
def test_big_inputs_stay_within_budget(spec, baseline):
    (text, planted), (baseline_text, baseline_planted) = spec, baseline
    _check_offline_commands(text.encode("utf-8", "surrogatepass"), baseline_text, planted or baseline_planted)


@FUZZ_SETTINGS
@given(spec=mutated_examples(), baseline=mutated_examples())
def test_mutated_examples_never_crash_or_hang(spec, baseline):
    _check_offline_commands(spec, baseline.decode("utf-8", "replace"), planted=False)
