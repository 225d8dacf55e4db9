"""The lazy registry: a module is imported only when its name is chosen."""

import sys

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


def test_product_registries_resolve():
    from derivaudit.importers import IMPORTERS
    from derivaudit.models import BACKENDS
    from derivaudit.report import FORMATS
    from derivaudit.views import VIEWS

    assert {"transformers", "vllm", "openai"} <= set(BACKENDS)
    assert callable(IMPORTERS.get("locomo"))
    assert set(FORMATS) == {"json", "md", "csv", "junit", "html"} and all(callable(FORMATS[f]) for f in FORMATS)
    assert VIEWS.get("obligation").name == "obligation"


def test_a_backend_registered_with_traits_gets_its_options_help_and_chunking_without_being_imported(monkeypatch):
    """Adding a backend is one registry line: the options it takes, the --backend help and the
    scan's round-trip size follow from its traits, and its module is not imported for any of them."""
    from derivaudit.models import BACKENDS, BackendError, ModelSpec, backend_choices
    from derivaudit.scan import ScanConfig, chunk_size

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
