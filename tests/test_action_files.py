"""action.yml, Dockerfile, .dockerignore, entrypoint.py and requirements.lock against DESIGN 3 and 10.12.

CI cannot build the image, so the Dockerfile is linted for the runner's rules instead.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from reviewer.budget import DEFAULT_LIMITS
from reviewer.config import Config

ROOT = Path(__file__).resolve().parent.parent

# DESIGN section 3, copied by hand: a change there must be made here on purpose.
DESIGN_INPUTS = {
    "github-token": "${{ github.token }}",
    "model": "",
    "fallback-models": "",
    "api-base": "",
    "pr-number": "",
    "mode": "auto",
    "max-cost-usd": "1.00",
    "max-input-tokens": "200000",
    "max-output-tokens": "24000",
    "max-seconds": "600",
    "max-calls": "24",
    "max-pr-cost-usd": "5.00",
    "max-concurrency": "4",
    "max-output-tokens-per-call": "",
    "request-timeout": "",
    "post-comment": "true",
    "inline-comments": "false",
    "annotations": "true",
    "max-findings": "6",
    "fail-on": "never",
    "on-error": "warn",
    "language": "en",
    "config-path": ".github/imreview.yml",
    "template-dir": "",
    "include": "",
    "exclude": "",
    "skip-drafts": "true",
    "skip-bots": "true",
    "scan-limit": "20",
    "scan-labels": "",
    "scan-matrix": "false",
}
DESIGN_OUTPUTS = {
    "verdict",
    "publish-ready",
    "findings",
    "p1",
    "max-priority",
    "cost-usd",
    "report-path",
    "comment-url",
    "matrix",
}
CONTAINER_RUNS_KEYS = {
    "using",
    "image",
    "entrypoint",
    "args",
    "env",
    "pre-entrypoint",
    "pre-if",
    "post-entrypoint",
    "post-if",
}


@pytest.fixture(scope="module")
def action() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))


def test_action_inputs_and_defaults_are_designs(action: dict[str, Any]) -> None:
    inputs = action["inputs"]
    assert set(inputs) == set(DESIGN_INPUTS)
    assert {name: str(spec.get("default", "")) for name, spec in inputs.items()} == DESIGN_INPUTS
    for name, spec in inputs.items():
        assert isinstance(spec.get("description"), str) and spec["description"].strip(), name
        assert not spec.get("required"), f"{name}: the runner does not enforce required inputs"


def test_action_defaults_agree_with_the_codes_defaults(action: dict[str, Any]) -> None:
    defaults = {name: spec["default"] for name, spec in action["inputs"].items()}
    assert float(defaults["max-cost-usd"]) == DEFAULT_LIMITS.cost_usd
    assert int(defaults["max-input-tokens"]) == DEFAULT_LIMITS.input_tokens
    assert int(defaults["max-output-tokens"]) == DEFAULT_LIMITS.output_tokens
    assert float(defaults["max-seconds"]) == DEFAULT_LIMITS.seconds
    assert int(defaults["max-calls"]) == DEFAULT_LIMITS.calls
    assert int(defaults["max-concurrency"]) == Config().max_concurrency
    assert int(defaults["max-findings"]) == Config().max_findings
    assert (defaults["fail-on"], defaults["on-error"], defaults["language"]) == (
        Config().fail_on,
        Config().on_error,
        Config().language,
    )


def test_action_outputs_are_designs(action: dict[str, Any]) -> None:
    assert set(action["outputs"]) == DESIGN_OUTPUTS
    assert all(spec["description"].strip() for spec in action["outputs"].values())


def test_action_runs_the_dockerfile_with_metadata(action: dict[str, Any]) -> None:
    assert action["runs"] == {"using": "docker", "image": "Dockerfile"}
    assert set(action["runs"]) <= CONTAINER_RUNS_KEYS
    assert action["name"] and action["description"] and action["author"]
    assert set(action["branding"]) == {"icon", "color"}


# --- Dockerfile --------------------------------------------------------------------------------


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "Dockerfile ends inside a continuation"
    return [(head.upper(), rest.strip()) for head, _, rest in (item.partition(" ") for item in logical)]


def instructions(name: str) -> list[str]:
    return [args for instr, args in dockerfile() if instr == name]


def test_dockerfile_follows_the_runners_rules() -> None:
    assert instructions("USER") == [], "the action must run as root to reach /github/workspace"
    assert instructions("WORKDIR") == [], "the workspace is mounted over the working directory"
    [base] = instructions("FROM")
    defaults = dict(arg.partition("=")[::2] for arg in instructions("ARG"))
    if m := re.fullmatch(r"\$\{?(\w+)\}?", base):  # the runner builds with no --build-arg
        base = defaults[m.group(1)]
    assert re.fullmatch(r"python:3\.11-slim(@sha256:[0-9a-f]{64})?", base), base


def test_dockerfile_entrypoint_is_exec_form_and_absolute() -> None:
    [entry] = instructions("ENTRYPOINT")
    argv = json.loads(entry)
    assert isinstance(argv, list) and argv[0].startswith("/")
    if re.search(r"/python3?$", argv[0]):
        script = argv[1]
        assert script.startswith("/") and script.endswith("entrypoint.py")
        assert any(copy.split() == ["entrypoint.py", script] for copy in instructions("COPY"))


def test_dockerfile_environment() -> None:
    env = " ".join(instructions("ENV"))
    for setting in (
        "LITELLM_LOCAL_MODEL_COST_MAP=True",
        "HF_HUB_OFFLINE=1",
        "PYTHONDONTWRITEBYTECODE=1",
        "PIP_NO_CACHE_DIR=1",
        "GIT_CONFIG_KEY_0=safe.directory",
        "GIT_CONFIG_VALUE_0=/github/workspace",
    ):
        assert setting in env.split(), setting
    assert "GIT_CONFIG_COUNT=1" in env.split()


def test_dockerfile_installs_git_and_pinned_dependencies() -> None:
    runs = instructions("RUN")
    apt = next(r for r in runs if "apt-get install" in r)
    assert re.search(r"apt-get install -y --no-install-recommends git\b", apt)
    assert "rm -rf /var/lib/apt/lists/*" in apt
    assert any(re.search(r"pip install --require-hashes --no-deps -r \S*requirements\.lock", r) for r in runs)
    package = [r for r in runs if re.search(r"pip install --no-deps /opt/imreview", r)]
    assert package, "the package itself is installed with --no-deps from /opt/imreview"
    assert any("*.pth" in r and "exit 1" in r for r in runs), "a step fails the build on an unknown *.pth"


def test_dockerfile_copies_only_what_exists_and_dockerignore_lets_through() -> None:
    allowed = {
        line[1:].rstrip("/")
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.startswith("!")
    }
    for copy in instructions("COPY"):
        *sources, _dest = copy.split()
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: missing from the repository"
            assert source.rstrip("/") in allowed, f"COPY {source}: excluded by .dockerignore"


def test_entrypoint_calls_the_action_command() -> None:
    tree = ast.parse((ROOT / "entrypoint.py").read_text(encoding="utf-8"))
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "main"
    ]
    assert [ast.literal_eval(call.args[0]) for call in calls] == [["action"]]


# --- requirements.lock -------------------------------------------------------------------------


def lock_entries(name: str = "requirements.lock") -> dict[str, tuple[str, list[str]]]:
    """name → (version, hashes) from a pip hash-checking requirements file."""
    text = (ROOT / name).read_text(encoding="utf-8")
    entries: dict[str, tuple[str, list[str]]] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        lines = [ln for ln in block.splitlines() if not ln.strip().startswith("#")]
        if not lines:
            continue
        m = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", lines[0])
        assert m, f"not an exact pin: {lines[0]!r}"
        hashes = re.findall(r"--hash=sha256:([0-9a-f]{64})", "\n".join(lines))
        entries[m.group(1).lower().replace("_", "-")] = (m.group(2), hashes)
    return entries


def test_lock_pins_every_package_with_hashes() -> None:
    entries = lock_entries()
    assert len(entries) > 20
    unhashed = [name for name, (_, hashes) in entries.items() if not hashes]
    assert unhashed == []


def test_lock_pins_litellm_and_never_the_compromised_releases() -> None:
    assert lock_entries()["litellm"][0] == "1.110.2"
    text = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    assert "1.82.7" not in text and "1.82.8" not in text


def test_lock_agrees_with_pyproject() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    entries = lock_entries()
    for requirement in project["dependencies"]:
        name, _, version = requirement.partition("==")
        assert entries[name.lower()][0] == version, requirement


def test_build_lock_pins_the_build_backend_with_hashes() -> None:
    """The image builds the package with --no-build-isolation: the backend must come from the lock."""
    tomllib = pytest.importorskip("tomllib")
    build = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]
    entries = lock_entries("requirements-build.lock")
    for requirement in build["requires"]:
        name, _, version = requirement.partition("==")
        assert entries[name.lower()][0] == version, requirement
    assert all(hashes for _, hashes in entries.values())
    assert not set(entries) & set(lock_entries()), "a package pinned in both locks"
    runs = instructions("RUN")
    assert any(re.search(r"--require-hashes --no-deps -r \S*requirements-build\.lock", r) for r in runs)
    assert any("--no-build-isolation" in r for r in runs)


def test_config_mirroring_defaults_in_code_match_action_yml(action: dict[str, Any]) -> None:
    from reviewer.action import CONFIG_INPUT_DEFAULTS

    for name, default in CONFIG_INPUT_DEFAULTS.items():
        assert str(action["inputs"][name]["default"]) == default, name
    from reviewer.config import CONFIG_KEYS

    mirrored = {key.input for key in CONFIG_KEYS.values() if key.input}  # keys the config file also sets
    defaulted = {name for name, spec in action["inputs"].items() if str(spec.get("default", "")).strip()}
    assert sorted(mirrored & defaulted - set(CONFIG_INPUT_DEFAULTS)) == [], (
        "an input that mirrors a config key with a default not in CONFIG_INPUT_DEFAULTS would always"
        " override the base branch's config file"
    )
