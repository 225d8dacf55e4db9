"""Gate mem0 writes with `derivaudit serve`: the app extracts candidate facts, asks the gate, and
stores only the admitted ones, verbatim, with `Memory.add(..., infer=False)` (mem0 stores the text
as given instead of running its own extraction again).

    derivaudit serve --from runs/my-audit --token-file gate.token &
    python examples/mem0_gate.py           # a demo with a stand-in store (mem0 not needed)

With mem0 installed (`pip install mem0ai`), pass `mem0.Memory()` as `store`. Every decision is in
the gate's log (gate-decisions.jsonl), which `derivaudit scan` audits like any memory log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from derivaudit.admission import Client

Extract = Callable[[Sequence[dict[str, Any]]], list[tuple[str, list[str]]]]


class GatedMemory:
    """A mem0 store whose writes pass the gate first.

    `extract(messages) -> [(fact, [cited turn ids])]` is the app's own fact extraction (its LLM,
    rules, or mem0's prompt run by the app); the gate judges each fact against the conversation."""

    def __init__(self, store: Any, gate: Client, extract: Extract) -> None:
        self.store, self.gate, self.extract = store, gate, extract
        self.seen: dict[str, int] = {}  # turns already sent to the gate, per conversation

    def add(self, messages: Sequence[dict[str, Any]], *, user_id: str, conversation_id: str) -> list[dict[str, Any]]:
        """Send the new turns, gate every extracted fact, store the admitted ones. Returns the verdicts."""
        start = self.seen.get(conversation_id, 0)
        turns = [{"turn_id": f"{conversation_id}:{i + 1}", "speaker": m.get("name") or m["role"], "text": m["content"]}
                 for i, m in enumerate(messages) if i >= start]
        if turns:
            self.gate.add_turns(conversation_id, turns)
            self.seen[conversation_id] = len(messages)
        verdicts = []
        for fact, cited in self.extract(messages):
            v = self.gate.admit({"conversation_id": conversation_id, "text": fact, "citations": cited})
            if v["admit"]:
                self.store.add(fact, user_id=user_id, infer=False,
                               metadata={"derivaudit_write_id": v["write_id"], "gate_score": v["score"]})
            verdicts.append(v)
        return verdicts


class ListStore:
    """A stand-in for mem0.Memory in the demo: the same add() signature, kept in a list."""

    def __init__(self) -> None:
        self.added: list[dict[str, Any]] = []

    def add(self, messages: Any, *, user_id: str, infer: bool = True, metadata: dict[str, Any] | None = None) -> dict:
        self.added.append({"memory": messages, "user_id": user_id, "infer": infer, "metadata": metadata})
        return {"results": [{"memory": messages, "event": "ADD"}]}


def main() -> None:
    import os

    gate = Client(os.environ.get("DERIVAUDIT_GATE", "http://127.0.0.1:8750"), token=os.environ.get("DERIVAUDIT_TOKEN"))
    chat = [{"role": "user", "name": "Alex", "content": "I accepted the job in Boston yesterday."},
            {"role": "assistant", "content": "Congratulations! When do you start?"},
            {"role": "user", "name": "Alex", "content": "On March 3. We move next month."}]
    facts = lambda _: [("Alex accepted a job in Boston.", ["demo:1"]),  # noqa: E731
                       ("Alex is moving to Seattle.", ["demo:3"])]
    store = ListStore()
    for v in GatedMemory(store, gate, facts).add(chat, user_id="alex", conversation_id="demo"):
        print(f"{v['decision']:>7}  score {v['score']}  {v['write_id']}")
    print(f"stored {len(store.added)} of 2 facts")


if __name__ == "__main__":
    main()
