"""How many CPU threads a judge should run: one per core that other work leaves free.

llama.cpp splits each step of a forward pass evenly over its threads and waits for the last one.
With as many threads as cores and one core taken by other work, every step waits for the thread
that shares that core, and the threads that finished spin: measured here, one `yes > /dev/null`
beside a 2-thread scan halved its speed and raised its CPU time by a third. A thread per *free*
core degrades with the share of the machine that is left. Which cores are free changes during a
long scan (a build starts, a test suite ends), so it is re-read every few seconds of work.

Linux: busy time of the whole machine from /proc/stat, minus this process's own CPU time, over
the last interval. Elsewhere: the 1-minute load average minus this process's threads (coarser,
and late by up to a minute).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

INTERVAL_S = 5.0  # seconds of wall time between two readings


def _machine_busy_s() -> float | None:
    """CPU seconds the whole machine spent busy since boot (None where /proc/stat is not there)."""
    try:
        line = Path("/proc/stat").read_text().split("\n", 1)[0]
    except OSError:
        return None
    f = [int(x) for x in line.split()[1:]]
    if len(f) < 4:
        return None
    idle = f[3] + (f[4] if len(f) > 4 else 0)  # idle + iowait
    busy = sum(f[:8]) - idle  # user nice system idle iowait irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


class FreeCores:
    """`threads()` is the thread count to use now: the cores not busy with other work (at least
    one), re-read at most every INTERVAL_S seconds."""

    def __init__(self, cores: int | None = None, interval: float = INTERVAL_S) -> None:
        self.cores = cores or os.cpu_count() or 1
        self.interval = interval
        self.current = self.cores
        self._mark = (time.monotonic(), _machine_busy_s(), _own_cpu_s())
        self.readings: list[tuple[float, int]] = []  # (others' busy cores, threads chosen)

    def others_busy(self, now: float, busy: float | None, own: float) -> float:
        t0, b0, o0 = self._mark
        wall = now - t0
        if busy is not None and b0 is not None and wall > 0:
            return max(0.0, (busy - b0 - (own - o0)) / wall)
        try:
            load = os.getloadavg()[0]
        except OSError:  # no load average on this platform: assume nothing else runs
            return 0.0
        return max(0.0, load - self.current)

    def threads(self) -> int:
        now = time.monotonic()
        if now - self._mark[0] < self.interval:
            return self.current
        busy, own = _machine_busy_s(), _own_cpu_s()
        others = self.others_busy(now, busy, own)
        self._mark = (now, busy, own)
        # a core counts as taken from 0.4 of it: a taken core's share is hidden by our own threads'
        # spinning on it (measured 0.5 core for a full `yes`)
        self.current = max(1, min(self.cores, self.cores - int(others + 0.6)))
        self.readings.append((round(others, 2), self.current))
        del self.readings[:-100]
        return self.current
