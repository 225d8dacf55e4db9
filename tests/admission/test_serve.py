"""`derivaudit serve`: the gate over real HTTP on loopback (uvicorn in a thread or a process of its
own), with the deterministic rule backend as the judge."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")

from derivaudit import load_log  # noqa: E402
from derivaudit.admission.gate import Client, GateError, admit  # noqa: E402
from derivaudit.admission.serve import Limits, open_gate, operating_point  # noqa: E402
from derivaudit.audit.evidence import ConversationIndex, passage_dict  # noqa: E402
from derivaudit.log.io import turn_to_dict, write_to_dict  # noqa: E402

from ..gate_server import RecordRule, Slow, point, served  # noqa: E402
from ..rule_backend import RuleBackend  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> Path:
    """A scan and a replay of the gold fixture, all by the rule backend."""
    from derivaudit.admission.replay import replay
    from derivaudit.audit.annotate import Annotator
    from derivaudit.audit.scan import ScanConfig, scan

    run = tmp_path_factory.mktemp("serve") / "run"
    be = RecordRule("1, 2")
    log = load_log(ROOT / "fixtures" / "memories.jsonl")
    scan(log, run, (Annotator("A", be, "a"), Annotator("B", be, "b"), Annotator("adjudicator", be, "a")),
         cfg=ScanConfig(calibrate=False, use_cache=False))
    replay(run, be, [("obligation", "expanded"), ("holistic", "citation_only")], point="crossfit")
    return run


def raw(url: str, body: bytes, token: str | None = None, headers: dict | None = None) -> tuple[int, dict, dict]:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json",
                                                                         **(headers or {})})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read()), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), dict(e.headers)


def memories():
    log = load_log(ROOT / "fixtures" / "memories.jsonl")
    return log, [turn_to_dict(t) for t in log.conversations["boston"].turns], \
        [w for w in log.writes if w.conversation_id == "boston"]


def test_the_operating_point_is_the_replays_refitted_on_every_conversation(replayed):
    from derivaudit.admission.operating import pick_threshold
    from derivaudit.runs.folder import read_jsonl

    p = operating_point(replayed, "obligation", "expanded")
    rows = [r for r in read_jsonl(replayed / "replay_scores.jsonl") if r["setting"] == "obligation/expanded"]
    negs: dict[str, list[float]] = {}
    for r in rows:
        if r["truth"] is False and r["score"] is not None:
            negs.setdefault(r["conversation_id"], []).append(r["score"])
    assert p.point == "crossfit" and p.threshold == pick_threshold(negs) and p.model == RuleBackend().identity()
    with pytest.raises(ValueError, match="has no setting qa/expanded"):
        operating_point(replayed, "qa", "expanded")
    with pytest.raises(ValueError, match="has no replay"):
        operating_point(replayed.parent, "obligation")


def test_a_run_replayed_with_another_judge_is_refused(replayed, tmp_path):
    class Other(RuleBackend):
        def identity(self):
            return {"backend": "rule", "model": "other"}

    with pytest.raises(ValueError, match="threshold belongs to the model it was fitted on"):
        open_gate(operating_point(replayed), Other(), tmp_path / "log.jsonl")
    assert not (tmp_path / "log.jsonl").exists()


def test_a_run_replayed_by_the_same_judge_at_another_path_is_served(replayed, tmp_path):
    """Up to 0.2.0 a GGUF judge's identity held its file's path: a replay made then names it. The
    same file elsewhere is the same judge (its identity alias), another file is not."""
    class Moved(RuleBackend):
        def identity(self):
            return {"backend": "rule", "model": "rule", "file_sha256": "ab"}

        def identity_aliases(self):
            return [{**self.identity(), "file": "/old/home/models/rule.gguf"}]

    point = operating_point(replayed)
    old = dataclasses.replace(point, model=Moved().identity_aliases()[0])
    open_gate(old, Moved(), tmp_path / "log.jsonl")  # no refusal
    other = dataclasses.replace(point, model={**old.model, "file_sha256": "cd"})
    with pytest.raises(ValueError, match="threshold belongs to the model it was fitted on"):
        open_gate(other, Moved(), tmp_path / "log2.jsonl")


def test_admit_over_http_matches_admit_in_process(replayed, tmp_path):
    log, turns, writes = memories()
    p = operating_point(replayed, "obligation", "expanded")
    gate = open_gate(p, RecordRule("1, 2"), tmp_path / "decisions.jsonl")
    index = ConversationIndex(log.conversations["boston"])
    with served(gate) as url:
        c = Client(url)
        assert c.add_turns("boston", turns) == {"conversation_id": "boston", "added": len(turns), "turns": len(turns)}
        assert c.add_turns("boston", turns[:2])["added"] == 0  # a turn sent again is not a new turn
        cfg = c.config()
        assert cfg["operating_point"]["threshold"] == p.threshold and cfg["model"] == RuleBackend().identity()
        seen = set()
        for w in writes:
            got = c.admit({k: v for k, v in write_to_dict(w).items() if k not in ("type", "meta")})
            passages = [passage_dict(t) for t in index.views(w).expanded]
            want = admit(w.text, passages, view="obligation", verifier=RecordRule("1, 2"), threshold=p.threshold,
                         combine=p.combine)
            assert got["score"] == want["score"] and got["admit"] is bool(want["decision"])
            assert got["threshold"] == p.threshold and got["passages"] == [x["turn_id"] for x in passages]
            assert [f["logodds"] for f in got["failed"]] == [x for x in want["parts"] if not x >= p.threshold]
            seen.add(got["decision"])
        assert seen == {"admit", "reject"}  # the fixture holds both


def test_every_decision_is_logged_as_a_memory_log_that_scan_audits(replayed, tmp_path):
    from derivaudit.audit.annotate import Annotator
    from derivaudit.audit.scan import ScanConfig, scan

    _, turns, writes = memories()
    path = tmp_path / "decisions.jsonl"
    gate = open_gate(operating_point(replayed), RecordRule("1, 2"), path)
    with served(gate) as url:
        c = Client(url)
        c.add_turns("boston", turns[:3])
        first = c.admit({"write_id": "g1", "conversation_id": "boston", "text": writes[0].text,
                         "citations": list(writes[0].citations)})
        # the rest of the history sent with the next candidate
        c.admit({"write_id": "g2", "conversation_id": "boston", "text": writes[1].text,
                 "citations": list(writes[1].citations)}, turns=turns)
        again = c.admit({"write_id": "g1", "conversation_id": "boston", "text": writes[0].text,
                         "citations": list(writes[0].citations)})
        assert again["replayed"] and again["score"] == first["score"]  # a retry is answered, not judged again
        with pytest.raises(GateError) as e:
            c.admit({"write_id": "g1", "conversation_id": "boston", "text": "something else", "citations": []})
        assert e.value.status == 409 and e.value.field == "write.write_id"
    logged = load_log(path)
    assert [w.write_id for w in logged.writes] == ["g1", "g2"]
    assert len(logged.conversations["boston"].turns) == len(turns)
    assert logged.writes[0].last_seen_turn == turns[2]["turn_id"]  # the history it saw then
    assert logged.writes[0].meta["gate"]["decision"] == first["decision"]
    be = RecordRule("1, 2")
    report = scan(logged, tmp_path / "audit", (Annotator("A", be, "a"), Annotator("B", be, "b"),
                                                Annotator("adjudicator", be, "a")),
                  cfg=ScanConfig(calibrate=False, use_cache=False))
    assert report["run"]["writes"] == 2
    # reopened, the gate goes on where it stopped
    gate = open_gate(operating_point(replayed), RecordRule("1, 2"), path)
    assert set(gate.log.decisions) == {"g1", "g2"} and len(gate.log.turns["boston"]) == len(turns)
    gate.log.close()


def test_bad_requests_get_a_4xx_naming_the_field(replayed, tmp_path):
    _, turns, _ = memories()
    gate = open_gate(operating_point(replayed), RuleBackend(), tmp_path / "d.jsonl", Limits(max_body=4096,
                                                                                            max_turns=40))
    with served(gate, token="s3cret-token-0123456789") as url:
        tok = "s3cret-token-0123456789"
        assert raw(url + "/v1/admit", b"{}")[0] == 401
        assert raw(url + "/v1/admit", b"{}", token="wrong-token-0123456789")[0] == 401
        with urllib.request.urlopen(url + "/health") as r:  # health needs no token
            assert json.loads(r.read())["status"] == "ok"
        status, body, _ = raw(url + "/v1/admit", b"{not json", tok)
        assert status == 400 and body["error"]["code"] == "bad_json"
        status, body, _ = raw(url + "/v1/admit", b'{"write": {"text": "x"}}', tok)
        assert status == 422 and body["error"]["field"] == "write.conversation_id"
        status, body, _ = raw(url + "/v1/admit", b'{"write": {"conversation_id": "nowhere", "text": "x"}}', tok)
        assert status == 404 and "nowhere" in body["error"]["message"]
        status, body, _ = raw(url + "/v1/turns", json.dumps({"conversation_id": "boston", "turns": turns}).encode(),
                              tok)
        assert status == 200
        status, body, _ = raw(url + "/v1/admit", json.dumps({"write": {"conversation_id": "boston", "text": "x",
                                                                         "citations": ["t99"]}}).encode(), tok)
        assert status == 422 and body["error"]["field"].startswith("write.citations")
        status, body, _ = raw(url + "/v1/admit", json.dumps({"write": {"conversation_id": "boston", "text": 5}})
                              .encode(), tok)
        assert status == 422 and body["error"]["field"] == "write.text"
        changed = [{**turns[0], "text": "rewritten"}]
        status, body, _ = raw(url + "/v1/turns", json.dumps({"conversation_id": "boston", "turns": changed}).encode(),
                              tok)
        assert status == 409 and body["error"]["field"] == "turns[0]"
        big = json.dumps({"write": {"conversation_id": "boston", "text": "y" * 5000}}).encode()
        status, body, _ = raw(url + "/v1/admit", big, tok)
        assert status == 413 and "--max-body" in body["error"]["message"]
        many = [{"turn_id": f"n{i}", "speaker": "A", "text": "hi"} for i in range(40)]
        status, body, _ = raw(url + "/v1/turns", json.dumps({"conversation_id": "boston", "turns": many}).encode(),
                              tok)
        assert status == 413 and body["error"]["field"] == "turns" and "--max-turns" in body["error"]["message"]
    assert [w for w in load_log(tmp_path / "d.jsonl").writes] == []  # nothing judged, nothing logged


def test_a_full_queue_answers_503_with_retry_after_and_a_timeout_504(tmp_path):
    gate = open_gate(point(), Slow(0.4), tmp_path / "d.jsonl", Limits(queue=1, timeout=30))
    turns = [{"turn_id": "t1", "speaker": "Alex", "text": "I moved to Boston in May."}]
    with served(gate) as url:
        Client(url).add_turns("c", turns)
        results: list = []

        def one(i):
            try:
                results.append(Client(url).admit({"write_id": f"w{i}", "conversation_id": "c",
                                                  "text": "Alex moved to Boston.", "citations": ["t1"]}))
            except GateError as e:
                results.append(e)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        busy = [r for r in results if isinstance(r, GateError)]
        ok = [r for r in results if isinstance(r, dict)]
        assert busy and all(e.status == 503 and e.retry_after and e.retry_after >= 1 for e in busy)
        assert ok and len(ok) + len(busy) == 6
    assert sorted(w.write_id for w in load_log(tmp_path / "d.jsonl").writes) == sorted(r["write_id"] for r in ok)
    gate = open_gate(point(), Slow(2.0), tmp_path / "d2.jsonl", Limits(timeout=0.5))
    with served(gate) as url:
        Client(url).add_turns("c", turns)
        with pytest.raises(GateError) as e:
            Client(url).admit({"write_id": "late", "conversation_id": "c", "text": "Alex moved.", "citations": []})
        assert e.value.status == 504 and "same write_id" in e.value.message
        time.sleep(2.5)  # the work that had begun is finished and logged: the retry gets it, judged once
        again = Client(url).admit({"write_id": "late", "conversation_id": "c", "text": "Alex moved.",
                                   "citations": []})
        assert again["replayed"]
    assert [w.write_id for w in load_log(tmp_path / "d2.jsonl").writes] == ["late"]


def test_a_kill_9_loses_no_answered_decision(tmp_path):
    path = tmp_path / "d.jsonl"
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "gate_server.py"), str(path), str(port), "0.05"],
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                Client(url, timeout=2).health()
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        Client(url).add_turns("c", [{"turn_id": "t1", "speaker": "Alex", "text": "I moved to Boston in May."}])
        answered: list[str] = []
        stop = threading.Event()

        def client(k):
            i = 0
            while not stop.is_set():
                try:
                    v = Client(url, timeout=10).admit({"write_id": f"w{k}-{i}", "conversation_id": "c",
                                                       "text": f"Alex moved to Boston ({k}-{i}).", "citations": ["t1"]})
                    answered.append(v["write_id"])
                except (GateError, OSError):
                    return
                i += 1

        threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        while len(answered) < 12:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        stop.set()
        for t in threads:
            t.join(15)
    finally:
        if proc.poll() is None:
            proc.kill()
    reopened = open_gate(point(), RuleBackend(), path)  # a torn last line, if any, is set apart
    reopened.log.close()
    assert set(answered) <= set(reopened.log.decisions) and len(answered) >= 12
    assert {w.write_id for w in load_log(path).writes} == set(reopened.log.decisions)  # and the log loads


def test_the_command_refuses_a_run_without_replay_and_an_open_port_without_a_token(replayed, tmp_path):
    from typer.testing import CliRunner

    from derivaudit.cli import app

    r = CliRunner().invoke(app, ["serve", "--from", str(replayed.parent)])
    assert r.exit_code == 2 and "has no replay" in r.output
    r = CliRunner().invoke(app, ["serve", "--from", str(replayed), "--host", "0.0.0.0"])
    assert r.exit_code == 2 and "pass --token-file" in r.output
    (tmp_path / "t").write_text("short\n")
    r = CliRunner().invoke(app, ["serve", "--from", str(replayed), "--token-file", str(tmp_path / "t")])
    assert r.exit_code == 2 and "at least 16" in r.output
    (tmp_path / "log.jsonl").write_text('{"type": "header", "schema_version": 1, "producer": "someone else"}\n')
    gate_log = tmp_path / "log.jsonl"
    with pytest.raises(ValueError, match="not a decision log"):
        open_gate(point(), RecordRule(), gate_log)
    assert gate_log.read_text().count("\n") == 1  # another file is never appended to


@pytest.mark.slow
def test_derivaudit_serve_end_to_end_on_a_real_model(fixture_scan, tmp_path):
    """scan (conftest) -> replay -> `derivaudit serve` as a process -> the answer matches admit()."""
    from typer.testing import CliRunner

    from derivaudit.cli import app
    from derivaudit.models import load_backend

    from ..conftest import copy_run

    run = copy_run(fixture_scan[0], tmp_path / "run")
    r = CliRunner().invoke(app, ["replay", str(run), "--view", "holistic", "--format", "json"])
    assert r.exit_code == 0, r.output
    # the replay's judge is SmolLM2 on transformers; the same weights on llama.cpp are another judge
    r = CliRunner().invoke(app, ["serve", "--from", str(run), "--view", "holistic", "--backend", "llamacpp",
                                 "--model", "smollm2"])
    assert r.exit_code == 2 and "threshold belongs to the model it was fitted on" in r.output
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    token = tmp_path / "token"
    token.write_text("0123456789abcdef-token\n")
    proc = subprocess.Popen([sys.executable, "-m", "derivaudit", "serve", "--from", str(run), "--view", "holistic",
                             "--port", str(port), "--log", str(tmp_path / "gate.jsonl"), "--token-file", str(token)],
                            stderr=subprocess.PIPE, text=True)
    try:
        c = Client(f"http://127.0.0.1:{port}", token="0123456789abcdef-token")
        deadline = time.time() + 300
        while True:
            try:
                c.health()
                break
            except OSError:
                assert proc.poll() is None and time.time() < deadline, proc.stderr.read()
                time.sleep(0.5)
        p = operating_point(run, "holistic")
        assert c.config()["operating_point"]["threshold"] == p.threshold
        text = "Alex accepted a job at a software company in Boston."
        turns = [{"turn_id": "t1", "speaker": "Alex", "text": "I got an offer from a software company in Boston."},
                 {"turn_id": "t2", "speaker": "Alex", "text": "Yes, I accepted the job yesterday."}]
        got = c.admit({"write_id": "e2e", "conversation_id": "c", "text": text, "citations": ["t2"]}, turns=turns)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    be = load_backend("transformers", "smollm2", cache=False)
    want = admit(text, [{"speaker": "Alex", "text": t["text"]} for t in turns], view="holistic", verifier=be,
                 threshold=p.threshold)
    assert got["score"] == pytest.approx(want["score"], abs=1e-3) and got["admit"] is bool(want["decision"])
    assert [w.write_id for w in load_log(tmp_path / "gate.jsonl").writes] == ["e2e"]


def test_memory_text_is_escaped_in_the_log_and_the_answer(tmp_path):
    """Bidi and C1 characters from a memory never reach the log or the wire raw (safe.dumps)."""
    from dataclasses import replace

    path = tmp_path / "d.jsonl"
    # the obligation view with the record as its one obligation: the answer carries the memory text
    gate = open_gate(replace(point(), view="obligation"), RecordRule(), path, split="record")
    hostile = "Alex moved to Boston\u202e\u009b31m."
    with served(gate) as url:
        Client(url).add_turns("c", [{"turn_id": "t1", "speaker": "Alex", "text": hostile}])
        req = urllib.request.Request(url + "/v1/admit", data=json.dumps(
            {"write": {"write_id": "w", "conversation_id": "c", "text": hostile, "citations": ["t1"]}}).encode(),
            method="POST")
        with urllib.request.urlopen(req) as r:
            wire = r.read()
    raw = path.read_bytes()
    assert "\u202e".encode() not in raw and b"\\u202e" in raw and "\u009b".encode() not in raw
    assert "\u202e".encode() not in wire and b"\\u202e" in wire
    assert json.loads(wire)["parts"][0]["text"] == hostile
    assert load_log(path).writes[0].text == hostile  # the text itself is unchanged


# ---------------------------------------------------------------- the decision log stays the gate's own


def _post(url: str, path: str, body: bytes | dict, token: str | None = None) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    status, doc, _ = raw(url + path, data, token)
    return status, doc


def _gate_process(log: Path, delay: float = 0.0):
    """gate_server.py as a process of its own on a free port: (process, base URL)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "gate_server.py"), str(log), str(port), str(delay)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            Client(url, timeout=2).health()
            return proc, url
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                raise
            time.sleep(0.1)


def _nested(depth: int) -> dict:
    d: dict = {}
    for _ in range(depth - 1):
        d = {"k": d}
    return d


def test_no_request_makes_the_decision_log_unreadable_by_a_restarted_gate(tmp_path):
    """Requests are read by the log reader's own rules (depth, duplicate keys, NFC ids) before
    anything is logged; after all of them the gate restarts on its log."""
    path = tmp_path / "d.jsonl"
    proc, url = _gate_process(path)
    try:
        turn = {"turn_id": "t1", "speaker": "Alex", "text": "I moved to Boston in May."}
        assert _post(url, "/v1/turns", {"conversation_id": "c", "turns": [turn]})[0] == 200
        write = {"write_id": "w", "conversation_id": "c", "text": "Alex moved to Boston.", "citations": ["t1"]}
        for depth in (66, 300):  # the write itself is 2 levels, meta adds the rest
            status, doc = _post(url, "/v1/admit", {"write": {**write, "meta": _nested(depth)}})
            assert (status, doc["error"]["code"]) == (422, "too_deep"), doc
        twice = b'{"write": {"write_id": "w", "conversation_id": "c", "text": "a", "text": "Alex moved.", ' \
                b'"citations": ["t1"]}}'
        status, doc = _post(url, "/v1/admit", twice)
        assert (status, doc["error"]["code"], doc["error"]["field"]) == (422, "duplicate_key", "text")
        # NFC-equal ids name one thing: a composed and a decomposed é
        assert _post(url, "/v1/turns", {"conversation_id": "caf\u00e9", "turns": [turn]})[1]["added"] == 1
        status, doc = _post(url, "/v1/turns", {"conversation_id": "cafe\u0301", "turns": [turn]})
        assert (status, doc["added"], doc["turns"]) == (200, 0, 1)
        status, doc = _post(url, "/v1/turns", {"conversation_id": "c", "turns": [{**turn, "turn_id": "\u00e9"}]})
        assert (status, doc["added"]) == (200, 1)
        status, doc = _post(url, "/v1/turns", {"conversation_id": "c", "turns": [
            {**turn, "turn_id": "e\u0301", "text": "Another text."}]})
        assert (status, doc["error"]["code"]) == (409, "conflict")
        first = _post(url, "/v1/admit", {"write": {**write, "write_id": "w\u00e9"}})
        again = _post(url, "/v1/admit", {"write": {**write, "write_id": "we\u0301"}})
        assert first[0] == again[0] == 200 and again[1]["replayed"] and again[1]["write_id"] == "w\u00e9"
        status, doc = _post(url, "/v1/admit", {"write": {**write, "conversation_id": "cafe\u0301"}})
        assert status == 200, doc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
    reopened = open_gate(point(), RuleBackend(), path)  # the restart reads every line it wrote
    reopened.log.close()
    assert sorted(reopened.log.decisions) == ["w", "w\u00e9"]
    assert [t["turn_id"] for t in reopened.log.turns["c"]] == ["t1", "\u00e9"]
    assert list(reopened.log.turns) == ["c", "caf\u00e9"]


def test_a_write_id_or_turn_sent_again_must_be_the_same_write_or_turn(tmp_path):
    gate = open_gate(point(), RecordRule(), tmp_path / "d.jsonl", Limits(max_turns=3))
    turns = [{"turn_id": "t1", "speaker": "Alex", "text": "I moved to Boston in May."},
             {"turn_id": "t2", "speaker": "Alex", "text": "The job starts in June."}]
    with served(gate) as url:
        assert _post(url, "/v1/turns", {"conversation_id": "c", "turns": turns})[1]["added"] == 2
        for change, code in (({"order": 7}, 409), ({"session": "2"}, 409), ({"meta": {"x": 1}}, 409),
                             ({"colour": "red"}, 422), ({"order": "zz"}, 422)):
            status, doc = _post(url, "/v1/turns", {"conversation_id": "c", "turns": [{**turns[0], **change}]})
            assert (status, doc["error"]["field"].split(".")[0]) == (code, "turns[0]"), (change, doc)
        # held turns sent again are not new: 2 held + 2 resent + 1 new is 3 turns, within --max-turns 3
        status, doc = _post(url, "/v1/turns", {"conversation_id": "c", "turns": [
            *turns, {"turn_id": "t3", "speaker": "Alex", "text": "I start on Monday."}]})
        assert (status, doc["added"], doc["turns"]) == (200, 1, 3)
        write = {"write_id": "w", "conversation_id": "c", "text": "Alex moved to Boston.", "citations": ["t1"]}
        assert _post(url, "/v1/admit", {"write": write})[0] == 200
        status, doc = _post(url, "/v1/admit", {"write": {**write, "citations": ["t2"]}})
        assert (status, doc["error"]["code"]) == (409, "conflict")
        assert _post(url, "/v1/admit", {"write": write})[1]["replayed"]


def test_turns_answered_504_were_not_logged(tmp_path):
    path = tmp_path / "d.jsonl"
    gate = open_gate(point(), Slow(1.5), path, Limits(timeout=0.3))
    turns = [{"turn_id": "t1", "speaker": "Alex", "text": "I moved to Boston in May."}]
    with served(gate) as url:
        Client(url).add_turns("c", turns)
        slow = threading.Thread(target=lambda: _post(url, "/v1/admit", {"write": {
            "write_id": "w", "conversation_id": "c", "text": "Alex moved.", "citations": ["t1"]}}))
        slow.start()
        time.sleep(0.1)  # the judge is busy with the write: the turns wait behind it past their deadline
        status, doc = _post(url, "/v1/turns", {"conversation_id": "late", "turns": turns})
        assert status == 504 and "not" in doc["error"]["message"], doc
        slow.join()
        time.sleep(1.6)  # the queued turns job has run by now (and found it was given up)
    assert "late" not in {c for c in load_log(path).conversations}


@pytest.mark.parametrize("kind", ["fifo", "link_to_dev_null", "directory"])
def test_a_log_that_is_not_a_regular_file_is_refused_naming_it(tmp_path, kind):
    path = tmp_path / "d.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to("/dev/null")
    with pytest.raises(ValueError, match=f"{path}.*not a regular file"):
        open_gate(point(), RuleBackend(), path)


@pytest.fixture
def tiny_disk(tmp_path):
    """A 192 KiB tmpfs, where the test may mount one (root on Linux); else the test is skipped."""
    where = tmp_path / "disk"
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=192k", "tmpfs", str(where)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    yield where
    subprocess.run(["umount", str(where)], capture_output=True)


def test_a_full_disk_loses_no_answered_decision_and_leaves_no_partial_line(tiny_disk):
    path = tiny_disk / "d.jsonl"
    gate = open_gate(point(), RecordRule(), path)
    answered, refused = [], []
    with served(gate) as url:
        Client(url).add_turns("c", [{"turn_id": "t1", "speaker": "Alex", "text": "I moved to Boston in May."}])
        for i in range(2000):
            status, doc = _post(url, "/v1/admit", {"write": {"write_id": f"w{i}", "conversation_id": "c",
                                                             "text": f"Alex moved to Boston {'x' * 200} {i}.",
                                                             "citations": ["t1"]}})
            if status == 200:
                answered.append(doc["write_id"])
            else:
                refused.append((status, doc["error"]["code"], doc["error"]["message"]))
                if len(refused) >= 3:
                    break
    assert answered and refused and all(r[:2] == (507, "log_unwritable") for r in refused), refused[:1]
    assert "nothing of this request was logged" in refused[0][2]
    assert path.read_bytes().endswith(b"\n")  # the service closed its log on shutdown
    reopened = open_gate(point(), RuleBackend(), path)
    reopened.log.close()
    assert sorted(reopened.log.decisions) == sorted(answered)


def test_the_token_is_compared_as_sent_and_the_scheme_in_any_case(replayed, tmp_path):
    token = "t\u00f8ken-s3cret-0123456789"
    gate = open_gate(operating_point(replayed), RuleBackend(), tmp_path / "d.jsonl")
    with served(gate, token=token) as url:
        def health_of(auth: bytes) -> int:
            req = urllib.request.Request(url + "/v1/config")
            req.add_header("Authorization", auth)
            try:
                with urllib.request.urlopen(req) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code

        assert health_of(b"Bearer " + token.encode("utf-8")) == 200
        assert health_of(b"bearer " + token.encode("utf-8")) == 200
        assert health_of(b"Bearer " + token.encode("latin-1")) == 401
        assert health_of(b"Basic " + token.encode("utf-8")) == 401


def test_a_second_torn_tail_is_kept_beside_the_first(tmp_path):
    path = tmp_path / "d.jsonl"
    gate = open_gate(point(), RuleBackend(), path)
    gate.log.close()
    for torn in (b'{"type": "turn", "conver', b'{"type": "write", "wri'):
        with path.open("ab") as f:
            f.write(torn)
        open_gate(point(), RuleBackend(), path).log.close()
    assert (tmp_path / "d.jsonl.torn").read_bytes() == b'{"type": "turn", "conver'
    assert (tmp_path / "d.jsonl.torn.1").read_bytes() == b'{"type": "write", "wri'


def test_a_log_moved_away_while_serving_is_no_longer_appended_to(tmp_path):
    path = tmp_path / "d.jsonl"
    gate = open_gate(point(), RecordRule(), path)
    with served(gate) as url:
        Client(url).add_turns("c", [{"turn_id": "t1", "speaker": "Alex", "text": "I moved to Boston in May."}])
        path.rename(tmp_path / "moved.jsonl")
        status, doc = _post(url, "/v1/turns", {"conversation_id": "c", "turns": [
            {"turn_id": "t2", "speaker": "Alex", "text": "The job starts in June."}]})
        assert (status, doc["error"]["code"]) == (507, "log_unwritable")
        assert "moved or removed" in doc["error"]["message"]
    assert [t.turn_id for t in load_log(tmp_path / "moved.jsonl").conversations["c"].turns] == ["t1"]
