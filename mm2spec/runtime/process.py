"""Process and port helpers for whatever mm2spec starts in the background (the Spark job's driver,
the dev environment's Java processes, a Spark standalone cluster). Stdlib only."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Callable

HOST = "127.0.0.1"

# How often the wait loops look again: short enough not to add to a start-up, long enough not to
# busy a core that the process being waited for needs.
POLL_SECONDS = 0.5


def pid_alive(pid: int | None) -> bool:
    """Is ``pid`` a running process? A zombie (exited, not yet reaped by its parent) is not."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def cmdline_has(pid: int, token: str) -> bool:
    """Is ``pid`` alive with ``token`` on its command line (so a recycled pid is never taken for ours)?"""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return token.encode() in cmdline and pid_alive(pid)


def reap(pid: int) -> None:
    """Collect ``pid``'s exit status if it is our exited child (no zombie left behind)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def listening(port: int, host: str = HOST) -> bool:
    """Does something accept connections on ``port``?"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0


def port_free(port: int, host: str = HOST) -> bool:
    """Could a server bind ``port`` now? SO_REUSEADDR as the JVM uses it, so connections lingering
    in TIME_WAIT from a stopped server do not count as taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True



def wait_until(check: Callable[[], bool], timeout: float, on_timeout: Callable[[], BaseException]) -> None:
    """Poll ``check`` until it is true; raise ``on_timeout()`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise on_timeout()
        time.sleep(POLL_SECONDS)


def tail(path: str | Path, lines: int = 25) -> str:
    """The last ``lines`` lines of a log file (empty if there is none)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
