"""The self-contained HTML report: no network, untrusted text only inside the packed data."""

import base64
import gzip
import re
import shutil

import orjson

from derivaudit import report
from derivaudit.report.html import drilldown_data, pack
from derivaudit.runs import folder as runs

HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


def _hostile_copy(src, dst):
    shutil.copytree(src, dst)
    labels = runs.read_rows(dst, runs.LABELS)
    labels[0]["text"] = HOSTILE
    runs.write_rows(dst, runs.LABELS, labels)
    views = runs.read_rows(dst, runs.VIEWS)
    views[0]["expanded"][0]["text"] = HOSTILE
    runs.write_rows(dst, runs.VIEWS, views)
    return dst


def test_page_has_csp_plots_and_no_raw_memory_text(synth_run, tmp_path):
    run = _hostile_copy(synth_run, tmp_path / "run")
    doc = report.build(run)
    html = report.render(doc, "html").decode()
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert html.count("<svg") >= 3  # distributions, ROC, per-conversation
    assert "alert(1)" not in html and "alert(2)" not in html and "onerror" not in html
    assert not re.findall(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)  # nothing is fetched


def test_packed_drilldown_round_trips_and_keeps_text_literal(synth_run, tmp_path):
    run = _hostile_copy(synth_run, tmp_path / "run")
    data = drilldown_data(run)
    assert orjson.loads(gzip.decompress(base64.b64decode(pack(data)))) == orjson.loads(orjson.dumps(data))
    first = data["writes"][0]
    assert first["t"] == HOSTILE
    labels = runs.read_rows(run, runs.LABELS)
    assert len(data["writes"]) == len(labels)
    assert set(data["settings"]) == {r["setting"] for r in runs.read_rows(run, runs.REPLAY_SCORES)}
    turns = data["turns"][first["c"]]
    assert any(t[2] == HOSTILE for t in turns.values())
