"""Report generation at scale: time per format and HTML size for a conv-26-sized synthetic run (184
writes, the baseline) and a 10,000-write synthetic run, in the same process; prints the ratios.

    python benchmarks/bench_report.py [--run REAL_RUN_DIR]

`--run` adds a real run folder (e.g. the conv-26 scan + replay) to the table.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from synth_run import make  # noqa: E402

from derivaudit import report as rep  # noqa: E402
from derivaudit.report.html import render  # noqa: E402


def measure(run: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    t = time.perf_counter()
    doc = rep.build(run)
    out["build"] = time.perf_counter() - t
    doc["gates"] = rep.evaluate_ci_gates(doc, ["unsupported_admitted>0.25", "expanded_supported<0.7"])
    for name, fn in (("json", rep.to_json), ("md", rep.to_markdown), ("csv", rep.to_csv), ("junit", rep.to_junit),
                     ("html", render)):
        t = time.perf_counter()
        data = fn(doc)
        out[name] = time.perf_counter() - t
        if name == "html":
            out["html_bytes"] = len(data.encode())
    out["total"] = sum(v for k, v in out.items() if k != "html_bytes")
    out["writes"] = doc["run"]["writes"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", type=Path, help="a real run folder to measure as well")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = {"synthetic 184 (baseline)": make(Path(tmp) / "small", 184, 1),
                "synthetic 10,000": make(Path(tmp) / "large", 10_000, 50)}
        if a.run:
            runs[f"real {a.run}"] = a.run
        measure(runs["synthetic 184 (baseline)"])  # warm imports (matplotlib, polars) before timing
        res = {name: measure(path) for name, path in runs.items()}
    cols = ["build", "json", "md", "csv", "junit", "html", "total"]
    print(f"{'run':<34}{'writes':>8}" + "".join(f"{c:>9}" for c in cols) + f"{'HTML MB':>10}")
    for name, r in res.items():
        print(f"{name:<34}{int(r['writes']):>8}" + "".join(f"{r[c]:>8.2f}s" for c in cols)
              + f"{r['html_bytes'] / 1e6:>10.2f}")
    base, big = res["synthetic 184 (baseline)"], res["synthetic 10,000"]
    scale = big["writes"] / base["writes"]
    print(f"\n10,000 vs 184 writes ({scale:.1f}x the writes): total time {big['total'] / base['total']:.1f}x, "
          f"HTML size {big['html_bytes'] / base['html_bytes']:.1f}x; "
          f"per write {1e3 * big['total'] / big['writes']:.2f} ms vs {1e3 * base['total'] / base['writes']:.2f} ms")


if __name__ == "__main__":
    main()
