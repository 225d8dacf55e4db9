"""LoCoMo (snap-research/LoCoMo `locomo10.json`): observations become memory writes.

Each `session_N_observation` record [text, evidence] is a write made at the end of session N:
its write point is the last turn of session N (pre-write history = sessions 1..N) and its
evidence dia_ids are its citations (one id, a list, or a comma-separated string). A turn that
shared an image carries its caption in the text as "[shares image: ...]", since writers saw it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..log.records import Problem
from .common import ImportResult, read_json

_SESSION = re.compile(r"session_(\d+)")
_OBS = re.compile(r"session_(\d+)_observation")
_DIA = re.compile(r"D\d+:\d+")


def _ids(ev: Any) -> list[str] | None:
    if isinstance(ev, str):
        return [x.strip() for x in ev.split(",")]
    if isinstance(ev, list) and all(isinstance(x, str) for x in ev):
        return [x.strip() for x in ev]
    return None


class _Sample:
    """One LoCoMo sample: its sessions' turns in order, then each session's observations as writes
    made at the session's last turn."""

    def __init__(self, f: str, res: ImportResult, where: str, cid: str) -> None:
        self.f, self.res, self.where, self.cid = f, res, where, cid
        self.session_of: dict[str, int] = {}
        self.last_turn: dict[int, str] = {}
        self.last_time: dict[int, str | None] = {}
        self.order = 0

    def problem(self, where: str, code: str, message: str) -> None:
        self.res.problems.append(Problem(self.f, None, where, code, message))

    def turns(self, conv: dict[str, Any]) -> None:
        sessions = sorted((int(m.group(1)), k) for k in conv if (m := _SESSION.fullmatch(k)))
        for n, key in sessions:
            when = conv.get(f"session_{n}_date_time")
            when = when if isinstance(when, str) else None
            if not isinstance(conv[key], list):
                self.problem(f"{self.where}.conversation.{key}", "bad_format", "expected a list of turns")
                continue
            for ti, t in enumerate(conv[key]):
                self.turn(f"{self.where}.conversation.{key}[{ti}]", t, n, when)

    def turn(self, tw: str, t: Any, n: int, when: str | None) -> None:
        dia = t.get("dia_id") if isinstance(t, dict) else None
        if not isinstance(dia, str) or not _DIA.fullmatch(dia):
            return self.problem(f"{tw}.dia_id", "bad_id", f"malformed turn id {dia!r}")
        text = str(t.get("text") or "").strip()
        if t.get("blip_caption"):
            text = f"{text} [shares image: {t['blip_caption']}]".strip()
        if not text:
            return self.problem(f"{tw}.text", "empty_text", "turn has no text")
        self.res.turns.append({
            "type": "turn", "conversation_id": self.cid, "turn_id": dia, "order": self.order,
            "speaker": str(t.get("speaker", "")), "text": text, "time": when, "session": str(n),
        })
        self.session_of[dia] = n
        self.last_turn[n] = dia
        self.last_time[n] = when
        self.order += 1

    def observations(self, obs: Any) -> None:
        if not isinstance(obs, dict):
            self.problem(f"{self.where}.observation", "bad_format",
                         "expected an object of session_N_observation entries")
            obs = {}
        for key in sorted(obs, key=lambda k: int(m.group(1)) if (m := _OBS.fullmatch(k)) else -1):
            m = _OBS.fullmatch(key)
            if m is None:
                self.problem(f"{self.where}.observation.{key}", "bad_format", "unexpected observation key")
                continue
            n = int(m.group(1))
            k = 0
            per_speaker = obs[key] or {}
            if not isinstance(per_speaker, dict) or not all(isinstance(r, list) for r in per_speaker.values()):
                self.problem(f"{self.where}.observation.{key}", "bad_format",
                             "expected {speaker: [[text, evidence], ...]}")
                continue
            for speaker, recs in per_speaker.items():
                for ri, rec in enumerate(recs):
                    k += 1
                    self.write(f"{self.where}.observation.{key}.{speaker}[{ri}]", f"{self.cid}:s{n}:o{k}", rec, n,
                               speaker)

    def write(self, rw: str, wid: str, rec: Any, n: int, speaker: str) -> None:
        if not (isinstance(rec, list) and len(rec) == 2 and isinstance(rec[0], str)):
            return self.problem(rw, "bad_format", "expected [text, evidence]")
        ids = _ids(rec[1])
        if ids is None:
            return self.problem(f"{rw}[1]", "bad_id", f"evidence {rec[1]!r} is neither an id, a list of ids "
                                "nor a comma-separated string")
        badids = [x for x in ids if not _DIA.fullmatch(x) or x not in self.session_of]
        if badids:
            return self.problem(f"{rw}[1]", "bad_id", f"evidence id(s) {badids} malformed or not a turn of {self.cid}")
        if n not in self.last_turn:
            return self.problem(rw, "bad_format", f"observation of session {n}, which has no turns")
        self.res.writes.append({
            "type": "write", "write_id": wid, "conversation_id": self.cid, "text": rec[0].strip(),
            "citations": list(dict.fromkeys(ids)), "last_seen_turn": self.last_turn[n],
            "time": self.last_time.get(n), "operation": "add", "round": 0,
            "meta": {"subject": speaker, "session": n},
        })


def convert(path: str | Path) -> ImportResult:
    f = str(path)
    data = read_json(path)
    res = ImportResult()
    if not isinstance(data, list):
        res.problems.append(Problem(f, None, None, "bad_format", "expected a JSON list of LoCoMo samples"))
        return res
    for si, sample in enumerate(data):
        where = f"[{si}]"
        if not isinstance(sample, dict) or "conversation" not in sample or "sample_id" not in sample:
            res.problems.append(Problem(f, None, where, "bad_format",
                                        "not a LoCoMo sample (needs sample_id and conversation)"))
            continue
        if not isinstance(sample["conversation"], dict):
            res.problems.append(Problem(f, None, f"{where}.conversation", "bad_format", "expected an object of "
                                        "session_N lists"))
            continue
        one = _Sample(f, res, where, str(sample["sample_id"]))
        one.turns(sample["conversation"])
        one.observations(sample.get("observation") or {})
    res.notes = {"samples": len(data)}
    return res
