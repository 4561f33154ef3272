"""One DR operation at a time per DR pair: a lease kept on the DR cluster, Kafka-native, fenced.

The lease of spec ``S``'s flows from ``source`` to ``target`` is the latest record keyed
``lease/S/source->target`` in the DR-state topic on ``target`` (``dr_state.STATE_TOPIC``; the key
never reads as a flow's ``<spec>/<flow>``, as a spec name holds no ``/``). Its value says who holds
it (user@host pid), for which operation, since when, until when; a tombstone is a free lease.

Every change (acquire, renew, release) is a compare-and-swap made safe by Kafka's transactions:
one ``transactional.id`` per pair, so a writer's ``init_transactions`` fences every earlier writer
of that pair and completes its open transaction; the writer then reads the lease (read committed),
decides, and commits. A writer fenced between its read and its commit commits nothing and starts
again, so two runs can never both believe they took the lease.

A held lease is renewed by a heartbeat thread every ``ttl / 4``; a run that stops renewing (killed,
or its host gone) leaves a lease that expires after ``ttl``, which the next run takes over. Taking
over an unexpired one needs ``break_lease``; the run that held it finds it lost at its next renewal
and (``HeldLeases.lost``) the playbook stops before its next task. Expiry compares the holder's
clock with the reader's: hosts running DR operations keep their clocks in sync (NTP).
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from typing import Callable, Iterable, Protocol

from confluent_kafka import KafkaError, KafkaException, Producer

from mm2spec.errors import KafkaOperationFailed, LeaseHeld
from mm2spec.live import KAFKA_REQUEST_TIMEOUT_S
from mm2spec.live.dr_state import STATE_TOPIC, STATE_TOPIC_CONFIGS
from mm2spec.live.kafka import KafkaAdmin, SecretLookup, client_config, env_secrets
from mm2spec.live.records import RecordReader
from mm2spec.spec.model import Cluster

LEASE_TTL_S = 60.0
"""How long a lease stays valid without a renewal: a dead run blocks its pair at most this long."""
LEASE_FORMAT = 1
"""``formatVersion`` of the lease records."""
# A compare-and-swap fenced by a concurrent writer is tried again at most this often.
_SWAP_ATTEMPTS = 5


@dataclass(frozen=True)
class LeaseRecord:
    """Who holds a DR pair's lease, as stored on the DR cluster."""

    spec: str
    source: str
    target: str
    holder: str
    """``user@host pid N`` of the run holding it."""
    operation: str
    """The playbook it runs (``failover``, ``failback``, a custom one's name)."""
    token: str
    """Unique per run: tells the holder's own record from another run's on the same host."""
    since: float
    """When it was taken (seconds since the epoch, the holder's clock)."""
    expires: float
    """When it lapses unless renewed (the holder's clock)."""

    def to_json(self) -> dict:
        return {"formatVersion": LEASE_FORMAT, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict) -> "LeaseRecord":
        return cls(**{k: data[k] for k in ("spec", "source", "target", "holder", "operation", "token")},
                   since=float(data["since"]), expires=float(data["expires"]))

    def describe(self, now: float) -> str:
        """``failover by alice@host pid 42 since 12:00:03 UTC, expires in 45s``."""
        left = self.expires - now
        state = f"expires in {left:.0f}s" if left > 0 else f"expired {-left:.0f}s ago"
        return f"{self.operation} by {self.holder} since {_utc(self.since)} ({state})"


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def lease_key(spec: str, source: str, target: str) -> str:
    """The lease's key in the DR-state topic."""
    return f"lease/{spec}/{source}->{target}"


def this_holder() -> str:
    """``user@host pid N``: what a refused run is told about the one holding the lease."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        user = "unknown"
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


class LeaseWriter(Protocol):
    """A writer of one pair's lease that fenced every earlier writer when it was opened."""

    def write(self, record: LeaseRecord | None) -> bool:
        """Commit ``record`` (None: release); False, committing nothing, when a later writer was
        opened since (fenced)."""

    def close(self) -> None: ...


class LeaseStore(Protocol):
    """Where one pair's lease is kept (Kafka: ``KafkaLeaseStore``; the unit tests: a fake)."""

    def open_writer(self) -> LeaseWriter:
        """A writer that fences the earlier ones; reads made after it see all they committed."""

    def read(self) -> LeaseRecord | None:
        """The committed lease, or None when free."""


_KEEP = object()


def swap(store: LeaseStore, decide: Callable[[LeaseRecord | None], object]) -> LeaseRecord | None:
    """Replace the lease with ``decide(current)`` (None releases it; ``_KEEP`` writes nothing), as
    one compare-and-swap: fence, read, decide, commit; again from the fence when fenced meanwhile.
    Returns what the lease is afterwards. ``decide`` may raise to refuse (nothing is written)."""
    for _attempt in range(_SWAP_ATTEMPTS):
        writer = store.open_writer()
        try:
            current = store.read()
            wanted = decide(current)
            if wanted is _KEEP:
                return current
            if writer.write(wanted):
                return wanted
        finally:
            writer.close()
    raise KafkaOperationFailed(f"the DR lease: another run kept fencing this one ({_SWAP_ATTEMPTS} attempts); "
                               "retry in a moment")


class PairLease:
    """One DR pair's lease for one run: ``acquire``, ``renew``, ``release``."""

    def __init__(self, store: LeaseStore, spec: str, source: str, target: str, operation: str,
                 holder: str | None = None, ttl: float = LEASE_TTL_S, clock: Callable[[], float] = time.time):
        self.store, self.spec, self.source, self.target = store, spec, source, target
        self.operation, self.ttl, self.clock = operation, ttl, clock
        self.holder = holder or this_holder()
        self.token = uuid.uuid4().hex
        self.held: LeaseRecord | None = None
        self.lost: str | None = None
        """Why this run no longer holds the lease (taken over, or not renewed in time); None while held."""
        self.took_over: LeaseRecord | None = None
        """The expired (or broken) lease of another run this one replaced."""

    @property
    def pair(self) -> str:
        return f"{self.source} -> {self.target}"

    def _ours(self, record: LeaseRecord | None) -> bool:
        return record is not None and record.token == self.token

    def acquire(self, break_lease: bool = False) -> None:
        """Take the lease; ``LeaseHeld`` (nothing written) when another run holds it and it has
        not expired, unless ``break_lease``."""
        def decide(current: LeaseRecord | None):
            now = self.clock()
            if current is not None and not self._ours(current) and current.expires > now and not break_lease:
                raise LeaseHeld(
                    f"spec {self.spec}, {self.pair}: another run holds the DR lease on {self.target}: "
                    f"{current.describe(now)}. Wait for it to finish (its lease is renewed while it runs). If that "
                    f"run is dead, its lease expires by itself at {_utc(current.expires)}, or take it over now with "
                    "--break-lease (only when you are sure it no longer runs: it stops at its next task). "
                    "Nothing was changed")
            self.took_over = current if current is not None and not self._ours(current) else None
            return LeaseRecord(self.spec, self.source, self.target, self.holder, self.operation, self.token,
                               now, now + self.ttl)
        self.held = swap(self.store, decide)
        self.lost = None

    def renew(self) -> bool:
        """Extend the lease by ``ttl``; False (and ``lost`` says why) when another run took it."""
        def decide(current: LeaseRecord | None):
            if not self._ours(current):
                self.lost = (f"{self.pair}: the DR lease was taken over by "
                             f"{current.describe(self.clock()) if current else 'nobody (it was released)'}")
                return _KEEP
            return replace(current, expires=self.clock() + self.ttl)
        try:
            result = swap(self.store, decide)
        except Exception as exc:  # noqa: BLE001 - a renewal that fails is tried again until the lease lapses
            if self.held is not None and self.clock() >= self.held.expires:
                self.lost = f"{self.pair}: the DR lease could not be renewed before it expired ({exc})"
            return self.lost is None
        if self._ours(result):
            self.held = result
        return self.lost is None

    def release(self) -> None:
        """Give the lease up (a tombstone), only if this run still holds it."""
        if self.held is None:
            return
        swap(self.store, lambda current: None if self._ours(current) else _KEEP)
        self.held = None


class HeldLeases:
    """The leases of every DR pair of a run, renewed by a heartbeat thread until released."""

    def __init__(self, leases: Iterable[PairLease], renew_every: float | None = None):
        self.leases = sorted(leases, key=lambda lease: (lease.target, lease.source))
        ttl = min((lease.ttl for lease in self.leases), default=LEASE_TTL_S)
        self.renew_every = renew_every if renew_every is not None else ttl / 4
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self, break_lease: bool = False) -> "HeldLeases":
        """Take every pair's lease, in a fixed order; on a refusal release those taken and re-raise."""
        taken: list[PairLease] = []
        try:
            for lease in self.leases:
                lease.acquire(break_lease)
                taken.append(lease)
        except BaseException:
            for lease in taken:
                _quietly(lease.release)
            raise
        self._thread = threading.Thread(target=self._heartbeat, name="mm2spec-lease", daemon=True)
        self._thread.start()
        return self

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.renew_every):
            for lease in self.leases:
                if lease.lost is None:
                    lease.renew()

    def lost(self) -> str | None:
        """Why the run no longer holds a lease it took (None while it holds them all)."""
        reasons = [lease.lost for lease in self.leases if lease.lost]
        return "; ".join(reasons) or None

    def release(self) -> None:
        """Stop renewing and give every lease up (errors ignored: the lease then expires by itself)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=KAFKA_REQUEST_TIMEOUT_S)
        for lease in self.leases:
            _quietly(lease.release)


def _quietly(call: Callable[[], None]) -> None:
    try:
        call()
    except Exception:  # noqa: BLE001 - releasing is best effort: an unreleased lease expires
        pass


# ------------------------------------------------------------------------------------ on Kafka

def transactional_id(spec: str, source: str, target: str) -> str:
    """The pair's ``transactional.id``: every run of this pair shares it, so each fences the last.
    ``.`` separates: neither spec names nor cluster aliases contain one."""
    return f"mm2spec.lease.{spec}.{source}.{target}"


class _KafkaWriter:
    def __init__(self, store: "KafkaLeaseStore"):
        self.store = store
        config = client_config(store.cluster, store.secrets)
        config.update({"transactional.id": store.transactional_id, "enable.idempotence": True, "acks": "all",
                       "transaction.timeout.ms": int(KAFKA_REQUEST_TIMEOUT_S * 2000)})
        self.producer = Producer(config)
        # The first transactional writer on a cluster makes the broker create __transaction_state
        # (50 partitions): give it twice the usual request time.
        if not self._call(lambda: self.producer.init_transactions(2 * KAFKA_REQUEST_TIMEOUT_S), "fencing earlier writers"):
            raise KafkaOperationFailed(f'cluster "{store.cluster.alias}": the DR lease {store.key}: its transactional '
                                       "producer could not start (init_transactions failed)")

    def _call(self, call: Callable[[], object], what: str) -> bool:
        """Run a producer call; False when fenced (or the transaction cannot finish)."""
        try:
            call()
            return True
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is not None and (error.fatal() or error.txn_requires_abort()):
                # Fenced by a writer opened since (fatal for this producer), or a transaction that
                # cannot finish: nothing was committed, so the swap starts again from the fence.
                if not error.fatal():
                    try:
                        self.producer.abort_transaction(KAFKA_REQUEST_TIMEOUT_S)
                    except KafkaException:
                        pass
                return False
            raise KafkaOperationFailed(f'cluster "{self.store.cluster.alias}": the DR lease {self.store.key}: '
                                       f"{what}: {exc}") from None

    def write(self, record: LeaseRecord | None) -> bool:
        value = None if record is None else json.dumps(record.to_json(), sort_keys=True).encode()

        def commit():
            self.producer.begin_transaction()
            self.producer.produce(STATE_TOPIC, key=self.store.key.encode(), value=value)
            self.producer.commit_transaction(KAFKA_REQUEST_TIMEOUT_S)
        return self._call(commit, "writing it")

    def close(self) -> None:
        self.producer.flush(1.0)


class KafkaLeaseStore:
    """A pair's lease in the DR-state topic of its target cluster (created when absent)."""

    def __init__(self, cluster: Cluster, spec: str, source: str, secrets: SecretLookup = env_secrets):
        self.cluster, self.secrets = cluster, secrets
        self.key = lease_key(spec, source, cluster.alias)
        self.transactional_id = transactional_id(spec, source, cluster.alias)
        self._topic_ready = False

    def open_writer(self) -> _KafkaWriter:
        if not self._topic_ready:
            KafkaAdmin(self.cluster, self.secrets).create_topic(STATE_TOPIC, 1, -1, STATE_TOPIC_CONFIGS, exist_ok=True)
            self._topic_ready = True
        return _KafkaWriter(self)

    def read(self) -> LeaseRecord | None:
        latest: bytes | None = None
        with RecordReader(self.cluster, self.secrets, read_committed=True) as reader:
            for record in reader.read_topic(STATE_TOPIC):
                if record.key == self.key.encode():
                    latest = record.value
        if latest is None:
            return None
        try:
            return LeaseRecord.from_json(json.loads(latest))
        except (ValueError, KeyError, TypeError):
            # An unreadable lease holds nobody: the next write replaces it.
            return None
