"""One judge thread per core that other work leaves free, re-read as the machine's load changes."""

import pytest

from derivaudit.models import cores


def _machine(monkeypatch, samples):
    """Feed FreeCores a sequence of (wall s, machine busy s, own CPU s) readings."""
    it = iter(samples)
    state = {}

    def step():
        state["now"], state["busy"], state["own"] = next(it)

    step()
    monkeypatch.setattr(cores.time, "monotonic", lambda: state["now"])
    monkeypatch.setattr(cores, "_machine_busy_s", lambda: state["busy"])
    monkeypatch.setattr(cores, "_own_cpu_s", lambda: state["own"])
    return step


def test_threads_follow_the_cores_other_work_leaves(monkeypatch):
    step = _machine(monkeypatch, [(0, 0, 0), (10, 20, 20), (20, 40, 35), (30, 60, 45), (40, 70, 55), (50, 90, 75)])
    fc = cores.FreeCores(2, interval=5)
    assert fc.threads() == 2  # nothing measured yet: every core
    step()
    assert fc.threads() == 2  # quiet: the machine's busy time is all ours
    step()
    assert fc.threads() == 1  # 0.5 core busy with other work beside our spinning threads
    step()
    assert fc.threads() == 1  # a full core taken
    step()
    assert fc.threads() == 2  # the other work ended
    assert [t for _, t in fc.readings] == [2, 1, 1, 2]


def test_a_reading_waits_for_the_interval(monkeypatch):
    step = _machine(monkeypatch, [(0, 0, 0), (1, 2, 0)])
    fc = cores.FreeCores(2, interval=5)
    step()
    assert fc.threads() == 2 and not fc.readings  # 1 s is too short a window to judge


def test_without_proc_stat_the_load_average_is_used(monkeypatch):
    step = _machine(monkeypatch, [(0, None, 0), (10, None, 0)])
    monkeypatch.setattr(cores.os, "getloadavg", lambda: (5.0, 0, 0))
    fc = cores.FreeCores(4, interval=5)
    step()
    assert fc.threads() == 3  # load 5 is our 4 threads and one more busy core


@pytest.mark.skipif(cores._machine_busy_s() is None, reason="needs /proc/stat")
def test_a_real_reading_stays_within_the_machine():
    import time

    fc = cores.FreeCores(interval=0.2)
    time.sleep(0.3)
    assert 1 <= fc.threads() <= fc.cores and fc.readings


def test_llama_cpp_threads_wait_passively_unless_the_user_chose_a_policy():
    """The wait policy is read when llama.cpp's library loads: the backend sets it before the
    import (a fresh process), and a user's own OMP_WAIT_POLICY is kept."""
    import os
    import subprocess
    import sys

    pytest.importorskip("llama_cpp")
    code = ("import os, sys; from derivaudit.models import load_backend; "
            "load_backend('llamacpp', 'smollm2', cache=False); print(os.environ['OMP_WAIT_POLICY'])")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    got = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert got.stdout.strip() == "PASSIVE"
    got = subprocess.run([sys.executable, "-c", code], env={**env, "OMP_WAIT_POLICY": "ACTIVE"},
                         capture_output=True, text=True, check=True)
    assert got.stdout.strip() == "ACTIVE"
