"""The DR pair's lease on a real DR cluster (``mm2spec.live.lease``): a run that writes is refused
while another holds the lease, and goes ahead once it is released; an expired lease is taken
over, its old holder finds it lost, and Kafka's transactional fencing stops a writer opened
before another. No mirror runs: the playbook here only clears a failover record nobody wrote.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from mm2spec.live.dr_state import read_states
from mm2spec.live.lease import KafkaLeaseStore, PairLease
from mm2spec.spec.model import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parent))

from specs import spec_for
from test_failover import _run

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def _setup(pair, tmp_path: Path) -> tuple[str, Path, Path]:
    name = f"it-lease-{uuid.uuid4().hex[:8]}"
    spec = tmp_path / "dr.yaml"
    spec.write_text(yaml.safe_dump(spec_for(pair, [f"{name}-orders"], name=name), sort_keys=False))
    playbook = tmp_path / "clear.yaml"
    playbook.write_text(yaml.safe_dump({"name": "clear", "tasks": [{"name": "clear", "failback.clear": {}}]}))
    return name, spec, playbook


def _dr(pair) -> Cluster:
    return Cluster("dr", (pair.dr.bootstrap,))


def test_a_second_run_is_refused_while_the_lease_is_held_then_goes_ahead(kafka_pair, tmp_path, capsys):
    name, spec, playbook = _setup(kafka_pair, tmp_path)
    store = KafkaLeaseStore(_dr(kafka_pair), name, "primary")
    first = PairLease(store, name, "primary", "dr", "failover", holder="alice@ops-1 pid 4242")
    first.acquire()
    args = ("playbook", "run", str(playbook), str(spec), "--yes")

    code, out = _run(capsys, *args)
    assert code == 1 and "failover by alice@ops-1 pid 4242" in out and "--break-lease" in out, out
    assert "TASK [clear]" not in out, "refused before its first task"
    assert store.read().token == first.token, "the holder's lease is untouched"
    assert read_states(_dr(kafka_pair), name) == {}, "a lease never reads as a flow's failover state"

    first.release()
    assert store.read() is None
    code, out = _run(capsys, *args)
    assert code == 0, out
    assert store.read() is None, "the run released its lease at the end"


def test_an_expired_lease_is_taken_over_and_fencing_stops_the_older_writer(kafka_pair, tmp_path):
    name, _spec, _playbook = _setup(kafka_pair, tmp_path)
    store = KafkaLeaseStore(_dr(kafka_pair), name, "primary")
    dead = PairLease(store, name, "primary", "dr", "failback", holder="bob@ci-7 pid 9", ttl=1.0)
    dead.acquire()
    time.sleep(1.5)
    taker = PairLease(store, name, "primary", "dr", "failover", holder="carol@ops-2 pid 77")
    taker.acquire()
    assert taker.took_over is not None and taker.took_over.holder == "bob@ci-7 pid 9"
    assert store.read().holder == "carol@ops-2 pid 77"
    assert not dead.renew() and "taken over by failover by carol@ops-2 pid 77" in dead.lost

    # The fencing itself: a writer opened (init_transactions) later fences one opened earlier.
    early, late = store.open_writer(), store.open_writer()
    try:
        assert early.write(None) is False
    finally:
        early.close()
        late.close()
    assert store.read().holder == "carol@ops-2 pid 77", "the fenced writer's release never landed"
    taker.release()
    assert store.read() is None
