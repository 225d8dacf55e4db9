"""Prompt text files, in the package (`derivaudit/prompts/`), like its data/ and schemas/.

Placeholders are `$name` (string.Template), so JSON examples with braces need no escaping.
A scored prompt whose answer is not yes/no names its answer words in a first line
`#! for: B | against: A C` (read by `verdict`, never sent to the model).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from string import Template

_HERE = Path(__file__).resolve().parent


def prompt_dir() -> Path:
    d = _HERE / "prompts"
    if not d.is_dir():
        raise FileNotFoundError(f"derivaudit's prompts folder {d} is missing from this installation")
    return d


@cache
def _read(name: str) -> tuple[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    path = prompt_dir() / f"{name}.txt"
    if not path.exists():
        raise FileNotFoundError(f"no prompt file {path.name} in {path.parent}")
    text = path.read_text("utf-8")
    if not text.startswith("#!"):
        return text, (("yes",), ("no",))
    head, _, body = text.partition("\n")
    sides = dict(part.strip().partition(":")[::2] for part in head[2:].split("|"))
    try:
        verdict = (tuple(sides["for"].split()), tuple(sides["against"].split()))
    except KeyError:
        raise ValueError(f"{path}: line 1 must read '#! for: WORDS | against: WORDS'") from None
    if not all(verdict):
        raise ValueError(f"{path}: line 1 names no answer word on one side")
    return body, verdict


def load(name: str) -> str:
    return _read(name)[0]


def verdict(name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The answer words the prompt's score is read from: (for, against)."""
    return _read(name)[1]


# Memory and turn text is untrusted: prompts quote it between these tags, and a value can never
# close one early (a "</record>" inside memory text is sent as "<\/record>").
_CLOSE = re.compile(r"<(/\s*(?:record|claim|earlier|later)\s*)>", re.IGNORECASE)


def quoted(value: str) -> str:
    return _CLOSE.sub(lambda m: "<\\" + m.group(1) + ">", value)


def line(value: str) -> str:
    """Untrusted text folded onto one line. The annotation prompts delimit a record or claim by its
    labeled line ("Record: ...", "Statement: ..."), so a value must not be able to add lines of its
    own (a forged "Claim:" or "Answer:" line). Tags were measured to cost label accuracy there."""
    return " ".join(value.split())


def render(name: str, **fields: str) -> str:
    return fill(load(name), **fields)


def fill(template: str, /, **fields: str) -> str:
    """A prompt text with its placeholders filled, every value quoted (`quoted`)."""
    return Template(template).substitute({k: quoted(v) if isinstance(v, str) else v for k, v in fields.items()})
