"""The documentation cannot drift from the CLI: every command docs/commands.md and the README's
index name has a working --help, every command has a section, and every docs link resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from derivaudit.cli import app

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def _documented() -> set[tuple[str, ...]]:
    text = (ROOT / "docs" / "commands.md").read_text()
    found = set()
    for head in re.findall(r"^### (.+)$", text, re.M):
        for cmd in re.findall(r"`derivaudit ([a-z]+(?: (?:build|run|sample|import|stats|clear|export))?)", head):
            found.add(tuple(cmd.split()))
    return found


def _commands() -> set[tuple[str, ...]]:
    import typer.main

    group = typer.main.get_command(app)
    out = set()
    for name, cmd in group.commands.items():
        subs = getattr(cmd, "commands", None)
        out |= {(name, s) for s in subs} if subs else {(name,)}
    return out


def test_every_command_has_a_section_and_every_section_a_command():
    documented, real = _documented(), _commands()
    # "derivaudit cache stats|clear" documents both in one heading; the pattern reads the first
    assert real - documented <= {("cache", "clear")}, real - documented
    assert documented <= real, documented - real


@pytest.mark.parametrize("cmd", sorted(_documented()))
def test_documented_commands_have_a_working_help(cmd):
    r = runner.invoke(app, [*cmd, "--help"])
    assert r.exit_code == 0, r.output


def test_readme_index_names_real_commands_and_links_resolve():
    readme = (ROOT / "README.md").read_text()
    real = {c[0] for c in _commands()}
    index = readme[readme.index("## Commands"):readme.index("## Input")]
    rows = re.findall(r"^\| `([a-z]+)`", index, re.M)
    assert rows and set(rows) <= real
    assert len(readme.splitlines()) <= 250


def _anchors(doc: Path) -> set[str]:
    """The anchors a Markdown file offers: GitHub's heading slugs (lower case, punctuation but `-`
    and `_` dropped, spaces as `-`, repeats numbered) and explicit `<a id="...">`."""
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
    seen: dict[str, int] = {}
    out = set(re.findall(r'<a id="([^"]+)"', text))
    for head in re.findall(r"^#{1,6} (.+?)\s*$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", head.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_every_link_and_anchor_in_the_docs_resolves():
    docs = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for doc in docs:
        text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
        for target, anchor in re.findall(r"\]\(([^)#\s:]*)(?:#([^)\s]*))?\)", text):
            path = (doc.parent / target).resolve() if target else doc
            if not path.exists():
                broken.append(f"{doc.name}: {target} does not exist")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{doc.name}: {target or doc.name}#{anchor} names no heading or anchor there")
    assert not broken, "\n".join(broken)


def _ci_steps() -> list[str]:
    text = (ROOT / "docs" / "ci.md").read_text()
    block = re.search(r"<!-- ci-steps[^>]*-->\n```sh\n(.*?)```", text, re.S)
    assert block, "docs/ci.md: the ci-steps block is missing"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_both_ci_recipes_run_the_tested_steps():
    """The GitHub and GitLab recipes carry the very lines the next test runs."""
    text = (ROOT / "docs" / "ci.md").read_text()
    github = text[text.index("## GitHub Actions"):text.index("## GitLab CI")]
    gitlab = text[text.index("## GitLab CI"):text.index("## When the store")]
    for line in _ci_steps():
        assert f"          {line}\n" in github, line
        assert f"    - {line}\n" in gitlab, line


@pytest.mark.slow
def test_the_ci_recipe_runs_on_a_fixture_store_and_audits_growth_incrementally(tmp_path):
    """The recipe's shell steps, twice, as two nightly jobs would run them: a store, then the same
    store with a write appended; between them only runs/ and the exported cache survive (a fresh
    DERIVAUDIT_HOME each night)."""
    import json
    import os
    import shutil
    import subprocess
    import sys
    import xml.etree.ElementTree as ET

    script = "\n".join(_ci_steps()) + "\n"
    store = tmp_path / "store.jsonl"
    shutil.copy(ROOT / "fixtures" / "demo.jsonl", store)
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"

    def night(n: int) -> subprocess.CompletedProcess:
        home = tmp_path / f"home-{n}"
        env = {**os.environ, "PATH": path, "STORE": "store.jsonl", "DERIVAUDIT_HOME": str(home)}
        return subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)

    first = night(1)
    assert first.returncode in (0, 1), first.stderr
    assert "cached result(s) from" not in first.stderr  # nothing to import on the first night
    assert (tmp_path / "derivaudit-cache.jsonl.gz").stat().st_size > 0
    suite = ET.parse(tmp_path / "derivaudit-junit.xml").getroot()
    gates = [c for c in suite.iter("testcase") if c.get("classname") == "derivaudit.gates"]
    assert [g.get("name") for g in gates] == ["unsupported>0.5"]
    assert (gates[0].find("failure") is not None) == (first.returncode == 1)
    assert (tmp_path / "derivaudit-report.html").read_text().startswith("<!doctype html>")
    labels = (tmp_path / "runs" / "store" / "labels.jsonl").read_text().splitlines()

    rows = [json.loads(x) for x in store.read_text().splitlines()]
    write = next(r for r in rows if r.get("type") == "write")
    with store.open("a") as fh:
        fh.write(json.dumps({**write, "write_id": "appended", "text": write["text"] + " again"}) + "\n")
    second = night(2)
    assert second.returncode in (0, 1), second.stderr
    assert "cached result(s) from derivaudit-cache.jsonl.gz" in second.stderr  # the first night's cache
    assert "4 of 5 writes judged by this run's earlier scan" in second.stderr
    assert (tmp_path / "runs" / "store" / "labels.jsonl").read_text().splitlines()[:4] == labels
    assert not (tmp_path / "runs" / "store-2").exists()


def test_the_architecture_map_names_every_module_and_only_modules():
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text[text.index("<!-- module-map -->"):text.index("<!-- /module-map -->")]
    pkg = ROOT / "derivaudit"
    named = re.findall(r"^\|[^|]*\| `([\w/]+\.py)` \|", block, re.M)
    modules = {p.relative_to(pkg).as_posix() for p in pkg.rglob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    assert len(named) == len(set(named)), "a module named twice"
    assert set(named) == modules, (sorted(modules - set(named)), sorted(set(named) - modules))
    for sub in {m.split("/")[0] for m in modules if "/" in m}:  # each subpackage: a face, and a group row naming it
        assert (pkg / sub / "__init__.py").exists()
        assert f"`{sub}/`" in block, f"{sub}/ has no group row"


def test_the_tests_mirror_the_package():
    """tests/<sub>/ holds the tests of derivaudit/<sub>/; a test at the top names a top module or is
    one across the package (the command line, the docs, the examples, fuzzing)."""
    pkg, tests = ROOT / "derivaudit", ROOT / "tests"
    subpackages = {p.name for p in pkg.iterdir() if (p / "__init__.py").exists()}
    folders = {p.name for p in tests.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders <= subpackages, sorted(folders - subpackages)
    across = {"cli", "docs", "examples", "fuzz"}
    top = {p.stem for p in pkg.glob("*.py")} | across
    stray = [p.name for p in tests.glob("test_*.py") if p.stem.removeprefix("test_") not in top]
    assert not stray, f"tests at the top that belong in a subpackage's folder: {stray}"
