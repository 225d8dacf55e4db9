"""The examples run against the real service (the rule backend as judge; mem0 is not installed:
its stand-in has mem0's add() signature)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("uvicorn")

from derivaudit import load_log  # noqa: E402
from derivaudit.admission import Client  # noqa: E402
from derivaudit.admission.serve import open_gate  # noqa: E402

from .gate_server import RecordRule, point, served  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def example(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_mem0_stores_only_what_the_gate_admits_and_the_log_holds_every_decision(tmp_path):
    mem0_gate = example("mem0_gate")
    chat = [{"role": "user", "name": "Alex", "content": "I accepted the job in Boston yesterday."},
            {"role": "assistant", "content": "Congratulations! When do you start?"},
            {"role": "user", "name": "Alex", "content": "On March 3. We move next month."}]
    facts = [("Alex accepted the job in Boston.", ["demo:1"]), ("Alex is moving to Seattle.", ["demo:3"])]
    gate = open_gate(point(), RecordRule(), tmp_path / "decisions.jsonl")
    store = mem0_gate.ListStore()
    with served(gate) as url:
        gated = mem0_gate.GatedMemory(store, Client(url), lambda _: facts)
        verdicts = gated.add(chat, user_id="alex", conversation_id="demo")
        # the next exchange sends only the new turn
        chat.append({"role": "user", "name": "Alex", "content": "Sam found us a flat near Fenway."})
        more = mem0_gate.GatedMemory.add(gated, chat, user_id="alex", conversation_id="demo")
    assert [v["decision"] for v in verdicts] == ["admit", "reject"]  # Seattle is in no turn
    assert [a["memory"] for a in store.added] == ["Alex accepted the job in Boston."] * 2  # once per exchange
    assert all(a["infer"] is False and a["user_id"] == "alex" for a in store.added)
    assert store.added[0]["metadata"]["derivaudit_write_id"] == verdicts[0]["write_id"]
    logged = load_log(tmp_path / "decisions.jsonl")
    assert len(logged.conversations["demo"].turns) == 4 and len(logged.writes) == len(verdicts) + len(more)
