"""The Action's entrypoint against a real llama.cpp server and the loopback GitHub (issue 12).

`real_model.py` runs `imreview review` on a local clone; this runs `entrypoint.py` the way the
runner does (every `action.yml` input at its default, `pull_request` event, step-summary and
output files), with GitHub served by the test suite's loopback fake (a PR built from one real
commit of this repository: its files, patches and head contents) and the model by llama.cpp
behind the same counting proxy. `OPENAI_API_KEY` is empty, as a missing secret gives.

    /work/venv/bin/python benchmarks/real_model_action.py \\
        --gguf /work/llama-venv/models/gemma3/gemma-3-270m-q4_k_m.gguf \\
        --model openai/gpt-4o-mini --commit 76a0359 --json /tmp/action.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from real_model import Proxy, _alternates, add_run_arguments, start_server  # noqa: E402

from tests.fakes.github_server import FakeGitHub, diff_entry  # noqa: E402

REPO = "octo-org/imreview-action"
NUMBER = 12


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout


def pull_from_commit(github: FakeGitHub, commit: str) -> tuple[str, str]:
    """The PR `commit~1...commit`: its files with GitHub-style patches, and head contents."""
    head = git("rev-parse", commit).strip()
    base = git("rev-parse", f"{commit}~1").strip()
    files = []
    for line in git("diff", "--name-status", base, head).splitlines():
        status, path = line.split("\t", 1)
        diff = git("diff", "-U3", base, head, "--", path)
        patch = diff[diff.index("@@") :].rstrip("\n") if "@@" in diff else None
        kind = {"A": "added", "D": "removed"}.get(status[0], "modified")
        files.append(diff_entry(path, patch, status=kind))
        if kind != "removed":
            github.add_content(REPO, head, path, git("show", f"{head}:{path}"))
    subject = git("log", "-1", "--format=%s", head).strip()
    github.add_pull(REPO, NUMBER, title=subject, head_sha=head, base_sha=base, files=files)
    return head, base


def run_action(
    tmp: Path, github: FakeGitHub, api_base: str, head: str, base: str, args: argparse.Namespace
) -> dict[str, Any]:
    spec = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    inputs = {name: str(item.get("default", "")) for name, item in spec["inputs"].items()}
    inputs.update(
        {
            "github-token": "fake-actions-token",
            "model": args.model,
            "api-base": api_base,
            "max-output-tokens-per-call": str(args.max_output_tokens_per_call),
            "request-timeout": str(args.request_timeout),
            "max-seconds": str(args.max_seconds),
            "post-comment": "true",
        }
    )
    event = json.loads((ROOT / "tests" / "data" / "events" / "pull_request.opened.json").read_text())
    event["repository"]["full_name"] = REPO
    pull = event["pull_request"]
    event["number"] = pull["number"] = NUMBER
    pull["head"]["sha"], pull["base"]["sha"] = head, base
    pull["base"]["repo"]["full_name"] = pull["head"]["repo"]["full_name"] = REPO
    (tmp / "event.json").write_text(json.dumps(event))
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp),
        "PYTHONPATH": str(ROOT),
        "NO_COLOR": "1",
        "OPENAI_API_KEY": "",
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(tmp / "event.json"),
        "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"),
        "GITHUB_OUTPUT": str(tmp / "output"),
        "GITHUB_API_URL": github.url,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_RUN_ID": "4242",
        "GITHUB_WORKSPACE": str(tmp),
        "RUNNER_TEMP": str(tmp),
        **{f"INPUT_{name.upper()}": value for name, value in inputs.items()},
    }
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "entrypoint.py")],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.monotonic() - started
    outputs: dict[str, str] = {}
    if (tmp / "output").exists():
        from tests.fakes.runner_files import runner_outputs

        outputs = runner_outputs((tmp / "output").read_text(encoding="utf-8"))
    report_path = outputs.get("report-path")
    report_file = tmp / report_path if report_path else None
    report = json.loads(report_file.read_text()) if report_file and report_file.exists() else {}
    comments = github.comments(REPO, NUMBER)
    summary = (tmp / "summary.md").read_text(encoding="utf-8") if (tmp / "summary.md").exists() else ""
    return {
        "exit_code": proc.returncode,
        "traceback": "Traceback" in proc.stderr,
        "seconds": round(elapsed, 1),
        "outputs": {
            k: outputs.get(k) for k in ("verdict", "findings", "p1", "max-priority", "publish-ready")
        },
        "verdict": report.get("verdict"),
        "findings": [
            f"{f['priority']} {f['path']}:{f['line']} {f['title']}" for f in report.get("findings", [])
        ],
        "gaps": sorted({g["why"] for g in report.get("gaps", [])}),
        "gap_details": [str(g.get("detail", ""))[:300] for g in report.get("gaps", [])],
        "sticky_comments": len(comments),
        "inline_reviews": len(github.reviews(REPO, NUMBER)),
        "github_requests": len(github.requests),
        "summary_head": summary[:400],
        "stdout_tail": proc.stdout[-600:],
        "stderr_tail": proc.stderr[-600:],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commit", default="76a0359")
    add_run_arguments(parser, port=8089)
    args = parser.parse_args()

    server, upstream = start_server(args)
    github = FakeGitHub().start()
    github.add_token("fake-actions-token")
    try:
        proxy = Proxy(upstream, args.model)
        head, base = pull_from_commit(github, args.commit)
        with tempfile.TemporaryDirectory(prefix="imreview-action-real-") as tmp:
            result = run_action(Path(tmp), github, proxy.api_base, head, base, args)
        exchanges = proxy.exchanges
        record = {
            "gguf": Path(args.gguf).name,
            "model": args.model,
            "commit": args.commit,
            "path": "action",
            "model_requests": proxy.arrived,
            "roles_alternate": all(_alternates(e["roles"]) for e in exchanges),
            "finish_reasons": [e["finish_reason"] for e in exchanges],
            **result,
        }
        proxy.httpd.shutdown()
    finally:
        github.stop()
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    print(json.dumps(record, indent=1))
    if args.json:
        path = Path(args.json)
        existing = json.loads(path.read_text()) if path.exists() else []
        path.write_text(json.dumps([*existing, record], indent=1) + "\n")


if __name__ == "__main__":
    main()
