"""The DR exporter (``mm2spec verify --serve PORT``): the figures no MM2 MBean has, for Prometheus.

Every ``refresh`` seconds it reads the clusters the way ``verify`` does and serves, at ``/metrics``
in Prometheus's text format, under the names of ``mm2spec.mm2.metric_names``:

- per flow and source partition, the RPO now: records not yet on DR (``mm2spec_rpo_records``) and
  the age of the oldest of them (``mm2spec_rpo_seconds``), 0 for a partition caught up
  (``verify.unmirrored``, the rule ``verify.lag`` judges);
- per flow and group, the age of the group's checkpoint on DR for the partition whose commit moved
  on longest ago without a checkpoint following (``mm2spec_checkpoint_age_seconds``; 0 when every
  committed partition's checkpoint is current; a partition without any checkpoint is ``verify``'s
  to report, not an age);
- per flow, whether it is failed over (``mm2spec_flow_failed_over``: any failover record, read
  from the flow's target);
- per cluster, whether it answered (``mm2spec_cluster_up``). A cluster that does not answer is 0,
  the figures that need it are left out (Prometheus marks them stale) and the exporter carries on:
  it serves the last collection while the next one runs, and never stops for a cluster.

Labels a scrape adds (``spec``, ``env``) are not emitted. Engine-neutral: it reads offset syncs,
checkpoints and records, which both engines write the same way.
"""

from __future__ import annotations

import errno
import threading
from concurrent.futures import ThreadPoolExecutor
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from mm2spec.errors import ClusterError, OperationRefused
from mm2spec.live.dr_state import read_flow_states
from mm2spec.live.records import GroupOffsets
from mm2spec.mm2.metric_names import CONTENT_TYPE, exposition, metric
from mm2spec.ops.modules.topology import checkpoints, groups, partitions
from mm2spec.ops.modules.verify import unmirrored
from mm2spec.ops.playbooks.context import Context
from mm2spec.render.monitoring import dr_exporter_port, dr_exporter_port_field
from mm2spec.spec.model import MirrorFlow

REFRESH_SECONDS_DEFAULT = 30.0
"""How often the exporter reads the clusters (``--refresh``): twice per two scrapes at Prometheus's
15 s, and each collection reads the offset-syncs and checkpoints topics whole."""

RPO_RECORDS = metric("mm2spec_rpo_records")
RPO_SECONDS = metric("mm2spec_rpo_seconds")
CHECKPOINT_AGE = metric("mm2spec_checkpoint_age_seconds")
FAILED_OVER = metric("mm2spec_flow_failed_over")
CLUSTER_UP = metric("mm2spec_cluster_up")
STOP_WAIT_S = 1.0
"""At a stop, how long a collection under way may take to end before the exporter leaves it."""
NAMES = (CLUSTER_UP, FAILED_OVER, RPO_RECORDS, RPO_SECONDS, CHECKPOINT_AGE)
"""What the exporter serves, in the order of its page."""


@dataclass(frozen=True)
class Collection:
    """One reading of the clusters: series per metric name, and what could not be read."""

    series: dict[str, list[tuple[dict[str, str], float]]]
    problems: tuple[str, ...] = ()
    """Each read that failed, as its error says (a cluster away, a topic unreadable)."""
    at: float = 0.0
    """When the collection finished (seconds since the epoch)."""

    def text(self) -> str:
        return exposition(self.series)


def collect(ctx: Context) -> Collection:
    """Read every selected flow's DR figures; a cluster that does not answer is marked down and what
    needs it is skipped, never raised."""
    series: dict[str, list[tuple[dict[str, str], float]]] = {name: [] for name in NAMES}
    problems: list[str] = []
    aliases = sorted({alias for flow in ctx.flows for alias in (flow.source, flow.target, flow.offset_syncs_cluster)})
    admins = [ctx.admin(alias) for alias in aliases]  # made here: Context's client cache is not thread-safe
    # Concurrently: a cluster that does not answer costs one request timeout, not one per cluster.
    with ThreadPoolExecutor(max_workers=len(aliases) or 1) as pool:
        answers = list(pool.map(_ping, admins))
    up = {alias: answer is None for alias, answer in zip(aliases, answers)}
    problems += [answer for answer in answers if answer is not None]
    for flow in ctx.flows:
        if up[flow.target]:
            _read(problems, lambda flow=flow: series[FAILED_OVER].append(({"flow": flow.name}, _failed_over(ctx, flow))))
        if not (up[flow.source] and up[flow.target] and up[flow.offset_syncs_cluster]):
            continue
        _read(problems, lambda flow=flow: _rpo(ctx, flow, series))
        if flow.groups:
            _read(problems, lambda flow=flow: series[CHECKPOINT_AGE].extend(_checkpoint_ages(ctx, flow)))
    series[CLUSTER_UP] = [({"cluster": alias}, 1 if ok else 0) for alias, ok in up.items()]
    return Collection(series, tuple(problems), ctx.clock())


def _ping(admin) -> str | None:
    """None when the cluster answers, else why not."""
    try:
        admin.ping()
        return None
    except ClusterError as exc:
        return str(exc)


def _read(problems: list[str], read: Callable[[], object]) -> None:
    """One part of a collection: a cluster error is noted and the rest goes on."""
    try:
        read()
    except ClusterError as exc:
        problems.append(str(exc))


def _failed_over(ctx: Context, flow: MirrorFlow) -> int:
    return 1 if flow.name in read_flow_states(ctx.spec, [flow], ctx.secrets) else 0


def _rpo(ctx: Context, flow: MirrorFlow, series: dict) -> None:
    parts = partitions(ctx, flow)
    behind = {(part.topic, part.partition): (records, age) for part, records, age in unmirrored(ctx, flow, parts)}
    for part in parts:
        records, age = behind.get((part.topic, part.partition), (0, 0.0))
        labels = {"flow": flow.name, "topic": part.topic, "partition": str(part.partition)}
        series[RPO_RECORDS].append((labels, records))
        series[RPO_SECONDS].append((labels, round(age, 3)))


def _checkpoint_ages(ctx: Context, flow: MirrorFlow) -> list[tuple[dict[str, str], float]]:
    """Per group: how old its checkpoint is for the partition whose commit it has lagged longest
    (0 when every checkpoint is at the group's commit), as ``verify.checkpoints`` judges it."""
    selected = groups(ctx, flow)
    if not selected:
        return []
    states = ctx.client(GroupOffsets, flow.source).describe(selected)
    mirrored = {(p.topic, p.partition): p.target_topic for p in partitions(ctx, flow)}
    found = checkpoints(ctx, flow, with_age=True)
    now_ms = ctx.clock() * 1000
    out = []
    for group in selected:
        ages = []
        for (topic, partition), committed in states[group].offsets.items():
            entry = found.get((group, mirrored.get((topic, partition)), partition))
            if (topic, partition) not in mirrored or entry is None:
                continue
            checkpoint, written_ms = entry
            ages.append(0.0 if checkpoint.upstream_offset == committed else max(0.0, (now_ms - written_ms) / 1000))
        if ages:
            out.append(({"flow": flow.name, "group": group}, round(max(ages), 3)))
    return out


class DrExporter:
    """Serves the latest ``Collection`` at ``/metrics`` and collects anew every ``refresh`` seconds."""

    def __init__(self, ctx: Context, port: int, refresh: float = REFRESH_SECONDS_DEFAULT, host: str = "",
                 collector: Callable[[Context], Collection] = collect):
        self.ctx = ctx
        self.port = port
        self.refresh = refresh
        self.host = host
        self.collector = collector
        self.latest = Collection({})
        self.collections = 0
        """How many collections have finished (a test waits on it)."""
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()

    def listen(self) -> None:
        """Bind the port; one in use is refused with what to do (nothing is served)."""
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server calls it by this name
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404, "only /metrics is served")
                    return
                with exporter._lock:
                    body = exporter.latest.text().encode()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args) -> None:
                pass  # a scrape every 15 s is not worth a line

        try:
            self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise OperationRefused(f"verify --serve {self.port}: the port is already in use on this host: stop "
                                       "what listens on it or pick another port (the spec's "
                                       f"{dr_exporter_port_field(self.ctx.spec)} is the one its scrape config names, "
                                       f"{dr_exporter_port(self.ctx.spec)})") from None
            raise OperationRefused(f"verify --serve {self.port}: cannot listen: {exc.strerror or exc}") from None
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="mm2spec-dr-exporter", daemon=True).start()

    def collect_once(self) -> Collection:
        collection = self.collector(self.ctx)
        with self._lock:
            self.latest = collection
            self.collections += 1
        return collection

    def run(self, stop: threading.Event, on_collection: Callable[[Collection], None] = lambda _c: None) -> None:
        """Collect every ``refresh`` seconds until ``stop`` is set (Ctrl-C: the CLI sets it), then stop
        serving at once. A collection under way (a cluster that does not answer takes a request
        timeout) is left to its daemon thread; the clients are closed only when none is."""
        failure: list[BaseException] = []

        def collect_loop() -> None:
            try:
                while not stop.is_set():
                    began = time.monotonic()
                    on_collection(self.collect_once())
                    stop.wait(max(0.0, self.refresh - (time.monotonic() - began)))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
                failure.append(exc)

        worker = threading.Thread(target=collect_loop, name="mm2spec-dr-collect", daemon=True)
        worker.start()
        try:
            while not stop.wait(0.5):
                if not worker.is_alive():  # a collection raised: not a cluster error, a bug
                    break
        finally:
            stop.set()
            self._close_server()
            worker.join(STOP_WAIT_S)
            if not worker.is_alive():
                self.ctx.close()
        if failure:
            raise failure[0]

    def _close_server(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
