"""The lazy registry: a module is imported only when its name is chosen."""

import sys
from pathlib import Path

import pytest

from derivaudit.registry import Registry


def test_entries_import_only_when_chosen(tmp_path, monkeypatch):
    (tmp_path / "da_lazy_probe.py").write_text("VALUE = 42\nclass Thing:\n    inner = 'x'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = Registry("thing", {"probe": "da_lazy_probe:VALUE", "nested": "da_lazy_probe:Thing.inner"})
    assert "probe" in reg and list(reg) == ["probe", "nested"] and len(reg) == 2
    assert "da_lazy_probe" not in sys.modules
    assert reg.get("probe") == 42
    assert "da_lazy_probe" in sys.modules
    assert reg["nested"] == "x"
    sys.modules.pop("da_lazy_probe")


def test_unknown_names_list_the_known_ones_and_objects_register():
    reg = Registry("view")
    obj = object()
    assert reg.register("mine", obj) is obj
    assert reg.get("mine") is obj
    with pytest.raises(KeyError, match=r"unknown view 'other' \(known: mine\)"):
        reg.get("other")
    with pytest.raises(KeyError, match=r"unknown view 'mien' \(known: mine\); did you mean 'mine'\?"):
        reg.get("mien")
    assert reg.get("other", None) is None  # a default of None is returned, not taken for "no default"


def test_a_name_is_registered_once_and_entries_are_checked_when_loaded(tmp_path, monkeypatch):
    from derivaudit.registry import RegistryError

    reg = Registry("format", {"json": len}, check=lambda obj: None if callable(obj) else "not a function")
    with pytest.raises(RegistryError, match="format 'json' is already registered; pass replace=True"):
        reg.register("json", print)
    reg.register("json", print, replace=True)
    assert reg.get("json") is print
    (tmp_path / "da_wrong_kind.py").write_text("NOT_A_FUNCTION = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg.register("bad", "da_wrong_kind:NOT_A_FUNCTION")
    reg.register("gone", "da_wrong_kind:MISSING")
    with pytest.raises(RegistryError, match="format 'bad' -> da_wrong_kind:NOT_A_FUNCTION: not a function"):
        reg.get("bad")
    with pytest.raises(RegistryError, match="format 'gone' -> da_wrong_kind:MISSING: cannot be loaded"):
        reg.get("gone")
    sys.modules.pop("da_wrong_kind")


def test_product_registries_resolve():
    from derivaudit.admission.views import VIEWS
    from derivaudit.importers import IMPORTERS
    from derivaudit.models import BACKENDS
    from derivaudit.report import FORMATS

    assert {"transformers", "vllm", "openai"} <= set(BACKENDS)
    assert callable(IMPORTERS.get("locomo"))
    assert set(FORMATS) == {"json", "md", "csv", "junit", "html"} and all(callable(FORMATS[f]) for f in FORMATS)
    assert VIEWS.get("obligation").name == "obligation"


def test_a_backend_registered_with_traits_gets_its_options_help_and_chunking_without_being_imported(monkeypatch):
    """Adding a backend is one registry line: the options it takes, the --backend help and the
    scan's round-trip size follow from its traits, and its module is not imported for any of them."""
    from derivaudit.audit.scan import ScanConfig, chunk_size
    from derivaudit.models import BACKENDS, BackendError, ModelSpec, backend_choices

    monkeypatch.setitem(BACKENDS._entries, "mine", "da_never_imported:Backend")
    monkeypatch.setitem(BACKENDS._traits, "mine", {"threads": True, "serial": True, "about": "my engine"})
    assert "mine (my engine)" in backend_choices()
    assert ModelSpec("mine", "m", threads=2).options() == {"n_threads": 2}
    with pytest.raises(BackendError, match="--dtype is for the transformers and vllm backends, not mine"):
        ModelSpec("mine", "m", dtype="float32")
    with pytest.raises(BackendError, match="--threads is for the transformers, llamacpp and mine backends, not openai"):
        ModelSpec("openai", "m", threads=1)

    class Fake:
        def __init__(self, name):
            self.backend = type("B", (), {"name": name})()

    cfg = ScanConfig(files=["x"])
    assert chunk_size(cfg, [Fake("mine")] * 3) == 1
    assert chunk_size(cfg, [Fake("mine"), Fake("openai"), Fake("mine")]) == 8
    assert "da_never_imported" not in sys.modules


PLUGIN = """
from derivaudit.importers import ImportResult
from derivaudit.models.base import Backend, Score, Usage
from derivaudit.admission import View


class ConstantBackend(Backend):
    \"\"\"Answers every yes/no question with the same log-odds (the model name, as a number).\"\"\"

    name = "constant"

    def __init__(self, model, **options):
        super().__init__()
        self.model = model

    def identity(self):
        return {"backend": self.name, "model": self.model}

    def score(self, prompts, k=20):
        self.seen = [p.task for p in prompts]
        return [Score(float(self.model), 0.0, -float(self.model)) for _ in prompts]

    def generate(self, prompts, max_new_tokens=256, json_schema=None, stop=()):
        return ["" for _ in prompts]


def tsv_bytes(report, gates):
    rows = [("metric", "value")] + [(k, "" if v is None else str(v)) for k, v in report["metrics"].items()]
    return "".join("\\t".join(r) + "\\n" for r in rows).encode()


def convert(path):
    \"\"\"`speaker|text` lines become turns; `> text` lines memory writes citing the turn before.\"\"\"
    res = ImportResult()
    for i, line in enumerate(open(path, encoding="utf-8").read().splitlines(), start=1):
        if line.startswith("> "):
            res.writes.append({"type": "write", "write_id": f"w{i}", "conversation_id": "c", "text": line[2:],
                               "citations": [f"t{i - 1}"], "last_seen_turn": f"t{i - 1}"})
        else:
            speaker, _, text = line.partition("|")
            res.turns.append({"type": "turn", "conversation_id": "c", "turn_id": f"t{i}", "order": i,
                              "speaker": speaker, "text": text})
    return res


SHORT = View("short", "one short question", template="Is the record true? Answer with one word, yes or no.")
"""

ENTRY_POINTS = """[derivaudit.backends]
constant = da_demo_plugin:ConstantBackend

[derivaudit.formats]
tsv = da_demo_plugin:tsv_bytes

[derivaudit.importers]
pipes = da_demo_plugin:convert

[derivaudit.views]
short = da_demo_plugin:SHORT
holistic = da_demo_plugin:SHORT
"""


def test_a_plugin_package_adds_a_backend_a_view_an_importer_and_a_format(tmp_path, synth_run):
    """A tiny installed package (its module and its .dist-info with entry points, as pip lays them
    out) extends derivaudit with no edit to it: each addition is one object plus one entry point,
    used from the command line. One that reuses a built-in name is skipped with a warning."""
    import json
    import os
    import subprocess

    site = tmp_path / "site"
    (site / "da_demo_plugin-0.1.dist-info").mkdir(parents=True)
    (site / "da_demo_plugin.py").write_text(PLUGIN)
    (site / "da_demo_plugin-0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: da-demo-plugin\nVersion: 0.1\n")
    (site / "da_demo_plugin-0.1.dist-info" / "entry_points.txt").write_text(ENTRY_POINTS)
    root = Path(__file__).resolve().parent.parent  # this checkout's derivaudit, whatever is installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(root),
                                                        *filter(None, [os.environ.get("PYTHONPATH")])])}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "derivaudit", *map(str, args)], env=env, cwd=tmp_path,
                              capture_output=True, text=True)

    (tmp_path / "chat.txt").write_text("Ann|I moved to Oslo in May.\n> Ann lives in Oslo.\n")
    r = cli("import", "pipes", "chat.txt", "-o", "log.jsonl")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [x["type"] for x in rows] == ["header", "turn", "write"] and rows[2]["text"] == "Ann lives in Oslo."

    (tmp_path / "p.txt").write_text("I moved to Oslo in May.\n")
    r = cli("check", "--record", "Ann lives in Oslo.", "--evidence", "p.txt", "--backend", "constant",
            "--model", "2.5", "--view", "short", "--no-cache", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["logodds"] == 2.5 and doc["decision"] in (True, "admit")
    assert "reuses a built-in view name; skipped" in r.stderr  # the plugin's 'holistic'

    r = cli("report", synth_run, "--format", "tsv")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("metric\tvalue\n") and "\nwrites\t40" in r.stdout
    r = cli("overlap", "log.jsonl", "--format", "tsv")  # a run-report format is not a read-path one
    assert r.returncode == 2 and "tsv" in r.stderr
    r = cli("check", "--record", "x", "--evidence", "p.txt", "--backend", "constnt", "--no-cache")
    assert r.returncode == 2 and "did you mean 'constant'" in r.stderr
