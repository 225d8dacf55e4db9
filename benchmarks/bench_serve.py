"""`derivaudit serve` under load: requests/s, p50/p99 latency and errors with N concurrent clients
on loopback, against calling the same gate in process, in one run.

Usage:
    python benchmarks/bench_serve.py                      # the rule backend: the service's own overhead
    python benchmarks/bench_serve.py --model qwen2.5-coder-1.5b --requests 6   # + the embedded judge

Two judges: the deterministic rule backend of the tests (answers from word overlap in
microseconds, so what is measured is HTTP, JSON, validation, the queue and the fsynced decision log)
and, with --model, a real model (model-bound: the service should add nothing visible). Each level
sends a bounded number of requests and stops after --seconds whatever happens. Afterwards the
decision log is read back: every 200 answer must be in it exactly once (no request lost or
answered twice). The baseline is `Gate.admit` called in process on the same requests, log included.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402

from derivaudit import load_log  # noqa: E402
from derivaudit.admission.serve import Limits, OperatingPoint, open_gate  # noqa: E402
from derivaudit.log.io import turn_to_dict  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "memories.jsonl"


def requests_of(n: int, tag: str) -> tuple[list[dict], list[dict]]:
    """The fixture's turns (per conversation) and n candidate writes cycling over its writes."""
    log = load_log(FIXTURES)
    turns = [{"conversation_id": c, "turns": [turn_to_dict(t) for t in conv.turns]}
             for c, conv in log.conversations.items()]
    writes = [{"write": {"write_id": f"{tag}-{i}", "conversation_id": w.conversation_id, "text": w.text,
                         "citations": list(w.citations), "last_seen_turn": w.last_seen_turn}}
              for i, w in enumerate(log.writes[j % len(log.writes)] for j in range(n))]
    return turns, writes


def point_for(backend) -> OperatingPoint:
    return OperatingPoint("holistic", "expanded", 0.0, "min", "argmax", backend.identity(), {"run": "benchmark"})


def in_process(backend, n: int, work: Path) -> list[float]:
    gate = open_gate(point_for(backend), backend, work / "inproc.jsonl", split="record")
    turns, writes = requests_of(n, "p")
    for t in turns:
        gate.add_turns(t)
    lat = []
    for body in writes:
        t0 = time.perf_counter()
        gate.admit(body)
        lat.append(time.perf_counter() - t0)
    gate.log.close()
    return lat[1:]  # the first call pays imports and first-use set-up


def over_http(backend, n: int, clients: int, seconds: float, work: Path, tag: str) -> dict:
    from tests.gate_server import served

    path = work / f"served-{tag}.jsonl"
    gate = open_gate(point_for(backend), backend, path, Limits(queue=max(16, clients)), split="record")
    turns, writes = requests_of(n, tag)
    lat: list[float] = []
    answered: list[str] = []
    errors: list[str] = []
    lock = threading.Lock()
    it = iter(writes)
    with served(gate) as url:
        with httpx.Client() as c:
            for t in turns:
                c.post(url + "/v1/turns", json=t).raise_for_status()
        deadline = time.perf_counter() + seconds

        def worker() -> None:
            with httpx.Client(timeout=600) as c:
                while time.perf_counter() < deadline:
                    with lock:
                        body = next(it, None)
                    if body is None:
                        return
                    t0 = time.perf_counter()
                    r = c.post(url + "/v1/admit", json=body)
                    dt = time.perf_counter() - t0
                    with lock:
                        if r.status_code == 200:
                            lat.append(dt)
                            answered.append(r.json()["write_id"])
                        else:
                            errors.append(f"{r.status_code}")

        t0 = time.perf_counter()
        threads = [threading.Thread(target=worker) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
    logged = [w.write_id for w in load_log(path).writes]
    lat = lat[1:] if len(lat) > 1 else lat  # as in process: the first answer pays first-use set-up
    return {"lat": lat, "wall": wall, "errors": errors, "answered": answered,
            "lost": sorted(set(answered) - set(logged)), "twice": len(logged) - len(set(logged)),
            "unanswered_logged": len(set(logged) - set(answered))}


def ms(x: float) -> str:
    return f"{1000 * x:8.2f}"


def report(name: str, backend, n: int, levels: list[int], seconds: float) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench_serve."))
    base = in_process(backend, n, work)
    b50 = statistics.median(base)
    print(f"\n{name}: {n} requests per level, stop after {seconds:g} s")
    print(f"{'clients':>8} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'lost':>5} {'twice':>6} "
          f"{'p50/in-process':>15} {'overhead p50 ms':>16}")
    print(f"{'in-proc':>8} {len(base) / sum(base):8.1f} {ms(b50)} {ms(quantile(base, 0.99))} {0:7d} {'-':>5} {'-':>6} "
          f"{1.0:15.2f} {0.0:16.2f}")
    for k in levels:
        r = over_http(backend, n, k, seconds, work, f"c{k}")
        if not r["lat"]:
            print(f"{k:8d} no answer ({len(r['errors'])} errors: {', '.join(sorted(set(r['errors'])))})")
            continue
        p50 = statistics.median(r["lat"])
        print(f"{k:8d} {len(r['lat']) / r['wall']:8.1f} {ms(p50)} {ms(quantile(r['lat'], 0.99))} "
              f"{len(r['errors']):7d} {len(r['lost']):5d} {r['twice']:6d} {p50 / b50:15.2f} "
              f"{1000 * (p50 - b50) if k == 1 else float('nan'):16.2f}")
    print("overhead p50: one client's p50 over HTTP minus the in-process p50 (more clients queue by design: "
          "one judge)")


def quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=300, help="requests per level (rule backend)")
    ap.add_argument("--clients", default="1,4,16", help="concurrent clients per level, comma-separated")
    ap.add_argument("--seconds", type=float, default=60.0, help="a level stops after this long")
    ap.add_argument("--model", default=None, help="also a real model (in-process backend of this name), e.g. "
                                                 "qwen2.5-coder-1.5b; its levels send --model-requests each")
    ap.add_argument("--model-requests", type=int, default=6)
    args = ap.parse_args()
    levels = [int(x) for x in args.clients.split(",")]
    from tests.gate_server import RecordRule

    report("rule backend (the service's own cost)", RecordRule(), args.requests, levels, args.seconds)
    if args.model:
        from derivaudit.models import default_backend, load_backend

        be = load_backend(default_backend(), args.model, cache=False)
        report(f"{args.model} ({default_backend()})", be, args.model_requests, [1, 2], max(args.seconds, 600))


if __name__ == "__main__":
    main()
