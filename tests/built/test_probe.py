"""The downstream probe: option-order averaging, the control gate, costs, bad probe files; a rule
reader that answers from word overlap with its memories makes the right answers known."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from derivaudit.built.probe import ProbeError, load_probes, run
from derivaudit.cli import app
from derivaudit.models.base import Score, Usage

runner = CliRunner()


class KnowingReader:
    """Answers from its memories as a perfect reader would: the probe's correct option when the
    correct memory is there, the distortion's when the distorted one is; with no memory to go on,
    the first option shown (a position bias that option-order averaging must cancel)."""

    name = "knowing"

    def __init__(self, items):
        self.items, self.usage, self.seen = items, Usage(), []

    def identity(self):
        return {"backend": self.name, "model": "knowing"}

    def score(self, prompts, k=100):
        out = []
        for p in prompts:
            self.seen.append(p)
            question = re.search(r"^Question: (.*)$", p.task, flags=re.M).group(1)
            item, q = next((it, q) for it in self.items for q in it["queries"] if q["question"] == question)
            opts = dict(re.findall(r"^([A-D])\. (.*)$", p.task, flags=re.M))
            if item["slot"]["correct"] in p.shared:
                want = q["options"][q["correct"]]
            elif item["slot"]["distorted"] in p.shared:
                want = q["options"][q.get("distorted", q["correct"])]
            else:
                want = opts["A"]
            out.append(Score(5.0 if opts[p.verdict[0][0]] == want else -5.0))
        return out


def test_the_probe_reads_costs_through_all_option_orders(fixtures):
    be = KnowingReader(load_probes(fixtures / "probe.jsonl"))
    rep = run(fixtures / "probe.jsonl", be, runs=1, reps=200)
    assert rep["items"] == 12 and rep["read"] and not rep["failed_controls"]
    rates = rep["failure_rates"]
    assert rates["changed/correct"]["failure"] == 0 and rates["changed/distorted"]["failure"] == 1
    assert rates["only/correct"]["failure"] == 0 and rates["only/empty"]["failure"] == 1  # ties: no answer
    assert rep["costs"]["admitting a distorted memory"]["difference"] == 1
    # every order of every query's options was shown (3 options: 6 orders x 3 letters x 3 slots)
    shown = {(p.shared, p.task) for p in be.seen}
    assert len(be.seen) == 12 * 2 * 3 * 6 * 3 and len(shown) == 12 * 2 * 3 * 6
    empty_rows = [r for r in rep["rows"] if r["condition"] == "empty"]
    assert all(r["choice"] is None for r in empty_rows if r["kind"] == "only")


def test_a_reader_that_ignores_its_memory_fails_the_controls(fixtures):
    class Ignorer(KnowingReader):
        def score(self, prompts, k=100):
            return [Score(5.0 if p.verdict[0][0] == "A" else -5.0) for p in prompts]  # always the first option

    rep = run(fixtures / "probe.jsonl", Ignorer([]), runs=1, reps=200)
    assert not rep["read"] and "a distorted slot moves the changed answer" in rep["failed_controls"]
    assert "correct-slot answer stable across option orders" in rep["failed_controls"]


def test_bad_probe_files_name_line_and_field(fixtures, tmp_path):
    good = json.loads((fixtures / "probe.jsonl").read_text().splitlines()[0])
    bad = [dict(good, probe_id="b1", slot={"correct": "x"}),
           dict(good, probe_id="b2", queries=good["queries"][:1]),
           dict(good, probe_id="b3", queries=[dict(good["queries"][0], distorted=0), good["queries"][1]]),
           dict(good, probe_id="b4", queries=[good["queries"][0], dict(good["queries"][1], correct=7)])]
    p = tmp_path / "p.jsonl"
    p.write_text("\n".join(map(json.dumps, [good, *bad])) + "\n")
    with pytest.raises(ProbeError) as e:
        load_probes(p)
    text = str(e.value)
    for want in ("p.jsonl:2: slot", "p.jsonl:3: queries", "p.jsonl:4: queries[0].distorted",
                 "p.jsonl:5: queries[1].correct"):
        assert want in text, text
    r = runner.invoke(app, ["probe", str(p)])
    assert r.exit_code == 2 and "nothing was probed" in r.output


@pytest.mark.slow
def test_probe_command_end_to_end_on_the_embedded_model(fixtures, tmp_path):
    # four of the twelve items: every row is six option orders on the real model (the whole file took
    # 204 s of the suite on 2 AVX2 cores); the rules over all twelve are tested on KnowingReader
    probes = tmp_path / "probe4.jsonl"
    probes.write_text("".join((fixtures / "probe.jsonl").read_text().splitlines(keepends=True)[:4]))
    r = runner.invoke(app, ["probe", str(probes), "--runs", "1", "-o", str(tmp_path / "p.json"), "--format", "json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["items"] == 4 and len(rep["rows"]) == 4 * 2 * 3
    assert set(rep["controls"]) and isinstance(rep["read"], bool)
    assert json.loads((tmp_path / "p.json").read_text())["items"] == 4


def test_probe_html_page(fixtures):
    from derivaudit.report.pages import probe_html

    rep = run(fixtures / "probe.jsonl", KnowingReader(load_probes(fixtures / "probe.jsonl")), runs=1, reps=50)
    page = probe_html(rep).decode()
    assert "<svg" in page and "admitting a distorted memory" in page and "Not read" not in page
