"""Random samples of writes that derivaudit draws itself, so that every estimate from them knows
each write's chance of being drawn: stratified, simple random within each stratum, seeded."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

DESIGN = "stratified by conversation, proportional allocation (at least one write each), simple random within"


class SampleError(ValueError):
    """A sample that cannot be drawn as asked (exit code 2)."""


def allocate(sizes: Mapping[Any, int], n: int, minimum: int = 1) -> dict[Any, int]:
    """`n` draws over strata of `sizes`, proportional to size by largest remainder, each stratum
    at least `minimum` (or all of it when smaller), never more than its size."""
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    floor = {k: min(minimum, s) for k, s in sizes.items()}
    if sum(floor.values()) > n:
        raise SampleError(f"a sample of {n} cannot hold {minimum} write(s) of each of the {len(sizes)} "
                          f"conversations: ask for at least {sum(floor.values())}")
    alloc = dict(floor)
    left = n - sum(alloc.values())
    room = {k: sizes[k] - alloc[k] for k in sizes}
    spare_total = sum(room.values())
    shares = {k: left * room[k] / spare_total if spare_total else 0 for k in sizes}
    for k in sizes:
        alloc[k] += int(shares[k])
    rest = n - sum(alloc.values())
    for k in sorted(sizes, key=lambda k: (-(shares[k] - int(shares[k])), str(k)))[:rest]:
        alloc[k] += 1
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
