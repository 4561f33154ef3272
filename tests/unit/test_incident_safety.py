"""Safe in an incident, without clusters: the DR pair's lease (``mm2spec.live.lease``, on an
in-memory store fenced as Kafka's transactions fence), the runner holding it, the confirmation
before a run that writes, and the bad input refused before anything changes."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from mm2spec.cli import main
from mm2spec.errors import ClusterUnreachable, KafkaOperationFailed, LeaseHeld, OperationRefused
from mm2spec.live.lease import HeldLeases, LeaseRecord, PairLease, lease_key, transactional_id
from mm2spec.live.records import GroupOffsets
from mm2spec.live.types import GroupState
from mm2spec.ops.modules import offsets
from mm2spec.ops.modules.catalogue import CATALOGUE
from mm2spec.ops.playbooks import runner
from mm2spec.ops.playbooks.context import Context, Options
from mm2spec.ops.playbooks.module import Module
from mm2spec.ops.playbooks.playbook import Playbook, Task, load_playbook
from mm2spec.ops.playbooks.report import Outcome, RunReport, TaskResult
from mm2spec.ops.playbooks.runner import run, writes
from mm2spec.spec.document import Position
from mm2spec.spec.load import load_desired_state
from tests.kit.leases import MemoryLeaseStore

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "dr-spec.example.yaml"


class Clock:
    """A clock the test moves."""

    def __init__(self, now: float = 1_800_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def _lease(store, clock, holder="alice@ops-1 pid 42", operation="failover") -> PairLease:
    return PairLease(store, "payments-dr", "primary", "dr", operation, holder=holder, ttl=60, clock=clock)


# ------------------------------------------------------------------------------------ the lease

def test_a_second_run_is_refused_with_who_since_when_and_how_then_allowed_after_release():
    store, clock = MemoryLeaseStore(), Clock()
    first = _lease(store, clock)
    first.acquire()
    assert store.record.holder == "alice@ops-1 pid 42" and store.record.expires == clock.now + 60
    second = _lease(store, clock, holder="bob@ci-7 pid 9", operation="failback")
    commits = len(store.commits)
    clock.now += 10
    with pytest.raises(LeaseHeld) as refused:
        second.acquire()
    text = str(refused.value)
    for part in ("primary -> dr", "failover by alice@ops-1 pid 42", "since 2027-01-15 08:00:00 UTC",
                 "expires in 50s", "--break-lease", "Nothing was changed"):
        assert part in text, text
    assert len(store.commits) == commits, "a refused run writes nothing"
    first.release()
    assert store.record is None
    second.acquire()
    assert store.record.holder == "bob@ci-7 pid 9" and store.record.operation == "failback"


def test_an_expired_lease_is_taken_over_and_its_old_holder_finds_it_lost():
    store, clock = MemoryLeaseStore(), Clock()
    dead = _lease(store, clock)
    dead.acquire()
    clock.now += 61
    taker = _lease(store, clock, holder="bob@ci-7 pid 9")
    taker.acquire()
    assert taker.took_over is not None and taker.took_over.holder == "alice@ops-1 pid 42"
    assert not dead.renew() and "taken over by failover by bob@ci-7 pid 9" in dead.lost
    dead.release()  # releasing a lease it no longer holds leaves the new holder's alone
    assert store.record.holder == "bob@ci-7 pid 9"


def test_break_lease_takes_an_unexpired_lease():
    store, clock = MemoryLeaseStore(), Clock()
    alive = _lease(store, clock)
    alive.acquire()
    breaker = _lease(store, clock, holder="bob@ci-7 pid 9")
    breaker.acquire(break_lease=True)
    assert store.record.token == breaker.token and not alive.renew()


def test_a_run_fenced_between_its_read_and_its_commit_reads_again_and_is_refused():
    store, clock = MemoryLeaseStore(), Clock()
    first, second = _lease(store, clock), _lease(store, clock, holder="bob@ci-7 pid 9")

    def second_slips_in(_store):
        # Both read a free lease; the second opens its writer (fencing the first) and commits first.
        store.before_commit = lambda _s: None
        second.acquire()
    store.before_commit = second_slips_in
    with pytest.raises(LeaseHeld, match="bob@ci-7 pid 9"):
        first.acquire()
    assert store.record.token == second.token
    assert [c.token for c in store.commits] == [second.token], "the fenced commit never landed"


def test_renewal_extends_the_lease_and_a_lease_not_renewed_in_time_is_lost():
    store, clock = MemoryLeaseStore(), Clock()
    lease = _lease(store, clock)
    lease.acquire()
    clock.now += 20
    assert lease.renew() and store.record.expires == clock.now + 60
    store.unreachable = True
    clock.now += 30
    assert lease.renew(), "a failed renewal is retried while the lease is still valid"
    clock.now += 31
    assert not lease.renew() and "could not be renewed before it expired" in lease.lost


def test_leases_of_several_pairs_are_all_or_nothing():
    stores = {pair: MemoryLeaseStore() for pair in (("primary", "dr"), ("east", "dr"))}
    clock = Clock()
    PairLease(stores[("primary", "dr")], "s", "primary", "dr", "failover", holder="other", clock=clock).acquire()
    held = HeldLeases([PairLease(stores[p], "s", p[0], p[1], "failover", holder="me", clock=clock) for p in stores])
    with pytest.raises(LeaseHeld):
        held.acquire()
    assert stores[("east", "dr")].record is None, "the lease taken before the refusal is released"


def test_a_writer_fenced_every_time_gives_up_clearly():
    store, clock = MemoryLeaseStore(), Clock()
    store.before_commit = lambda s: s.open_writer()  # someone fences every writer before it commits
    with pytest.raises(KafkaOperationFailed, match="kept fencing"):
        _lease(store, clock).acquire()


def test_the_record_the_key_and_the_transactional_id():
    record = LeaseRecord("payments-dr", "primary", "dr", "a@h pid 1", "failover", "t0k", 1.5, 61.5)
    assert LeaseRecord.from_json(record.to_json()) == record and record.to_json()["formatVersion"] == 1
    assert lease_key("payments-dr", "primary", "dr") == "lease/payments-dr/primary->dr"
    # The DR-state reader splits keys at the last "/": a lease never reads as a flow of a spec.
    assert lease_key("payments-dr", "primary", "dr").rpartition("/")[0] != "payments-dr"
    assert transactional_id("payments-dr", "primary", "dr") == "mm2spec.lease.payments-dr.primary.dr"


# ------------------------------------------------------------------------------------ the runner

class OfflineContext(Context):
    """Reads no cluster: no flow failed over, leases in memory, group clients from ``groups``."""

    def __init__(self, *args, leases=None, groups=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.leases = {} if leases is None else leases
        self.fake_groups = groups or {}

    def failover_states(self, refresh: bool = False):
        return {}

    def lease_store(self, source: str, target: str) -> MemoryLeaseStore:
        return self.leases.setdefault((source, target), MemoryLeaseStore())

    def client(self, kind, alias, **options):
        if kind is GroupOffsets:
            return self.fake_groups[alias]
        return super().client(kind, alias, **options)


def _context(check: bool = False, leases=None, groups=None, spec=EXAMPLE, **options) -> OfflineContext:
    return OfflineContext(load_desired_state(spec, "dev" if spec == EXAMPLE else None),
                          Options(check=check, **options), leases=leases, groups=groups)


def _task(name: str, fn, writes_: bool = True, tags=()) -> Task:
    return Task(name, Module(f"test.{name}", name, fn, writes=writes_), {}, tuple(tags), None,
                Position("p.yaml", 1, 1), False)


def test_a_run_that_writes_holds_the_lease_and_releases_it_also_when_a_task_fails():
    leases: dict = {}
    seen = []

    def write(ctx, _args):
        seen.append(leases[("primary", "dr")].record)
        return [Outcome("changed", "dr", "wrote")]

    def fail(_ctx, _args):
        raise OperationRefused("boom")

    playbook = Playbook("failover", "", (_task("write", write), _task("fail", fail)), "p.yaml")
    report = run(playbook, _context(leases=leases))
    assert report.exit_code() == 1
    assert seen[0] is not None and seen[0].operation == "failover" and seen[0].spec == "payments-dr"
    assert leases[("primary", "dr")].record is None, "released after the failed task"


def test_check_mode_and_read_only_runs_take_no_lease():
    leases: dict = {}
    playbook = Playbook("failover", "", (_task("write", lambda c, a: [Outcome("changed", "dr", "would")]),), "p.yaml")
    run(playbook, _context(check=True, leases=leases))
    reader = Playbook("verify", "", (_task("read", lambda c, a: [Outcome("ok", "dr", "fine")], writes_=False),), "p.yaml")
    run(reader, _context(leases=leases))
    assert leases == {}
    assert all(not m.writes for name, m in CATALOGUE.items() if name.startswith("verify."))
    assert not writes(load_playbook("verify", CATALOGUE)) and writes(load_playbook("failback", CATALOGUE))
    assert not writes(load_playbook("failback", CATALOGUE), tags=["preflight"])


def test_a_lease_held_by_another_run_refuses_the_run_before_its_first_task():
    leases = {("primary", "dr"): MemoryLeaseStore()}
    PairLease(leases[("primary", "dr")], "payments-dr", "primary", "dr", "failback", holder="bob@ci-7 pid 9").acquire()
    ran = []
    playbook = Playbook("failover", "", (_task("write", lambda c, a: ran.append(1) or []),), "p.yaml")
    with pytest.raises(LeaseHeld, match="failback by bob@ci-7 pid 9"):
        run(playbook, _context(leases=leases))
    assert ran == []


def test_a_run_that_lost_its_lease_stops_before_its_next_task(monkeypatch):
    leases: dict = {}

    def taken_over(ctx, _args):
        PairLease(leases[("primary", "dr")], "payments-dr", "primary", "dr", "failover",
                  holder="bob@ci-7 pid 9").acquire(break_lease=True)
        for lease in held:
            lease.renew()  # what the heartbeat does every ttl / 4
        return [Outcome("changed", "dr", "wrote")]

    held: list[PairLease] = []
    real = runner.hold_leases

    def keep(ctx, operation):
        leases_ = real(ctx, operation)
        held.extend(leases_.leases)
        return leases_
    after = []
    playbook = Playbook("failover", "", (_task("first", taken_over), _task("second", lambda c, a: after.append(1) or [])),
                        "p.yaml")
    monkeypatch.setattr(runner, "hold_leases", keep)
    report = run(playbook, _context(leases=leases))
    assert after == [] and report.tasks[1].status == "failed"
    assert "taken over by failover by bob@ci-7 pid 9" in report.tasks[1].outcomes[0].message
    assert leases[("primary", "dr")].record.holder == "bob@ci-7 pid 9", "the new holder's lease stays"


ACTIVE_ACTIVE = """\
apiVersion: mm2spec/v1
kind: DisasterRecovery
metadata: {name: aa}
clusters:
  east: {bootstrapServers: ["127.0.0.1:1"]}
  west: {bootstrapServers: ["127.0.0.1:2"]}
  north: {bootstrapServers: ["127.0.0.1:3"]}
mirrors:
  - {name: east-to-west, source: east, target: west, topics: [orders], groups: [".*"]}
  - {name: west-to-east, source: west, target: east, topics: [orders], groups: [".*"]}
  - {name: west-to-north, source: west, target: north, topics: [orders], groups: [".*"]}
  - {name: north-to-east, source: north, target: east, topics: [orders], groups: [".*"]}
"""


@pytest.mark.parametrize("flows,kind", [(("east-to-west", "west-to-east"), "active-active"),
                                        (("east-to-west", "west-to-north"), "a chain")])
def test_flows_both_ways_through_a_cluster_are_refused_naming_the_topology(tmp_path, flows, kind):
    spec = tmp_path / "aa.yaml"
    spec.write_text(ACTIVE_ACTIVE)
    playbook = Playbook("failover", "", (_task("write", lambda c, a: []),), "p.yaml")
    with pytest.raises(OperationRefused) as refused:
        run(playbook, _context(spec=spec, limit_flows=flows))
    text = str(refused.value)
    assert kind in text and "one direction at a time" in text and "--limit flow=" in text and "nothing was changed" in text
    # One direction, and fan-in (north-to-east with west-to-east), run.
    assert run(playbook, _context(spec=spec, limit_flows=("west-to-east", "north-to-east"))).exit_code() == 0


# ------------------------------------------------------------------------------ bad input

class FakeGroups:
    """``GroupOffsets`` of one cluster: its groups and who consumes them."""

    def __init__(self, names=(), members=None):
        self.names, self.members = list(names), members or {}

    def groups(self):
        return self.names

    def describe(self, groups):
        return {g: GroupState(g, {}, tuple(self.members.get(g, ()))) for g in groups}


def test_a_group_limit_that_selects_nothing_is_refused_before_anything_is_written():
    groups = {"primary": FakeGroups(["orders-service", "billing-eu"]), "dr": FakeGroups()}
    ctx = _context(groups=groups, limit_groups="orders")  # a full match: "orders" is not "orders-service"
    with pytest.raises(OperationRefused, match="--limit group=orders: no group of the selected flows .*nothing was changed"):
        offsets.preflight(ctx, {})


def test_a_group_active_on_dr_is_refused_naming_its_members_unless_skip_active():
    groups = {"primary": FakeGroups(["orders-service"]),
              "dr": FakeGroups(["orders-service"], {"orders-service": ["app-1@10.0.0.7"]})}
    with pytest.raises(OperationRefused, match="orders-service: app-1@10.0.0.7.*--skip-active.*nothing was changed"):
        offsets.preflight(_context(groups=groups), {})
    outcomes = offsets.preflight(_context(groups=groups, skip_active=True), {})
    assert "1 active there left alone" in outcomes[0].message


def test_the_failover_checks_its_groups_before_any_task_that_writes():
    tasks = load_playbook("failover", CATALOGUE).tasks
    first = next(i for i, t in enumerate(tasks) if t.module.name == "offsets.preflight")
    assert all(not t.module.writes for t in tasks[:first])


def test_an_unknown_flow_in_limit_exits_1_naming_the_flows(capsys):
    assert main(["failover", str(EXAMPLE), "--env", "dev", "--limit", "flow=nope", "--yes"]) == 1
    assert "--limit flow=nope: no such flow in the spec (flows: primary-to-dr)" in capsys.readouterr().err


# ---------------------------------------------------------------------------- confirmation

class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def runs(monkeypatch):
    """The runner replaced: records each run's check flag, reports one change (or a failure)."""
    seen: list[bool] = []
    status = {"value": "changed"}

    def fake_run(playbook, ctx, tags=(), skip_tags=(), listener=None):
        seen.append(ctx.options.check)
        report = RunReport(playbook.name, ctx.spec.name, ctx.spec.environment, ctx.options.check, 0.0, 0.1)
        report.tasks = [TaskResult("Stop the mirror", "mirror.stop", status["value"], 0.1,
                                   [Outcome(status["value"], "local", "would stop the Spark job")])]
        return report
    monkeypatch.setattr(runner, "run", fake_run)
    return seen, status


def test_without_a_terminal_and_without_yes_a_failover_is_refused_and_nothing_runs(monkeypatch, capsys, runs):
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    for command in (["failover"], ["failback", "--stranded=rebuild"]):
        assert main([*command, str(EXAMPLE), "--env", "dev"]) == 1
        err = capsys.readouterr().err
        assert "stdin is not a terminal: pass --yes" in err and "nothing was changed" in err
    assert runs[0] == []


def test_on_a_terminal_the_change_is_shown_and_only_yes_goes_ahead(monkeypatch, capsys, runs):
    seen, _status = runs
    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    assert main(["failover", str(EXAMPLE), "--env", "dev"]) == 1
    err = capsys.readouterr().err
    assert "would stop the Spark job" in err and "[y/N]" in err and "cancelled: nothing was changed" in err
    assert seen == [True]
    seen.clear()
    monkeypatch.setattr("sys.stdin", Terminal("yes\n"))
    assert main(["failover", str(EXAMPLE), "--env", "dev"]) == 0
    assert seen == [True, False]


def test_a_failed_check_on_a_terminal_changes_nothing(monkeypatch, capsys, runs):
    seen, status = runs
    status["value"] = "failed"
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    assert main(["failover", str(EXAMPLE), "--env", "dev"]) == 1
    assert "the check failed" in capsys.readouterr().err and seen == [True]


def test_yes_check_and_verify_never_ask(monkeypatch, runs):
    seen, _status = runs
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["failover", str(EXAMPLE), "--env", "dev", "--yes"]) == 0
    assert main(["failover", str(EXAMPLE), "--env", "dev", "--check"]) == 2
    assert main(["verify", str(EXAMPLE), "--env", "dev"]) == 0
    assert seen == [False, True, False]


def test_the_lease_refusal_reaches_the_cli_as_exit_1(monkeypatch, capsys):
    def refused(playbook, ctx, tags=(), skip_tags=(), listener=None):
        raise LeaseHeld("spec payments-dr, primary -> dr: another run holds the DR lease on dr: ...")
    monkeypatch.setattr(runner, "run", refused)
    assert main(["failover", str(EXAMPLE), "--env", "dev", "--yes"]) == 1
    err = capsys.readouterr().err
    assert "another run holds the DR lease" in err and "internal error" not in err and "Traceback" not in err


def test_an_unreachable_dr_cluster_is_a_clear_error_not_a_lease():
    store, clock = MemoryLeaseStore(), Clock()
    store.unreachable = True
    with pytest.raises(ClusterUnreachable):
        _lease(store, clock).acquire()
