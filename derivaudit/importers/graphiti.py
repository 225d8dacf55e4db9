"""Graphiti / Zep knowledge-graph export: entity edges become writes, episodes become turns.

Accepted input: {"episodes": [EpisodicNode...], "edges": [EntityEdge...]} as graphiti_core's
models serialise (`model_dump(mode="json")`). Episode: `uuid`, `group_id`, `content`,
`valid_at` (the reference time), `created_at`, optional `name`/`source_description`. Edge:
`uuid`, `group_id`, `fact`, `episodes` (uuids of the episodes it was extracted from or
confirmed by), `created_at`, `valid_at`, `invalid_at`, `expired_at`, `name`.

Mapping: conversation = `group_id`; episodes in time order (valid_at, then created_at, as instants) are the
turns; a message episode "speaker: text" keeps its speaker. Each edge is a write whose citations
are its episodes and whose write point is the latest of them (the edge as stored was last
confirmed there). `valid` is false once the edge is expired or invalidated. An invalidated edge's
successor (the edge whose valid_at is its invalid_at; see `_supersessions`) becomes a correction:
`supersedes` names the old edge and `verified_correction` is true (Graphiti's own invalidation is
taken as authoritative), which the echo audit reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..log.records import Problem
from .common import ORIGIN, ImportResult, read_json
from .common import instant as _instant


def _time_problems(f: str, where: str, obj: dict[str, Any], fields: tuple[str, ...]) -> list[Problem]:
    """Times Graphiti writes as ISO 8601 text: one that is not (a number, "not a date", February 30)
    is an error at its place, never an episode or edge moved to the end."""
    out = []
    for k in fields:
        v = obj.get(k)
        if v is not None and (not isinstance(v, str) or _instant(v) is None):
            out.append(Problem(f, None, f"{where}.{k}", "wrong_type" if not isinstance(v, str) else "bad_value",
                               f"{k} is {v!r:.40}; Graphiti writes an ISO 8601 time"))
    return out


def _speaker(ep: dict[str, Any]) -> tuple[str, str]:
    text = str(ep.get("content") or "").strip()
    head, sep, rest = text.partition(":")
    if ep.get("source") == "message" and sep and 0 < len(head) <= 40 and "\n" not in head:
        return head.strip(), rest.strip()
    return str(ep.get("source_description") or ep.get("name") or "episode"), text


def _when(ep: dict[str, Any], i: int) -> tuple:
    """Episode order: reference time, then creation time, as instants (Graphiti keeps the offset the
    caller gave, so 09:30+01:00 comes before 09:00Z); an episode with no readable time goes last."""
    v, c = _instant(ep.get("valid_at")), _instant(ep.get("created_at"))
    return (v is None, v or 0.0, c is None, c or 0.0, i)


def _episodes(f: str, episodes: list[Any], res: ImportResult) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    """The episodes as turns, per group in time order; (episode by uuid, its order in its group)."""
    eps: dict[str, dict[str, Any]] = {}
    for i, ep in enumerate(episodes):
        where = f"episodes[{i}]"
        if not isinstance(ep, dict) or not isinstance(ep.get("uuid"), str):
            res.problems.append(Problem(f, None, f"{where}.uuid", "missing_field", "episode needs a uuid"))
            continue
        if ep["uuid"] in eps:
            res.problems.append(Problem(f, None, f"{where}.uuid", "duplicate_turn_id",
                                        f"episode {ep['uuid']!r} listed twice"))
            continue
        if bad := _time_problems(f, where, ep, ("valid_at", "created_at")):
            res.problems.extend(bad)
            continue
        if ep.get("valid_at") is None and ep.get("created_at") is None:
            res.problems.append(Problem(f, None, f"{where}.valid_at", "missing_field", "an episode needs valid_at "
                                        "or created_at: its place in the conversation"))
            continue
        if ep.get("content") is not None and not isinstance(ep["content"], str):
            res.problems.append(Problem(f, None, f"{where}.content", "wrong_type", "content is text"))
            continue
        speaker, text = _speaker(ep)
        if not text:
            res.problems.append(Problem(f, None, f"{where}.content", "empty_text", "episode has no content"))
            continue
        eps[ep["uuid"]] = {"conv": str(ep.get("group_id") or "default"),
                           "time": ep.get("valid_at") or ep.get("created_at"),
                           "sort": _when(ep, i),
                           "speaker": speaker, "text": text, "where": where}
    pos: dict[str, int] = {}
    counters: dict[str, int] = {}
    for uid, ep in sorted(eps.items(), key=lambda kv: kv[1]["sort"]):
        n = counters.get(ep["conv"], 0)
        counters[ep["conv"]] = n + 1
        pos[uid] = n
        res.turns.append({"type": "turn", "conversation_id": ep["conv"], "turn_id": uid, "order": n,
                          "speaker": ep["speaker"], "text": ep["text"], "time": ep["time"], ORIGIN: ep["where"]})
    return eps, pos


def _edge(f: str, i: int, e: Any, eps: dict[str, dict[str, Any]], pos: dict[str, int], res: ImportResult) -> None:
    """One edge as a write citing the episodes it came from, made at the latest of them."""
    where = f"edges[{i}]"
    if not isinstance(e, dict) or not isinstance(e.get("uuid"), str):
        res.problems.append(Problem(f, None, f"{where}.uuid", "missing_field", "edge needs a uuid"))
        return
    if bad := _time_problems(f, where, e, ("valid_at", "invalid_at", "expired_at", "created_at")):
        res.problems.extend(bad)
        return
    cites = e.get("episodes")
    if not isinstance(cites, list) or not cites:
        res.problems.append(Problem(f, None, f"{where}.episodes", "missing_field",
                                    "edge lists no episodes, so it cannot be placed in history"))
        return
    if not all(isinstance(c, str) for c in cites):
        res.problems.append(Problem(f, None, f"{where}.episodes", "bad_id", "episode ids must be strings"))
        return
    unknown = [c for c in cites if c not in pos]
    if unknown:
        res.problems.append(Problem(f, None, f"{where}.episodes", "unknown_citation",
                                    f"episode(s) {unknown} are not in the export"))
        return
    conv = str(e.get("group_id") or "default")
    other = [c for c in cites if eps[c]["conv"] != conv]
    if other:
        res.problems.append(Problem(f, None, f"{where}.episodes", "unknown_citation",
                                    f"episode(s) {other} belong to another group than {conv!r}"))
        return
    fact = e.get("fact")
    if not isinstance(fact, str) or not fact.strip():
        res.problems.append(Problem(f, None, f"{where}.fact", "missing_field" if fact is None else "empty_text",
                                    "edge has no fact text: it is the memory derivaudit audits"))
        return
    cites = list(dict.fromkeys(cites))
    res.writes.append({
        "type": "write", "write_id": e["uuid"], "conversation_id": conv, "text": fact.strip(),
        "citations": cites, "last_seen_turn": max(cites, key=lambda c: pos[c]),
        "time": e.get("created_at"), "operation": "add",
        "valid": not (e.get("expired_at") or e.get("invalid_at")),
        "meta": {k: e.get(k) for k in ("name", "valid_at", "invalid_at", "expired_at")
                 if e.get(k) is not None}, ORIGIN: where,
    })


def convert(path: str | Path) -> ImportResult:
    f = str(path)
    data = read_json(path)
    res = ImportResult()
    if not (isinstance(data, dict) and isinstance(data.get("episodes"), list)
            and isinstance(data.get("edges"), list)):
        res.problems.append(Problem(f, None, None, "bad_format",
                                    'expected {"episodes": [...], "edges": [...]}'))
        return res
    eps, pos = _episodes(f, data["episodes"], res)
    for i, e in enumerate(data["edges"]):
        _edge(f, i, e, eps, pos, res)
    links, unlinked = _supersessions([e for e in data["edges"] if isinstance(e, dict)],
                                     {w["write_id"] for w in res.writes})
    for w in res.writes:
        old = links.get(w["write_id"])
        if old:
            w["supersedes"] = old
            w["verified_correction"] = True
    _invalidations(res, data["edges"], links, eps, pos)
    res.notes = {"episodes": len(data["episodes"]), "edges": len(data["edges"]),
                 "supersessions": sum(len(v) for v in links.values()), "invalidations": len(res.operations)}
    if unlinked:
        res.notes["invalidated_without_successor"] = unlinked
    return res


def _invalidations(res: ImportResult, edges: list[Any], links: dict[str, list[str]], eps: dict[str, dict[str, Any]],
                   pos: dict[str, int]) -> None:
    """Every imported edge Graphiti invalidated or expired becomes an invalidate operation.
    With a successor (see `_supersessions`) it happened while that edge's episode was ingested
    (resolve_edge_contradictions runs inside add_episode): the operation point is the successor's
    write point and its origin "conversation". Without one, the point is the last episode of the
    group created at or before the edge's `expired_at` (else its write point) and the origin
    "unknown": the export does not say what invalidated it."""
    writes = {w["write_id"]: w for w in res.writes}
    successor_of = {old: new for new, olds in links.items() for old in olds}
    for e in edges:
        if not isinstance(e, dict) or e.get("uuid") not in writes or not (e.get("invalid_at") or e.get("expired_at")):
            continue
        w = writes[e["uuid"]]
        succ = successor_of.get(w["write_id"])
        if succ is not None:
            point, origin = writes[succ]["last_seen_turn"], "conversation"
        else:
            end = _instant(e.get("expired_at") or e.get("invalid_at"))
            group = [u for u, ep in eps.items() if ep["conv"] == w["conversation_id"] and u in pos
                     and end is not None and (t := _instant(ep["time"])) is not None and t <= end]
            point = max(group, key=lambda u: pos[u], default=w["last_seen_turn"])
            if pos[point] < pos[w["last_seen_turn"]]:
                point = w["last_seen_turn"]
            origin = "unknown"
        res.operations.append({
            "type": "operation", "operation_id": f"invalidate:{w['write_id']}", "conversation_id": w["conversation_id"],
            "kind": "invalidate", "target": w["write_id"], "last_seen_turn": point,
            "time": e.get("expired_at") or e.get("invalid_at"), "successor": succ, "origin": origin,
            "meta": {k: e.get(k) for k in ("invalid_at", "expired_at") if e.get(k) is not None}})


def _supersessions(edges: list[dict[str, Any]], kept: set[str]) -> tuple[dict[str, list[str]], int]:
    """Graphiti invalidates an edge by setting its `invalid_at` to the `valid_at` of the new edge that
    contradicts it (edge_operations.resolve_edge_contradictions) and `expired_at` to the time it did
    so; the pair is not recorded. Every edge extracted from one episode usually starts at that
    episode's time, so several edges may start at the instant an edge ended. The successor is the
    one that conflicts with it on the same slot: the same relation (`name`) from the same source
    node, else sharing a node; a tie at the best rank is not guessed (counted as no successor).
    Returns successor uuid -> uuids it supersedes, and how many invalidated edges have none."""
    by_start: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for e in edges:
        t = _instant(e.get("valid_at"))
        if t is not None and e.get("uuid") in kept:
            by_start.setdefault((str(e.get("group_id") or "default"), t), []).append(e)
    links: dict[str, list[str]] = {}
    unlinked = 0
    for e in edges:
        end = _instant(e.get("invalid_at"))
        if end is None or e.get("uuid") not in kept:
            continue
        nodes = {e.get("source_node_uuid"), e.get("target_node_uuid")} - {None}

        def rank(c: dict[str, Any], e: dict[str, Any] = e, nodes: set = nodes) -> int:
            if c.get("name") and c.get("name") == e.get("name") and c.get("source_node_uuid") == e.get(
                    "source_node_uuid"):
                return 0
            return 1 if nodes & {c.get("source_node_uuid"), c.get("target_node_uuid")} else 2

        cands = sorted((rank(c), i, c) for i, c in enumerate(by_start.get(
            (str(e.get("group_id") or "default"), end), [])) if c is not e)
        if not cands or cands[0][0] == 2 or (len(cands) > 1 and cands[1][0] == cands[0][0]):
            unlinked += 1
            continue
        links.setdefault(cands[0][2]["uuid"], []).append(e["uuid"])
    return links, unlinked
