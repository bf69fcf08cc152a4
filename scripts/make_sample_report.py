"""Regenerate docs/sample-report.json (and the sample comment and summary) from a real run.

`imreview pr` runs end to end against the loopback GitHub and model servers of the test suite, on a
small invented pull request, with a scripted model answer: the report, comment and summary are what
the pipeline really produces. Run from the repository root:

    python scripts/make_sample_report.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.github_server import FakeGitHub, diff_entry  # noqa: E402
from tests.fakes.model_server import FakeModelServer, Reply, text  # noqa: E402

REPO = "octo-org/widgets"
NUMBER = 42
TOKEN = "sample-token"
BASE = "7c6b5a4e3d2c1b0a99887766554433221100ffee"
HEAD = "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678"

HTTP_PATCH = """@@ -80,8 +80,15 @@ class Client:
     def send(self, request: Request) -> Response:
-        return self._request(request)
+        attempt = 0
+        while True:
+            try:
+                return self._request(request)
+            except HTTPError as err:
+                attempt += 1
+                self._sleep(backoff(attempt))
+                continue
~
     def _sleep(self, seconds: float) -> None:
-        time.sleep(seconds)
+        time.sleep(min(seconds, 30.0) * (2 ** 0))
~
     def close(self) -> None:
         self._pool.close()""".replace("\n~\n", "\n \n")  # blank context lines carry one space
RETRY_PATCH = """@@ -0,0 +1,6 @@
+import random
+
+
+def backoff(attempt: int) -> float:
+    \"\"\"Seconds to wait before retry number `attempt` (1-based), with jitter.\"\"\"
+    return min(30.0, 0.5 * 2 ** attempt) * random.uniform(0.5, 1.0)"""
OPTIONS_PATCH = """@@ -38,3 +38,7 @@ def parse_since(value: str) -> timedelta:
     unit = value[-1]
     amount = int(value[:-1])
+    if unit == "s":
+        return timedelta(seconds=amount)
+    if unit == "m":
+        return timedelta(minutes=amount)
     return timedelta(hours=amount)"""
TEST_PATCH = """@@ -0,0 +1,5 @@
+from client.http import Client
+
+
+def test_send_retries_a_503(fake_server):
+    assert Client(fake_server.url).send(fake_server.request("/flaky")).status == 200"""
LOCK_PATCH = """@@ -1,3 +1,3 @@
 {
-  "lockfileVersion": 2,
+  "lockfileVersion": 3,
 }"""

FINDINGS = [
    {
        "path": "client/http.py",
        "line": 85,
        "end_line": 88,
        "priority": "P2",
        "title": "Retry loop never gives up on 4xx",
        "trigger": "`send()` gets a 401 from `_request` (a wrong or expired token).",
        "observation": "Every `HTTPError` is retried, with no attempt limit: the call loops until the "
        "job's timeout instead of failing fast.",
        "suggestion": "Retry only 429 and 5xx, at most 5 attempts; re-raise anything else "
        "(`if err.status < 500 and err.status != 429: raise`).",
        "quote": "except HTTPError as err:",
        "confidence": 0.9,
    },
    {
        "path": "cli/options.py",
        "line": 40,
        "priority": "P3",
        "title": "`parse_since()` accepts negative durations",
        "trigger": "`--since -5m` reaches `timedelta(minutes=-5)`.",
        "observation": "A negative window silently selects future events, so the command prints "
        "nothing instead of an error.",
        "suggestion": "Reject `amount <= 0` with a `click.BadParameter` naming the option.",
        "quote": 'if unit == "s":',
        "confidence": 0.7,
    },
]
ANSWER = {
    "findings": FINDINGS,
    "exclusions": [
        {
            "claim": "`backoff()` can overflow for large attempt numbers",
            "reason": "The result is capped with `min(30.0, …)` before the jitter; 2 ** attempt stays a "
            "Python int, which does not overflow.",
            "path": "client/retry.py",
            "line": 6,
        }
    ],
    "signals": [
        {
            "kind": "MERGE",
            "target": "client/http.py:_sleep()",
            "into": "client/retry.py:backoff()",
            "reason": "Both cap the delay at 30 s; one place should own the cap.",
        }
    ],
    "unverified": [
        {
            "what": "Whether callers of `Client.send()` set their own timeout around the retry loop",
            "how": "Read the callers of `Client.send` in cli/ and run tests/test_http.py against a server "
            "that always answers 503",
        }
    ],
}


def answer(body: dict[str, Any]) -> Reply:
    prompt = body["messages"][-1]["content"]
    if '"verdicts"' in prompt:
        ids = re.findall(r"^id: ([0-9a-f]{12})$", prompt, re.M)[:1]
        verdicts = [{"id": i, "holds": True, "reason": "the loop has no exit for 4xx"} for i in ids]
        return text(json.dumps({"verdicts": verdicts}), prompt_tokens=1400, completion_tokens=40)
    return text(json.dumps(ANSWER), prompt_tokens=5200, completion_tokens=610)


def main() -> int:
    out = ROOT / "docs"
    with FakeGitHub() as gh, FakeModelServer(handler=answer) as model, tempfile.TemporaryDirectory() as tmp:
        gh.add_token(TOKEN, login="imreview-demo")
        gh.add_pull(
            REPO,
            NUMBER,
            title="Retry transient API errors",
            author="alice",
            head_sha=HEAD,
            base_sha=BASE,
            head_ref="feature/retry",
            commits=3,
            files=[
                diff_entry("client/http.py", HTTP_PATCH),
                diff_entry("client/retry.py", RETRY_PATCH, status="added"),
                diff_entry("cli/options.py", OPTIONS_PATCH),
                diff_entry("tests/test_http.py", TEST_PATCH, status="added"),
                diff_entry("package-lock.json", LOCK_PATCH),
            ],
        )
        gh.add_status(REPO, HEAD, "build", "success")
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": tmp,
            "PYTHONPATH": str(ROOT),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "HF_HUB_OFFLINE": "1",
            "GITHUB_TOKEN": TOKEN,
            "GITHUB_API_URL": gh.url,
        }
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "reviewer",
                "pr",
                f"{REPO}#{NUMBER}",
                "--model",
                "openai/gpt-4o-mini",
                "--api-base",
                model.api_base,
                "--json",
                str(out / "sample-report.json"),
                "--comment",
                str(out / "sample-comment.md"),
                "--summary",
                str(out / "sample-summary.md"),
            ],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    sys.stderr.write(proc.stderr)
    print(f"wrote docs/sample-report.json, sample-comment.md, sample-summary.md (exit {proc.returncode})")
    return 0 if proc.returncode in (0, 1) else proc.returncode


if __name__ == "__main__":
    sys.exit(main())
