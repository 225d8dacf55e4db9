"""The read-path audits (`echo`, `overlap`) in every format: terminal table, Markdown, CSV, JUnit
(here), HTML (report/pages.py), JSON. Ids are untrusted text."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ..registry import Registry
from ..safe import dumps as json_dumps
from ..safe import escape, escape_id
from .readrows import (
    ANSWER_HEAD,
    BAND_HEAD,
    answer_rows,
    band_rows,
    cost_line,
    echo_rows,
    fmt,
    overlap_rows,
    peak_lines,
)
from .text import md_escape


def print_echo(console: Console, doc: dict[str, Any]) -> None:
    s, m = doc["settings"], doc["metrics"]
    t = Table(title=f"Memory echo (top {s['k']}, window {s['window']} reads; {int(m['echo.reads'])} reads, "
              f"{int(m['echo.families'])} families, {int(m['echo.corrections'])} corrections)", title_justify="left")
    t.add_column("metric")
    t.add_column("what")
    t.add_column("logged", justify="right")
    fpa = s.get("serve") == "fpa"
    if fpa:
        t.add_column("served by FPA", justify="right")
    for row in echo_rows(doc):
        t.add_row(*[x for x in row if x is not None])
    pad = [""] if fpa else []
    mult = m["echo.multiplicity"]
    t.add_row("echo.rri_storage", "old records' share in storage", fmt(m["echo.rri_storage"]), *pad)
    t.add_row("echo.multiplicity", "records per family (max)",
              "—" if mult is None else f"{mult:.2f} (max {m['echo.max_multiplicity']:.0f})", *pad)
    console.print(t)
    if doc["corrections"]:
        c = Table(title="Corrections", title_justify="left")
        for col in ("correction", "supersedes", "old records", "reads before / after", "density", "WEP", "RRI"):
            c.add_column(col)
        for r in doc["corrections"]:
            both = (lambda n, r=r: f"{fmt(r[n + '_logged'])} → {fmt(r[n + '_fpa'])}") if fpa else \
                (lambda n, r=r: fmt(r[n + "_logged"]))
            c.add_row(escape_id(r["write_id"]), escape(", ".join(r["supersedes"])), str(len(r["old"])),
                      f"{r['reads_before']} / {r['reads_after']}", both("density"), both("wep"), both("rri"))
        console.print(c)
    f = Table(title="Largest families", title_justify="left")
    for col in ("family", "records", "still valid", "write ids"):
        f.add_column(col)
    for fam in doc["families"][:10]:
        ids = ", ".join(fam["write_ids"][:8]) + (" …" if len(fam["write_ids"]) > 8 else "")
        f.add_row(escape(fam["family"]), str(fam["records"]), str(fam["valid"]), escape(ids))
    console.print(f)
    print_answers(console, doc)


def print_answers(console: Console, doc: dict[str, Any]) -> None:
    """The answer replay's tables (echo/overlap --answers); nothing without one."""
    ans = doc.get("answers")
    if not ans:
        return
    t = Table(title="Answers (judged against the expected answer; paired over the same reads)", title_justify="left")
    for col in ANSWER_HEAD:
        t.add_column(col, justify="left" if col == "method" else "right")
    for row in answer_rows(ans):
        t.add_row(*row)
    console.print(t)
    if band_rows(ans):
        b = Table(title="Memory effect by overlap band", title_justify="left")
        for col in BAND_HEAD:
            b.add_column(col)
        for row in band_rows(ans):
            b.add_row(*row)
        console.print(b)
    for line in peak_lines(ans):
        console.print(escape(line))
    console.print(escape(cost_line(ans)))


def echo_markdown(doc: dict[str, Any]) -> str:
    s, fpa = doc["settings"], doc["settings"].get("serve") == "fpa"
    lines = [f"# Memory echo\n\nTop {s['k']} slots weighted {s['weights']}; window {s['window']} reads.\n",
             "| metric | what | logged |" + (" served by FPA |" if fpa else ""),
             "|---|---|---:|" + ("---:|" if fpa else "")]
    for name, what, a, b in echo_rows(doc):
        lines.append(f"| `{name}` | {what} | {a} |" + (f" {b} |" if fpa else ""))
    if doc["corrections"]:
        lines += ["", "## Corrections", "",
                  "| correction | supersedes | old records | reads before / after | density |",
                  "|---|---|---:|---|---:|"]
        for r in doc["corrections"]:
            lines.append(f"| {md_escape(r['write_id'])} | {md_escape(', '.join(r['supersedes']))} | {len(r['old'])} | "
                         f"{r['reads_before']} / {r['reads_after']} | {fmt(r['density_logged'])} |")
    return "\n".join(lines + answers_markdown(doc)) + "\n"


def _md_table(head: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(md_escape(c) for c in r) + " |" for r in rows)]


def answers_markdown(doc: dict[str, Any]) -> list[str]:
    ans = doc.get("answers")
    if not ans:
        return []
    lines = ["", "## Answers", "", *_md_table(ANSWER_HEAD, answer_rows(ans))]
    if band_rows(ans):
        lines += ["", "### Memory effect by overlap band", "", *_md_table(BAND_HEAD, band_rows(ans))]
    lines += ["", *(f"- {md_escape(x)}" for x in [*peak_lines(ans), cost_line(ans)])]
    return lines


def print_overlap(console: Console, doc: dict[str, Any]) -> None:
    s, m = doc["settings"], doc["metrics"]
    lo, hi = s["band"]
    t = Table(title=f"Query–memory overlap (top {s['k']}; middle band [{lo}, {hi}); {int(m['overlap.reads'])} reads, "
              f"{int(m['overlap.ta'])} TA, {int(m['overlap.td_dup'])} TD-Dup, "
              f"{int(m['overlap.memtrim.reads'])} with evidence units)", title_justify="left")
    for col in ("metric", "what", "value"):
        t.add_column(col, justify="right" if col == "value" else "left")
    for row in overlap_rows(doc):
        t.add_row(*row)
    console.print(t)
    console.print("overlap histogram (0.0–1.0 in tenths): " + " ".join(str(n) for n in doc["histogram"]))
    risky = [r for r in doc["reads"] if r["band"] == "middle"]
    if risky:
        r = Table(title="Reads in the risky band", title_justify="left")
        for col in ("read", "overlap", "case", "correct", "MemTrim outcome"):
            r.add_column(col)
        for x in risky[:20]:
            mt = x["memtrim"]
            r.add_row(escape_id(x["read_id"]), f"{x['top_overlap']:.2f}", x.get("case") or "",
                      "" if x["correct"] is None else str(x["correct"]).lower(),
                      escape(", ".join(f"{k}: {v}" for k, v in mt["outcomes"].items())) if mt else "")
        console.print(r)
    print_answers(console, doc)


def overlap_markdown(doc: dict[str, Any]) -> str:
    lo, hi = doc["settings"]["band"]
    lines = [f"# Query–memory overlap\n\nTop {doc['settings']['k']} memories; middle band [{lo}, {hi}).\n",
             "| metric | what | value |", "|---|---|---:|"]
    lines += [f"| `{n}` | {what} | {v} |" for n, what, v in overlap_rows(doc)]
    return "\n".join(lines + answers_markdown(doc)) + "\n"


# ---------------------------------------------------------------- machine formats shared by echo and overlap


def read_rows_csv(doc: dict[str, Any]) -> str:
    """One row per read: its flat fields (lists joined by spaces), every cell formula-safe."""
    import csv
    import io

    from ..safe import cell

    answered = {a["read_id"]: a for a in (doc.get("answers") or {}).get("rows", [])}
    rows = [{k: " ".join(map(str, v)) if isinstance(v, list) else v for k, v in r.items() if not isinstance(v, dict)}
            for r in doc["reads"]]
    for r in rows:  # each method's answer and judgment beside the read
        for m, a in (answered.get(r["read_id"]) or {}).get("answers", {}).items():
            r[f"answer_{m}"], r[f"accurate_{m}"], r[f"adopted_{m}"] = a["answer"], a["accurate"], a["adopted"]
    cols = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        w.writerow([cell("" if r.get(c) is None else r.get(c)) for c in cols])
    return buf.getvalue()


def ci_gates_junit(name: str, doc: dict[str, Any]) -> str:
    """One test case per gate (failing when it holds); without a gate, one skipped case: CI should
    state what it requires of a read-path audit."""
    import xml.etree.ElementTree as ET

    from .text import _x

    gates = doc.get("gates") or []
    root = ET.Element("testsuites", name="derivaudit")
    suite = ET.SubElement(root, "testsuite", name=f"derivaudit.{name}")
    for g in gates:
        case = ET.SubElement(suite, "testcase", classname=f"derivaudit.{name}", name=_x(g["expr"]))
        value = g["why"] or f"{g['value']:.4g}"
        if g["failed"]:
            ET.SubElement(case, "failure", message=_x(f"{g['expr']} holds: {value}"), type="gate").text = _x(value)
        ET.SubElement(case, "system-out").text = _x(f"{g['metric']} = {value}")
    if not gates:
        case = ET.SubElement(suite, "testcase", classname=f"derivaudit.{name}", name="gates")
        ET.SubElement(case, "skipped", message="no --fail-if gate given")
    failures = sum(bool(g["failed"]) for g in gates)
    for el in (root, suite):
        el.set("tests", str(max(1, len(gates))))
        el.set("failures", str(failures))
        el.set("skipped", "0" if gates else "1")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _md(name: str, doc: dict[str, Any]) -> bytes:
    return (echo_markdown if name == "echo" else overlap_markdown)(doc).encode()


def _csv(name: str, doc: dict[str, Any]) -> bytes:
    return read_rows_csv(doc).encode()


def _junit(name: str, doc: dict[str, Any]) -> bytes:
    return ci_gates_junit(name, doc).encode()


def _html(name: str, doc: dict[str, Any]) -> bytes:
    from . import pages

    return (pages.echo_html if name == "echo" else pages.overlap_html)(doc)


def _json(name: str, doc: dict[str, Any]) -> bytes:
    import orjson

    return json_dumps(doc, option=orjson.OPT_INDENT_2)


# The read-path audits' own formats: their renderers take (audit name, doc), not the run report, so
# they are a registry of their own, and `echo`/`overlap --format` offer exactly these; `table` is
# drawn by print_table.
READPATH_FORMATS = Registry("read-path report format",
                            {"json": _json, "md": _md, "csv": _csv, "junit": _junit, "html": _html})


def render(name: str, fmt: str, doc: dict[str, Any]) -> bytes:
    """`doc` of the audit `name` (echo or overlap) in one file format (`table` to a file is JSON)."""
    return READPATH_FORMATS.get("json" if fmt == "table" else fmt)(name, doc)


def print_table(name: str, console: Console, doc: dict[str, Any]) -> None:
    (print_echo if name == "echo" else print_overlap)(console, doc)
