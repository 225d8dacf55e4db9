"""The gate over the rule backend, as a process of its own (for the kill -9 test):
python tests/gate_server.py LOG PORT [DELAY]"""

from __future__ import annotations

import re
import socket
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvicorn  # noqa: E402

from derivaudit.admission.serve import OperatingPoint, create_app, open_gate, uvicorn_config  # noqa: E402
from derivaudit.models.base import Score  # noqa: E402
from tests.rule_backend import RuleBackend, words  # noqa: E402


class RecordRule(RuleBackend):
    """The rule backend, also answering the admission views' question about a whole record: yes
    (+4) when every content word of the record is in the passages, else no (-4)."""

    def score(self, prompts, k=100):
        out = super().score(prompts, k)
        for i, p in enumerate(prompts):
            m = re.search(r"Evidence:(.*)Record: <record>(.*)</record>", p.shared, re.S)
            if m and "Statement:" not in p.task:
                hit = words(m.group(2)) <= words(m.group(1))
                out[i] = Score(4.0 if hit else -4.0, -0.1 if hit else -4.1, -4.1 if hit else -0.1)
        return out


class Slow(RecordRule):
    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def score(self, prompts, k=100):
        time.sleep(self.delay)
        return super().score(prompts, k)


@contextmanager
def served(gate, token=None):
    """The gate's app on a free loopback port, uvicorn in a thread: yields the base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn_config(create_app(gate, token)))
    th = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    th.start()
    deadline = time.time() + 20
    while not server.started and time.time() < deadline:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        th.join(10)


def point() -> OperatingPoint:
    return OperatingPoint("holistic", "expanded", 0.0, "min", "argmax", RuleBackend().identity(), {"run": "test"})


if __name__ == "__main__":
    log, port = sys.argv[1], int(sys.argv[2])
    delay = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    gate = open_gate(point(), Slow(delay), log)
    uvicorn.Server(uvicorn_config(create_app(gate), host="127.0.0.1", port=port)).run()
