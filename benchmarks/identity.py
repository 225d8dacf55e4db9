"""Are a restructuring's outputs byte-identical to the code before it? Scans a log with two
checkouts of derivaudit (the same model, one result cache: the second scan's prompts must hit the
first's answers, or the test is not like for like), renders every report format from each run, and
compares every file byte for byte. Fields that are not outputs of the audit are set aside first:
times, durations, the version string, absolute paths and cache statistics (meta.json's timings and
usage, scope.json's run seconds, timestamps in the reports), and checksums.json, which records
meta.json's bytes.

    python benchmarks/identity.py OLD_CHECKOUT NEW_CHECKOUT [--log FILE...] [--args "--limit 6"]
        [--model smollm2 --backend transformers] [--out /tmp/identity]

The default log and arguments are the test suite's fixture scan (tests/conftest.py SCAN_ARGS).
Exit 0 when every file is identical, 1 otherwise (each difference named).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VOLATILE_META = ("timings", "usage", "derivaudit", "input_files", "config")
FORMATS = ("json", "md", "csv", "junit", "html")
TIME = re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?")


def run(checkout: Path, args: list[str], env: dict[str, str], out: Path | None = None) -> bytes:
    r = subprocess.run([sys.executable, "-m", "derivaudit", *args], cwd=checkout, capture_output=True,
                       env={**env, "PYTHONPATH": str(checkout)})
    if r.returncode not in (0, 1):
        sys.exit(f"{checkout}: derivaudit {' '.join(args)} failed ({r.returncode}):\n{r.stderr.decode()[-2000:]}")
    return r.stdout


def normal(name: str, data: bytes) -> bytes:
    """The file with what is not an output of the audit set aside."""
    if name == "meta.json":
        doc = json.loads(data)
        for k in VOLATILE_META:
            doc.pop(k, None)
        for k in ("calibration", "lifecycle_calibration"):
            for role in (doc.get(k) or {}).values():
                role.pop("seconds", None)
        return json.dumps(doc, sort_keys=True).encode()
    if name == "scope.json":
        doc = json.loads(data)
        doc.get("run", {}).pop("seconds", None)
        return json.dumps(doc, sort_keys=True).encode()
    if name == "report.json":  # the run's timings and cache statistics are copied into the report
        doc = json.loads(TIME.sub(b"TIME", data))
        for k in ("timings", "usage"):
            doc.get("run", {}).pop(k, None)
        return json.dumps(doc, sort_keys=True).encode()
    if name.startswith("report."):  # when it was generated, when the run's files were written
        return TIME.sub(b"TIME", data)
    return data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--log", nargs="+", default=[str(ROOT / "fixtures" / "hostile.jsonl"),
                                                    str(ROOT / "fixtures" / "memories.jsonl")])
    ap.add_argument("--args", default=f"--limit 6 --calibrate-on {ROOT / 'fixtures' / 'hostile.jsonl'}")
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--backend", default="transformers")
    ap.add_argument("--out", type=Path, default=Path("/tmp/identity"))
    a = ap.parse_args()
    a.log = [str(Path(f).resolve()) for f in a.log]  # both checkouts scan the very same file
    shutil.rmtree(a.out, ignore_errors=True)
    a.out.mkdir(parents=True)
    env = {**os.environ, "DERIVAUDIT_HOME": str(a.out / "home"), "DERIVAUDIT_MODEL": a.model,
           "DERIVAUDIT_BACKEND": a.backend}
    runs = {}
    for side, checkout in (("old", a.old), ("new", a.new)):
        run_dir = a.out / side
        run(checkout.resolve(), ["scan", *a.log, *shlex.split(a.args), "-o", str(run_dir), "--format", "json"], env)
        for fmt in FORMATS:
            (a.out / f"{side}-reports").mkdir(exist_ok=True)
            data = run(checkout.resolve(), ["report", str(run_dir), "--format", fmt], env)
            (a.out / f"{side}-reports" / f"report.{fmt}").write_bytes(data.replace(str(run_dir).encode(), b"RUN"))
        runs[side] = run_dir
    differ, same = [], 0
    for folder_old, folder_new in ((runs["old"], runs["new"]), (a.out / "old-reports", a.out / "new-reports")):
        names = sorted({p.name for p in folder_old.iterdir()} | {p.name for p in folder_new.iterdir()})
        for name in names:
            if name in ("checksums.json", ".lock"):
                continue
            po, pn = folder_old / name, folder_new / name
            if not po.exists() or not pn.exists():
                differ.append(f"{name}: only in {'new' if pn.exists() else 'old'}")
                continue
            if normal(name, po.read_bytes()) == normal(name, pn.read_bytes()):
                same += 1
            else:
                differ.append(f"{name}: differs")
    print(f"{same} files identical" + (f", {len(differ)} differ:" if differ else "; none differs"))
    for d in differ:
        print("  " + d)
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
