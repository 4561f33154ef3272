"""``run_to_completion``, the wait of the dev brokers' storage format: judged by the CPU the tool
spends, so a loaded machine (which only stretches wall time) cannot fail it, while a runaway or a
blocked tool still ends with what it printed. Small local processes, no network."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from mm2spec.dev.process import run_to_completion
from mm2spec.errors import DevError

#: Far above anything these tiny tools need: only the limit under test may end them.
GENEROUS_S = 600.0


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_tool_that_takes_long_but_spends_little_cpu_finishes(tmp_path: Path) -> None:
    # Like StorageTool at a load of tens: a long wall time, a few CPU seconds. A wall limit failed it.
    run_to_completion(python("import time; time.sleep(2); print('Formatting done')"), log=tmp_path / "log",
                      cpu_limit=1.0, wall_limit=GENEROUS_S, what="formatting")
    assert "Formatting done" in (tmp_path / "log").read_text()


def test_a_runaway_tool_is_stopped_by_its_cpu_and_reports_what_it_printed(tmp_path: Path) -> None:
    with pytest.raises(DevError) as raised:
        run_to_completion(python("print('loading classes', flush=True)\nwhile True: pass"), log=tmp_path / "log",
                          cpu_limit=0.5, wall_limit=GENEROUS_S, what="formatting cluster 'primary'")
    message = str(raised.value)
    assert "formatting cluster 'primary' did not finish" in message and "of 0.5s allowed" in message
    assert message.endswith("loading classes")


def test_a_blocked_tool_is_stopped_by_the_wall_limit(tmp_path: Path) -> None:
    with pytest.raises(DevError, match=r"did not finish \(0\.\ds of CPU[^)]*\); last lines of .*\n.*waiting for a lock"):
        run_to_completion(python("import time; print('waiting for a lock', flush=True); time.sleep(600)"),
                          log=tmp_path / "log", cpu_limit=GENEROUS_S, wall_limit=1.0, what="formatting")


def test_a_failing_tool_reports_its_exit_code_and_output(tmp_path: Path) -> None:
    with pytest.raises(DevError, match=r"formatting failed \(exit 3\); last lines of .*\n.*already formatted"):
        run_to_completion(python("import sys; print('Log directory is already formatted'); sys.exit(3)"),
                          log=tmp_path / "log", cpu_limit=GENEROUS_S, wall_limit=GENEROUS_S, what="formatting")


@pytest.mark.parametrize("with_setpriv", [True, False])
def test_a_child_tied_to_its_parent_is_stopped_when_the_parent_dies(tmp_path: Path, with_setpriv) -> None:
    # The starting process (a Python of its own) starts a long sleep tied to it, prints its pid, and exits.
    import os
    import subprocess
    import time

    env = dict(os.environ)
    if not with_setpriv:  # the fallback: a preexec_fn with libc loaded in the parent
        env["PATH"] = str(tmp_path)  # no setpriv there; the sleep is started by its full path
    code = ("import sys; from pathlib import Path; from mm2spec.dev.process import start; "
            f"p = start('sleeper', ['/bin/bash', '-c', 'sleep 60; : tie-token'], token='tie-token', "
            f"log=Path({str(tmp_path / 'log')!r}), tie_to_parent=True); print(p.pid)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    child = int(done.stdout.strip())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{child}").exists():
        state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] if Path(f"/proc/{child}").exists() else "X"
        if state == "Z":
            break
        time.sleep(0.1)
    alive = Path(f"/proc/{child}").exists() and Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    assert not alive, "the tied child outlived its parent"


def test_a_tied_child_is_alive_from_the_first_look_once_started(tmp_path: Path) -> None:
    # Through setpriv the command is exec'd after setpriv's own command line (which shows the token
    # too): start returns only once the command itself runs, so alive() holds from the first call.
    from mm2spec.dev.process import start, stop

    started = start("sleeper", ["/bin/bash", "-c", "sleep 30; : tie-token-2"], token="tie-token-2",
                    log=tmp_path / "log", tie_to_parent=True)
    try:
        assert started.alive()
        assert Path(f"/proc/{started.pid}/cmdline").read_bytes().split(b"\0")[0] == b"/bin/bash"
    finally:
        stop(started, grace=1.0)


def test_a_child_whose_command_line_changes_is_still_alive(tmp_path: Path) -> None:
    # A launcher may exec another program (the token leaves the command line) while the process
    # runs on: our own child is judged by its exit status, not by what its command line shows.
    from mm2spec.dev.process import start, stop

    started = start("relauncher", ["/bin/bash", "-c", "exec sleep 30 # relaunch-token"], token="relaunch-token",
                    log=tmp_path / "log")
    try:
        deadline = time.monotonic() + GENEROUS_S
        while b"relaunch-token" in Path(f"/proc/{started.pid}/cmdline").read_bytes():  # until bash has exec'd sleep
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert started.alive()
    finally:
        assert stop(started, grace=1.0)
    assert not started.alive()


def test_a_child_killed_during_startup_is_reported_with_its_signal(tmp_path: Path) -> None:
    from mm2spec.dev.process import start, wait_all_ready
    from mm2spec.errors import NotReady

    started = start("doomed", ["/bin/bash", "-c", "echo booting; kill -9 $$ # doomed-token"], token="doomed-token",
                    log=tmp_path / "doomed.log")
    with pytest.raises(NotReady, match=r"(?s)doomed exited during startup \(killed by SIGKILL\).*booting"):
        wait_all_ready({started: lambda: False}, timeout=GENEROUS_S)


def test_a_child_that_fails_during_startup_is_reported_with_its_exit_code(tmp_path: Path) -> None:
    from mm2spec.dev.process import start, wait_all_ready
    from mm2spec.errors import NotReady

    started = start("broken", ["/bin/bash", "-c", "exit 3 # broken-token"], token="broken-token", log=tmp_path / "log")
    with pytest.raises(NotReady, match=r"broken exited during startup \(exit code 3\)"):
        wait_all_ready({started: lambda: False}, timeout=GENEROUS_S)
