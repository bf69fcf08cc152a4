"""The docs a stranger reads are generated from, and checked against, the code they describe."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from reviewer.config import CONFIG_KEYS, parse_config_text
from reviewer.errors import ConfigError
from reviewer.schema import load_report_schema
from scripts import audit, gen_docs
from tests.conftest import ROOT, cli_env, run_cli

SCHEMA = json.loads((ROOT / "docs" / "imreview-config.schema.json").read_text(encoding="utf-8"))


def test_generated_docs_match_their_sources() -> None:
    """README's inputs/outputs tables (action.yml), the config schema and reference (config.py)."""
    stale = [
        path.relative_to(ROOT).as_posix()
        for path, text in gen_docs.rendered().items()
        if path.read_text(encoding="utf-8") != text
    ]
    assert stale == [], f"out of date, run `python scripts/gen_docs.py`: {stale}"


def test_every_action_input_and_output_is_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    spec = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    for name in [*spec["inputs"], *spec["outputs"]]:
        assert f"| `{name}` |" in readme, name


def _loader_accepts(document: Any) -> bool:
    try:
        parse_config_text(yaml.safe_dump(document, allow_unicode=True), "imreview.yml")
    except ConfigError:
        return False
    return True


def _schema_accepts(document: Any) -> bool:
    return jsonschema.Draft202012Validator(SCHEMA).is_valid(document)


def _documents() -> list[Any]:
    """Hand-picked edge cases plus, for every key, values of every JSON type."""
    docs: list[Any] = [
        None,
        {},
        {"model": "openai/gpt-4o-mini", "fallback_models": ["a/b", "c/d"], "language": "zh-CN"},
        {"model": "has space"},
        {"model": ""},
        {"model": None},
        {"language": ""},
        {"language": "english language"},
        {"fallback_models": "a/b, c/d"},
        {"include": ["src/**", ""]},
        {"max_cost_usd": 0.5},
        {"max_cost_usd": -1},
        {"max_calls": 0},
        {"max_concurrency": 0},
        {"max_output_tokens_per_call": 0},
        {"context_window": None},
        {"context_window": 32768},
        {"fail_on": "P2"},
        {"fail_on": "P4"},
        {"api_base": "http://localhost:8000/v1"},
        {"api_base": "ftp://host"},
        {"prices": {"m": {"input_usd_per_mtok": 0.2, "output_usd_per_mtok": 0.6}}},
        {"prices": {"m": {"input_usd_per_mtok": 0.2}}},
        {"prices": {"m": {"input_usd_per_mtok": 0.2, "output_usd_per_mtok": 0.6, "x": 1}}},
        {"prices": {"m": {"input_usd_per_mtok": -1, "output_usd_per_mtok": 0.6}}},
        {"max_cost": 2},
        {"instructions": "be brief"},
        ["model"],
        "model",
    ]
    samples: list[Any] = [True, 3, 2.5, -7, "text", [1], ["x"], {"k": 1}, None]
    for key in CONFIG_KEYS:
        docs += [{key: value} for value in samples]
    return docs


@pytest.mark.parametrize("document", _documents(), ids=lambda d: json.dumps(d)[:60])
def test_schema_and_loader_accept_and_reject_the_same_documents(document: Any) -> None:
    assert _schema_accepts(document) == _loader_accepts(document)


def test_the_schema_covers_every_config_key_and_the_documented_example() -> None:
    assert set(SCHEMA["properties"]) == set(CONFIG_KEYS)
    guide = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    example = re.search(r"## A complete example\n\n```yaml\n(.*?)```", guide, re.S)
    assert example is not None
    document = yaml.safe_load(example.group(1))
    assert _schema_accepts(document) and _loader_accepts(document)


def test_the_sample_report_is_a_valid_report_and_renders(tmp_path: Path) -> None:
    sample = ROOT / "docs" / "sample-report.json"
    jsonschema.Draft202012Validator(load_report_schema()).validate(json.loads(sample.read_text("utf-8")))
    proc = run_cli(["render", str(sample)], cwd=tmp_path, env=cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# imreview — 2 findings (1 P2, 1 P3)")
    proc = run_cli(["render", str(sample), "--template", "comment"], cwd=tmp_path, env=cli_env(tmp_path))
    assert proc.stdout.startswith("### imreview — 2 findings")


def test_the_sample_summary_and_comment_are_what_the_templates_render_today(tmp_path: Path) -> None:
    """The README links these as what a review looks like: a template change that is not followed by
    `python scripts/make_sample_report.py` would show a stranger output we no longer write."""
    sample, env = str(ROOT / "docs" / "sample-report.json"), cli_env(tmp_path)
    summary = run_cli(["render", sample], cwd=tmp_path, env=env).stdout
    comment = run_cli(["render", sample, "--template", "comment"], cwd=tmp_path, env=env).stdout
    assert (ROOT / "docs" / "sample-summary.md").read_text("utf-8") == summary.rstrip("\n")
    assert (ROOT / "docs" / "sample-comment.md").read_text("utf-8").startswith(comment)


def test_a_report_written_before_answers_and_unverified_still_renders(tmp_path: Path) -> None:
    old = json.loads((ROOT / "docs" / "sample-report.json").read_text("utf-8"))
    del old["answers"], old["unverified"]
    (tmp_path / "old.json").write_text(json.dumps(old), "utf-8")
    proc = run_cli(["render", str(tmp_path / "old.json")], cwd=tmp_path, env=cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# imreview — 2 findings (1 P2, 1 P3)")


README_MAX_LINES = 350
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_is_short_enough_for_a_stranger() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move internals to docs/"


def test_the_readme_test_command_is_what_ci_runs() -> None:
    """.ci/run says it runs exactly the README's second set-up command: keep them one command."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme.split("## Set-up: two commands", 1)[1]
    commands = re.findall(r"```sh\n(.+?)\n```", setup)[:2]
    assert len(commands) == 2
    assert "imreview review" in commands[0] and "pytest" in commands[1]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert commands[1] in ci


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_of_the_docs_resolves(page: Path) -> None:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    broken = []
    for target in _LINK.findall(text):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        missing_anchor = anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved)
        if not resolved.exists() or missing_anchor:
            broken.append(target)
    assert broken == [], f"{page.name}: links to nothing: {broken}"


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in _LINK.findall(readme)}
    orphans = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked]
    assert orphans == []


def test_examples_use_the_major_tag_and_the_readme_explains_pinning_once() -> None:
    for example in sorted((ROOT / "examples").glob("*.yml")):
        uses = re.findall(r"uses: (\S*imreview-action\S*)", example.read_text(encoding="utf-8"))
        assert uses and set(uses) == {"OWNER/imreview-action@v1"}, example.name
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count("### Pinning") == 1 and readme.count("40-character SHA") == 1
    assert "docs/releasing.md" in readme


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT / "reviewer").with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) or "reviewer"


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The reviewer modules `path` imports (`from reviewer import x` counts as module `x`)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "reviewer":
            base = node.module.removeprefix("reviewer").lstrip(".")
            for alias in node.names:
                full = f"{base}.{alias.name}".lstrip(".")
                names.append(full if full in modules else base or "reviewer")
        elif isinstance(node, ast.Import):
            names = [
                a.name.removeprefix("reviewer").lstrip(".") or "reviewer"
                for a in node.names
                if a.name.split(".")[0] == "reviewer"
            ]
        found.update(names)
    return found - {_module_name(path)}


def test_reviewer_imports_only_from_its_own_or_lower_layers() -> None:
    """docs/architecture.md's layer table is the import graph's rule; every module is in it."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    table = page.split("| layer | modules |", 1)[1].split("\n\n", 1)[0]
    layer_of: dict[str, int] = {}
    for level, row in enumerate(r for r in table.splitlines()[2:] if r.startswith("|")):
        for name in re.findall(r"`([\w.]+)`", row):
            layer_of[name] = level
    files = sorted((ROOT / "reviewer").rglob("*.py"))
    modules = {_module_name(p) for p in files}
    unplaced = sorted(modules - set(layer_of))
    assert unplaced == [], f"add {unplaced} to the layer table of docs/architecture.md"
    upward = [
        f"{_module_name(p)} -> {dep}"
        for p in files
        for dep in sorted(_imports(p, modules))
        if layer_of[dep] > layer_of[_module_name(p)]
    ]
    assert upward == [], f"imports against the layers of docs/architecture.md: {upward}"


def test_the_layer_diagram_names_the_modules_of_the_layer_table() -> None:
    """The drawing a newcomer reads first must not drift from the table the import check reads."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    drawn = [
        set(names.split(" · "))
        for names in re.findall(
            r'^  \w+\["<b>[^<]+</b><br/>([^"]+)"\]$', page.split("```mermaid", 1)[1], re.M
        )
    ]
    table = page.split("| layer | modules |", 1)[1].split("\n\n", 1)[0]
    rows = [set(re.findall(r"`([\w.]+)`", r)) for r in table.splitlines()[2:] if r.startswith("|")]
    assert drawn[::-1] == rows


def test_the_audit_copies_every_example_and_every_documented_workflow(tmp_path: Path) -> None:
    """scripts/audit.py runs zizmor with no config over copies, as a user would: it must see them all."""
    copies = audit.user_copies(tmp_path)
    origins = {origin for _, origin in copies}
    assert {f"examples/{p.name}" for p in (ROOT / "examples").glob("*.yml")} <= origins
    assert any(o.startswith("README.md line ") for o in origins)
    assert any(o.startswith("docs/scan.md line ") for o in origins)
    for path, origin in copies:
        assert path.parent == tmp_path, origin
        assert yaml.safe_load(path.read_text(encoding="utf-8"))["jobs"], origin
