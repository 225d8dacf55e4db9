"""Hostile-input and fault probes, each run as a user would (a `derivaudit` child
process), with what happened: exit code, whether a traceback was printed, whether what the output
path pointed at survived, what was left behind.

Usage: python benchmarks/bench_hardening.py                      # this checkout
       PYTHONPATH=/path/to/old/checkout python benchmarks/bench_hardening.py   # the before figures

Run as root on an old checkout, the first probe replaces /dev/full with a regular file (the bug it
probes); the script then recreates the device.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def run(*args: str, env: dict | None = None, timeout: int = 120) -> tuple[int, str]:
    code = "import sys; from derivaudit.cli import app; sys.argv[0] = 'derivaudit'; app()"
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, **(env or {})})
    return p.returncode, p.stdout + p.stderr


def verdict(rc: int, out: str, ok: bool, note: str = "") -> str:
    tb = " TRACEBACK" if "Traceback" in out else ""
    return f"exit {rc}{tb}; {'ok' if ok else 'BAD'}" + (f" ({note})" if note else "")


def probes(tmp: Path) -> dict[str, str]:
    demo = FIX / "demo.jsonl"
    res = {}
    rc, out = run("views", str(demo), "--format", "jsonl", "-o", "/dev/full")
    kept_device = stat.S_ISCHR(os.stat("/dev/full").st_mode)
    res["-o /dev/full"] = verdict(rc, out, rc == 2 and kept_device, "device kept, error" if kept_device and rc == 2
                                  else "device kept, claimed success" if kept_device else "DEVICE REPLACED")
    if not kept_device and os.geteuid() == 0:  # an old checkout replaced it: put the device back
        os.unlink("/dev/full")
        os.mknod("/dev/full", 0o666 | stat.S_IFCHR, os.makedev(1, 7))
        os.chmod("/dev/full", 0o666)
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    threading.Thread(target=lambda: fifo.read_bytes(), daemon=True).start()
    rc, out = run("views", str(demo), "--format", "jsonl", "-o", str(fifo))
    res["-o FIFO"] = verdict(rc, out, stat.S_ISFIFO(os.lstat(fifo).st_mode), "still a FIFO"
                             if stat.S_ISFIFO(os.lstat(fifo).st_mode) else "replaced by a file")
    target, link = tmp / "target.jsonl", tmp / "link.jsonl"
    target.write_text("old")
    link.symlink_to(target)
    rc, out = run("views", str(demo), "--format", "jsonl", "-o", str(link))
    res["-o symlink"] = verdict(rc, out, link.is_symlink() and target.read_text() != "old",
                                "link kept, target written" if link.is_symlink() else "link replaced")
    log = tmp / "log.jsonl"
    log.write_bytes(demo.read_bytes())
    rc, out = run("echo", str(log), "-o", str(log))
    res["echo X -o X"] = verdict(rc, out, log.read_bytes() == demo.read_bytes(),
                                 "input intact" if log.read_bytes() == demo.read_bytes() else "input overwritten")
    kept = tmp / "kept.jsonl"
    kept.write_text("x")
    kept.chmod(0o644)
    rc, out = run("views", str(demo), "--format", "jsonl", "-o", str(kept))
    mode = stat.S_IMODE(kept.stat().st_mode)
    res["-o existing 0644 file"] = verdict(rc, out, mode == 0o644, f"mode {mode:o}")
    rc, out = run("views", str(demo), "--format", "jsonl", "-o", str(tmp))
    res["-o a directory"] = verdict(rc, out, rc == 2 and "Traceback" not in out)
    # SIGTERM mid-run
    big, spill = tmp / "big.jsonl", tmp / "spill"
    spill.mkdir()
    with big.open("w") as fh:
        for i in range(40000):
            fh.write(json.dumps({"type": "turn", "conversation_id": "c", "turn_id": f"t{i}", "order": i,
                                 "speaker": "A", "text": f"day {i} walked dog {i % 97}"}) + "\n")
        for j in range(400):
            fh.write(json.dumps({"type": "write", "write_id": f"w{j}", "conversation_id": "c", "text": "A walked",
                                 "citations": [f"t{j}"], "last_seen_turn": "t39999"}) + "\n")
    code = "import sys; from derivaudit.cli import app; sys.argv[0] = 'derivaudit'; app()"
    p = subprocess.Popen([sys.executable, "-c", code, "views", str(big), "--format", "jsonl", "-o",
                          str(tmp / "v.jsonl")], env={**os.environ, "TMPDIR": str(spill)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not any(spill.iterdir()) and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)
    time.sleep(0.3)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    left = [x.name for x in spill.iterdir()] + [x.name for x in tmp.glob(".v.jsonl.*")]
    res["SIGTERM mid-run"] = verdict(p.returncode, err, not left, f"left: {left}" if left else "nothing left")
    # a gzip bomb: 256 MiB of zeros with no newline (250 KB compressed)
    bomb = tmp / "bomb.jsonl.gz"
    with gzip.open(bomb, "wb", 9) as fh:
        chunk = b"\0" * 2**24
        for _ in range(16):
            fh.write(chunk)
    t0 = time.time()
    rc, out = run("validate", str(bomb), timeout=600)
    res["256 MiB gzip bomb"] = verdict(rc, out, rc == 2 and "Traceback" not in out,
                                     f"{time.time() - t0:.1f} s; " + out.strip().splitlines()[-1][:70])
    # supersedes naming no family
    sup = tmp / "sup.jsonl"
    rows = [{"type": "turn", "conversation_id": "c", "turn_id": "t1", "order": 0, "speaker": "A", "text": "hi there"},
            {"type": "write", "write_id": "a", "conversation_id": "c", "text": "x", "citations": ["t1"],
             "last_seen_turn": "t1", "source_id": "fa"},
            {"type": "write", "write_id": "b", "conversation_id": "c", "text": "y", "citations": ["t1"],
             "last_seen_turn": "t1", "verified_correction": True, "supersedes": ["fz"]}]
    sup.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rc, out = run("validate", "--strict", str(sup))
    res["supersedes an unknown family"] = verdict(rc, out, rc == 2, "refused" if rc == 2 else "accepted")
    # importers
    af = json.loads((FIX / "letta_agent.af").read_text())
    for m in af["agents"][0]["messages"]:
        for c in m.get("tool_calls") or []:
            if c["function"]["name"] == "core_memory_append":
                c["function"]["arguments"] = "{label: human"
    src = tmp / "bad.af"
    src.write_text(json.dumps(af))
    rc, out = run("import", "letta", str(src), "-o", str(tmp / "l.jsonl"))
    res["letta arguments not JSON"] = verdict(rc, out, rc == 2, out.strip().splitlines()[0][:90])
    db = tmp / "s.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE agent_messages (id INTEGER PRIMARY KEY, session_id TEXT, message_data TEXT, "
                "created_at TEXT)")
    con.execute("INSERT INTO agent_messages VALUES (1, NULL, ?, '2025-01-01 10:00:00')",
                (json.dumps({"role": "user", "content": "hi there"}),))
    con.commit()
    con.close()
    rc, out = run("import", "openai-agents", str(db), "-o", str(tmp / "a.jsonl"))
    res["agents session_id NULL"] = verdict(rc, out, rc == 2, out.strip().splitlines()[0][:90])
    g = json.loads((FIX / "graphiti_export.json").read_text())
    g["edges"][0].pop("fact")
    gsrc = tmp / "g.json"
    gsrc.write_text(json.dumps(g))
    rc, out = run("import", "graphiti", str(gsrc), "-o", str(tmp / "g.jsonl"))
    res["graphiti edge without fact"] = verdict(rc, out, "edges[0].fact" in out, out.strip().splitlines()[0][:90])
    # JSON escaping
    nasty = tmp / "nasty.jsonl"
    rows = [{"type": "turn", "conversation_id": "c", "turn_id": "t1", "order": 0, "speaker": "A",
             "text": "a\x9b2J \u202ecat\x7f"},
            {"type": "write", "write_id": "w", "conversation_id": "c", "text": "a cat", "citations": ["t1"],
             "last_seen_turn": "t1"}]
    nasty.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rc, out = run("views", str(nasty), "--format", "jsonl", "-o", str(tmp / "n.jsonl"))
    raw = (tmp / "n.jsonl").read_bytes() if (tmp / "n.jsonl").exists() else b""
    res["U+009B/U+202E/DEL in JSONL"] = verdict(rc, out, raw and not any(c.encode() in raw for c in "\x9b\u202e\x7f"),
                                                "escaped" if raw and b"\\u202e" in raw else "raw")
    return res


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        for k, v in probes(Path(d)).items():
            print(f"{k:32} {v}")


if __name__ == "__main__":
    main()
