"""Starting, watching and stopping the Java processes of the dev environment.

Processes are started in their own session (so Ctrl-C in the terminal that ran ``dev up`` does not
take them down) and recorded by pid together with a token from their command line: ``down`` only
signals a pid whose command line still carries that token, so a recycled pid is never killed.
"""

from __future__ import annotations

import ctypes
import os
import random
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from mm2spec.components import Components, components
from mm2spec.errors import ComponentMissing, DevError, NotReady, PortInUse

from mm2spec.dev.config import HOST, log4j2_properties
from mm2spec.runtime.process import cmdline_has, listening, port_free, tail  # noqa: F401 (part of this module's API)

#: SIGTERM to SIGKILL for one process: a broker flushes its logs and a Connect worker leaves its
#: group in well under this on an idle machine; more means it hangs.
STOP_GRACE_S = 20.0
#: The same when several stop at once (``stop_all``): they shut down in parallel on two shared
#: cores, so each gets longer before it is killed.
STOP_ALL_GRACE_S = 30.0
#: After SIGKILL the kernel frees the process at once; this only bounds the wait for it to vanish.
KILL_WAIT_S = 5.0
#: How often to look whether a stopping process is gone.
GONE_POLL_S = 0.1
#: How often ``wait_all_ready`` probes each pending process (a probe may itself take seconds).
READY_POLL_S = 0.5
#: Just after exec a child's /proc/<pid>/cmdline is briefly empty: how long (and how often) to
#: look for the token there before returning; the exec normally shows within milliseconds.
CMDLINE_WAIT_S = 5.0
CMDLINE_POLL_S = 0.01
#: How often ``run_to_completion`` looks at a running tool's CPU time (it returns as soon as the tool exits).
TOOL_POLL_S = 0.5
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
"""/proc's unit of CPU time, per second."""


@dataclass(frozen=True)
class JavaProcess:
    """A Java process this package started: what ``status`` and ``down`` need, JSON-serialisable."""

    name: str
    """``primary``, ``dr``, ``connect``, ``mirrormaker``: also the log file's stem."""
    pid: int
    token: str
    """A path on the process's command line (its config file): proves a pid is still ours."""
    log: str
    ports: tuple[int, ...] = ()

    def alive(self) -> bool:
        # Our own child cannot be mistaken for a recycled pid until we collect its exit status,
        # so ask the kernel through its Popen; the command line (which a launcher's exec changes
        # under us) only for a process an earlier run started.
        child = _children.get(self.pid)
        if child is not None:
            return child.poll() is None
        return cmdline_has(self.pid, self.token)

    def to_json(self) -> dict:
        return {**asdict(self), "ports": list(self.ports)}

    @classmethod
    def from_json(cls, data: dict) -> JavaProcess:
        return cls(**{**data, "ports": tuple(data.get("ports", ()))})


def java_and_libs(found: Components | None = None) -> tuple[str, Path]:
    """The java binary and Kafka's libs folder, or ComponentMissing saying how to install them."""
    found = found or components()
    java = found.java()
    try:
        libs = found.kafka_libs
    except ComponentMissing as missing:
        raise ComponentMissing(f"{missing} (or just scripts/install-kafka.sh)") from None
    return java, libs


def java_command(java: str, libs: Path, main_class: str, args: list[str], *, log4j: Path, heap: str,
                 jvm_options: tuple[str, ...] = ()) -> list[str]:
    return [
        java,
        *jvm_options,
        f"-Xmx{heap}",
        "-Xms64m",
        # Serial GC: one collector thread; these JVMs share two cores with everything else.
        "-XX:+UseSerialGC",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        f"{libs}/*",
        main_class,
        *args,
    ]


def log4j_config(root: Path) -> Path:
    """Write (or keep) the Log4j 2 config shared by the Java processes under ``root``."""
    path = Path(root) / "log4j2.properties"
    text = log4j2_properties()
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path


def check_ports_free(ports: dict[int, str]) -> None:
    """Raise PortInUse naming every taken port and what we wanted it for."""
    taken = [f"{HOST}:{port} ({purpose})" for port, purpose in ports.items() if not port_free(port)]
    if taken:
        raise PortInUse(
            "port already in use: " + ", ".join(taken) + ". Stop whatever listens there "
            "(`mm2spec dev down` if it is an earlier dev environment) or choose other ports."
        )


def pick_free_ports(count: int, *, low: int = 20000, high: int = 32000, avoid: tuple[int, ...] = ()) -> list[int]:
    """``count`` distinct free ports, below Linux's ephemeral range so that outgoing client
    connections are unlikely to grab one before our server binds it."""
    chosen: list[int] = []
    for port in random.sample(range(low, high), k=min(high - low, 2000)):
        if port not in avoid and port_free(port):
            chosen.append(port)
            if len(chosen) == count:
                return chosen
    raise DevError(f"found no {count} free ports between {low} and {high}")


def start(
    name: str,
    command: list[str],
    *,
    token: str,
    log: Path,
    ports: tuple[int, ...] = (),
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    tie_to_parent: bool = False,
) -> JavaProcess:
    """Start ``command`` in the background with stdout and stderr appended to ``log``.

    ``tie_to_parent`` asks Linux to SIGTERM the child when the starting process dies (tests use it,
    so a killed pytest leaves no brokers behind); ``dev up`` leaves it off so processes outlive it.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        # A visible boundary between runs, since logs are appended to across restarts.
        out.write(f"\n===== mm2spec: {name} starting at {time.strftime('%Y-%m-%d %H:%M:%S')} =====\n".encode())
        out.flush()
        tie = _tie_to_parent(command) if tie_to_parent else None
        process = subprocess.Popen(
            tie[0] if tie else command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            start_new_session=True,
            preexec_fn=tie[1] if tie else None,
        )
    _children[process.pid] = process
    # Just after exec, /proc/<pid>/cmdline is briefly empty; wait until it shows the token so that
    # alive() means what it says from the first call on. Through setpriv, the command's own exec
    # follows: setpriv's command line shows the token too, so wait until it is gone.
    launcher = tie[0][0] if tie and tie[1] is None else None
    deadline = time.monotonic() + CMDLINE_WAIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None or (cmdline_has(process.pid, token) and not _runs(process.pid, launcher)):
            break
        time.sleep(CMDLINE_POLL_S)
    return JavaProcess(name=name, pid=process.pid, token=token, log=str(log), ports=ports)


def stop(process: JavaProcess, grace: float = STOP_GRACE_S) -> bool:
    """SIGTERM, then SIGKILL after ``grace`` seconds. False when the process was already gone."""
    if not process.alive():
        _reap(process.pid)
        return False
    _signal(process.pid, signal.SIGTERM)
    if not _wait_gone(process, grace):
        _signal(process.pid, signal.SIGKILL)
        _wait_gone(process, KILL_WAIT_S)
    _reap(process.pid)
    return True


def _wait_gone(process: JavaProcess, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while process.alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(GONE_POLL_S)
    return True


def wait_all_ready(
    checks: dict[JavaProcess, Callable[[], bool]], *, timeout: float, poll: float = READY_POLL_S
) -> None:
    """Wait until every process's readiness check passes; NotReady (with its log) on the first that
    exits or when the deadline passes. The caller stops what it started."""
    pending = dict(checks)
    deadline = time.monotonic() + timeout
    while pending:
        for proc, check in list(pending.items()):
            if not proc.alive():
                raise NotReady(f"{proc.name} exited during startup ({exit_status(proc)}); "
                               f"last lines of {proc.log}:\n{tail(proc.log)}")
            if check():
                del pending[proc]
        if not pending:
            return
        if time.monotonic() > deadline:
            proc = next(iter(pending))
            raise NotReady(
                f"{proc.name} was not ready after {timeout:.0f}s; last lines of {proc.log}:\n{tail(proc.log)}"
            )
        time.sleep(poll)


def stop_all(processes: list[JavaProcess], grace: float = STOP_ALL_GRACE_S) -> None:
    """SIGTERM all at once (they shut down in parallel), then stop each; SIGKILL after ``grace``."""
    for proc in processes:
        if proc.alive():
            _signal(proc.pid, signal.SIGTERM)
    for proc in processes:
        stop(proc, grace)


def run_to_completion(command: list[str], *, log: Path, cpu_limit: float, wall_limit: float, what: str) -> None:
    """Run a short Java tool (StorageTool), its output appended to ``log``; DevError (with what the
    tool printed) if it fails, spends over ``cpu_limit`` CPU seconds (a runaway, however loaded the
    machine) or runs ``wall_limit`` seconds (blocked for good)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + wall_limit
    try:
        while True:
            try:
                returncode = child.wait(timeout=TOOL_POLL_S)
                break
            except subprocess.TimeoutExpired:
                spent = cpu_seconds(child.pid)
                if spent > cpu_limit or time.monotonic() > deadline:
                    raise DevError(f"{what} did not finish ({spent:.1f}s of CPU of {cpu_limit:g}s allowed, "
                                   f"{wall_limit:g}s of wall time at most); last lines of {log}:\n{tail(log)}") \
                        from None
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    if returncode != 0:
        raise DevError(f"{what} failed (exit {returncode}); last lines of {log}:\n{tail(log)}")


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system, every thread) ``pid`` has spent; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


# Popen objects of the processes this interpreter started, so their exit status gets collected
# (no zombies while a long test session runs) even when another process stopped them.
_children: dict[int, subprocess.Popen] = {}


def _reap(pid: int) -> None:
    """Collect the exit status if ``pid`` is our child, so it does not linger as a zombie."""
    child = _children.get(pid)
    if child is not None and child.poll() is not None:
        del _children[pid]


def exit_status(process: JavaProcess) -> str:
    """How ``process`` ended, as far as this interpreter knows: its exit code or the signal that
    killed it (a silent SIGKILL says the kernel's OOM killer or another process ended it)."""
    child = _children.get(process.pid)
    code = child.poll() if child is not None else None
    if code is None:
        return "exit status unknown: not started by this process"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def reap_exited() -> None:
    """Collect every child of ours that has exited (cheap; safe to call any time)."""
    for pid in list(_children):
        _reap(pid)


_PR_SET_PDEATHSIG = 1


def _runs(pid: int, program: str | None) -> bool:
    """Whether process ``pid`` still runs ``program`` (its command line's first word)."""
    if program is None:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0", 1)[0].decode(errors="replace") == program
    except OSError:
        return False


def _tie_to_parent(command: list[str]) -> tuple[list[str], Callable[[], None] | None]:
    """The command and the ``preexec_fn`` that make Linux SIGTERM the child when its parent dies.

    ``setpriv --pdeathsig TERM`` (util-linux) sets it and execs the command, so no Python runs in
    the forked child: a ``preexec_fn`` runs in a copy of a process whose other threads (Kafka
    clients, gRPC) may hold the allocator's or the loader's locks, and loading libc there crashed
    a test run once (segmentation fault in ``_execute_child``). Without setpriv, the ``preexec_fn``
    with libc loaded beforehand, in the parent."""
    setpriv = shutil.which("setpriv")
    if setpriv:
        return [setpriv, "--pdeathsig", "TERM", "--", *command], None
    libc = ctypes.CDLL("libc.so.6", use_errno=True)

    def die_with_parent() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    return command, die_with_parent
