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
