"""The embedded judge in process against the same GGUF behind a real OpenAI-compatible server
(llama-cpp-python's `python -m llama_cpp.server` on loopback, the protocol `vllm serve` speaks):
log-odds differences, sign flips and admission decisions on the fixture writes, in one run.

Usage: python benchmarks/bench_served.py [--model qwen2.5-coder-1.5b] [--writes 12] [--view holistic]

Needs `llama-cpp-python[server]` (make install). The server is started on a free port with one
thread (so the two paths do not share cores at once: they run one after the other) and stopped
after. What differs between the paths: in process, the evidence block is evaluated once and each
question after it; the server renders the chat template itself and evaluates each prompt whole;
the server returns at most its top_logprobs (20 here), so a word outside them is a bounded score.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx  # noqa: E402

from derivaudit import build_views, load_log  # noqa: E402
from derivaudit.admission.gate import admit  # noqa: E402
from derivaudit.models import load_backend  # noqa: E402
from derivaudit.models.embedded import resolve_gguf  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "memories.jsonl"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(gguf: Path, alias: str, log: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/v1"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", alias, "--host",
           "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--logits_all", "True",
           "--n_threads", str(os.cpu_count() or 1), "--n_threads_batch", str(os.cpu_count() or 1)]
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited: {log.read_text()[-1500:]}")
        try:
            if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.5)
    proc.terminate()
    raise SystemExit("llama_cpp.server did not start in 180 s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--writes", type=int, default=12)
    ap.add_argument("--view", default="holistic")
    args = ap.parse_args()
    log = load_log(FIXTURES)
    writes = log.writes[: args.writes]
    views = {v.write.write_id: v for v in build_views(log, write_ids={w.write_id for w in writes})}
    cases = [(w.text, [{"text": t.text, "speaker": t.speaker, "time": t.time} for t in views[w.write_id].expanded])
             for w in writes]
    local = load_backend("llamacpp", args.model, cache=False)
    t0 = time.perf_counter()
    here = [admit(r, p, view=args.view, verifier=local, split="record", use_cache=False) for r, p in cases]
    t_local = time.perf_counter() - t0
    del local
    gguf, _ = resolve_gguf(args.model)
    with tempfile.TemporaryDirectory() as d:
        proc, url = serve(gguf, args.model, Path(d) / "server.log")
        try:
            remote = load_backend("openai", args.model, cache=False, base_urls=[url], top_logprobs=20)
            t0 = time.perf_counter()
            there = [admit(r, p, view=args.view, verifier=remote, split="record", use_cache=False) for r, p in cases]
            t_remote = time.perf_counter() - t0
        finally:
            proc.terminate()
            proc.wait(30)
    diffs, flips, same = [], 0, 0
    print(f"{'write':14} {'in process':>11} {'served':>9} {'|diff|':>7}  decision")
    for w, a, b in zip(writes, here, there, strict=True):
        la, lb = a["verdict"]["logodds"], b["verdict"]["logodds"]
        if la is None or lb is None:
            print(f"{w.write_id:14} {la!s:>11} {lb!s:>9}   scoring error")
            continue
        diffs.append(abs(la - lb))
        flips += (la > 0) != (lb > 0)
        same += a["decision"] == b["decision"]
        agree = "same" if a["decision"] == b["decision"] else "DIFFERS"
        print(f"{w.write_id:14} {la:11.3f} {lb:9.3f} {abs(la - lb):7.3f}  {agree}")
    n = len(diffs)
    print(f"\n{args.model}, view {args.view}, {len(writes)} fixture writes: "
          f"mean |diff| {sum(diffs) / max(1, n):.3f}, "
          f"max {max(diffs, default=0):.3f}, sign flips {flips}, same decision {same}/{n}; "
          f"seconds in process {t_local:.1f}, served {t_remote:.1f} (ratio {t_remote / t_local:.2f})")


if __name__ == "__main__":
    main()
