"""The 0.2 module paths still import, as the very modules at their new paths, with a warning."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from derivaudit.moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_path_is_the_new_module_with_a_deprecation_warning(old):
    new = importlib.import_module(MOVED[old])
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} is now {MOVED[old]}"):
        mod = importlib.import_module(old)
    assert mod is new


def test_code_written_against_0_2_runs_unchanged():
    code = ("import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
            "try:\n    from derivaudit.gate import Client\nexcept DeprecationWarning as e:\n    print(e)\n"
            "warnings.simplefilter('ignore')\n"
            "from derivaudit.gate import Client, admit\nfrom derivaudit.report import parse_gate\n"
            "from derivaudit.admission import Client as New\nprint(Client is New, parse_gate('writes<3')[1])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["derivaudit.gate is now derivaudit.admission.gate; the old path goes in "
                                     "derivaudit 0.4", "True <"]


def test_the_new_names_import_without_a_warning():
    code = ("import warnings; warnings.simplefilter('error')\n"
            "import derivaudit\nfrom derivaudit.admission import Client, admit, View\n"
            "from derivaudit.report import parse_ci_gate\nprint('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
