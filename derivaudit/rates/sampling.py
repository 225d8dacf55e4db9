"""Random samples of writes that derivaudit draws itself, so that every estimate from them knows
each write's chance of being drawn: stratified, simple random within each stratum, seeded."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

DESIGN = "stratified by conversation, proportional allocation (at least one write each), simple random within"


class SampleError(ValueError):
    """A sample that cannot be drawn as asked (exit code 2)."""


def allocate(sizes: Mapping[Any, int], n: int, minimum: int = 1, weight: Mapping[Any, float] | None = None
             ) -> dict[Any, int]:
    """`n` draws over strata of `sizes`: each stratum at least `minimum` (or all of it when
    smaller), never more than its size, the rest by largest remainder in proportion to `weight`
    (default: the room each stratum has left), a stratum that fills up giving its share to the others."""
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    alloc = {k: min(minimum, s) for k, s in sizes.items()}
    if sum(alloc.values()) > n:
        raise SampleError(f"a sample of {n} cannot hold {minimum} write(s) of each of the {len(sizes)} "
                          f"conversations: ask for at least {sum(alloc.values())}")
    left = n - sum(alloc.values())
    while left > 0:
        room = {k: sizes[k] - alloc[k] for k in sizes if sizes[k] > alloc[k]}
        basis = {k: (weight[k] if weight is not None else room[k]) for k in room}
        scale = sum(basis.values())
        shares = {k: left * basis[k] / scale if scale else left / len(room) for k in room}
        step = {k: min(room[k], int(shares[k])) for k in room}
        rest = left - sum(step.values())
        for k in sorted(room, key=lambda k: (-(shares[k] - int(shares[k])), str(k))):
            if rest and step[k] < room[k]:
                step[k] += 1
                rest -= 1
        for k, d in step.items():
            alloc[k] += d
        left = n - sum(alloc.values())
    return alloc


def stratified(items: Sequence[tuple[str, Any]], n: int, seed: int = 0, minimum: int = 1) -> list[str]:
    """Ids of a stratified simple random sample of `n` of `items` ((id, stratum) pairs), in the
    items' order. The same items, n and seed always give the same sample."""
    if n < 1:
        raise SampleError(f"a sample needs at least one write, not {n}")
    by: dict[Any, list[str]] = {}
    for i, h in items:
        by.setdefault(h, []).append(i)
    alloc = allocate({h: len(v) for h, v in by.items()}, n, minimum)
    chosen: set[str] = set()
    for h in sorted(by, key=str):
        chosen.update(random.Random(f"{seed}|{h}").sample(by[h], alloc[h]))
    return [i for i, _ in items if i in chosen]
