"""The Action's Docker image: size, layers, build time and time from `docker run` to the first line.

    python benchmarks/bench_image.py --base imreview-base:bookworm [--runs 5] [--builds 5]

Needs a running dockerd and a base image (`python:3.11-slim`, or the stand-in that
benchmarks/image_base.sh builds from Debian's packages where Docker Hub is out of reach). Builds
four variants of the Dockerfile from a copy of the build context (so the repository is never
touched), prints Markdown tables (the ones in benchmarks/IMAGE.md) and writes the raw numbers as
JSON (`--json`):

- `before`: the Dockerfile as it was before issue 9's image work (`--before-rev`), with only its
  `FROM` made an argument so it builds on the same base;
- `lean`: the committed Dockerfile;
- `lean, no .pyc`: the same without the bytecode step (no dependency module precompiled);
- `lean, every .pyc`: the same with pip compiling every installed module.

Timings are medians of `--runs` runs after one warm-up round (each image read once into the page
cache); the four images take turns in every round, so a change in the machine's load weighs on
each alike.
Cold builds (`--no-cache`, every wheel downloaded from PyPI: there is no pip cache in the build)
are medians of `--builds` builds of `before` and `lean`; a warm rebuild appends a comment to
reviewer/__init__.py in the copied context and builds with the layer cache.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
BEFORE_REV = "10f78db"
BYTECODE_STEP = "PYTHONDONTWRITEBYTECODE='' python -c"
NO_COMPILE = "requirements.lock --no-compile;"
EVENT = {
    "action": "opened",
    "number": 1,
    "pull_request": {
        "number": 1,
        "draft": False,
        "head": {"sha": "1" * 40, "ref": "feature", "repo": {"full_name": "octo/demo"}},
        "base": {"sha": "2" * 40, "ref": "main", "repo": {"full_name": "octo/demo"}},
        "user": {"login": "someone", "type": "User"},
    },
    "repository": {"full_name": "octo/demo"},
}
SITE_STATS = """
import json, os, sysconfig
site = sysconfig.get_paths()["purelib"]
total = pyc = 0
for d, _, files in os.walk(site):
    for f in files:
        p = os.path.join(d, f)
        if not os.path.islink(p):
            total += os.path.getsize(p)
            pyc += os.path.getsize(p) if f.endswith(".pyc") else 0
print(json.dumps({"site_packages": total, "pyc": pyc}))
"""
FIRST_CALL = """
import sys, time
t = time.perf_counter()
import litellm
litellm.completion(
    model="openai/fake-model", api_base=sys.argv[1], api_key="none",
    messages=[{"role": "user", "content": "hi"}], max_tokens=5,
)
print(f"{time.perf_counter() - t:.3f}")
"""
IMPORT_LITELLM = (
    "import time; t = time.perf_counter(); import litellm; print(f'{time.perf_counter() - t:.3f}')"
)


@dataclass(frozen=True)
class Variant:
    name: str
    dockerfile: str


def sh(argv: Sequence[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc: subprocess.CompletedProcess[str] = subprocess.run(argv, text=True, capture_output=True, **kwargs)  # type: ignore[call-overload]
    if proc.returncode:
        sys.exit(
            f"{' '.join(argv[:4])} … failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
        )
    return proc


def variants(before_rev: str) -> list[Variant]:
    lean = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    before = sh(["git", "-C", str(ROOT), "show", f"{before_rev}:Dockerfile"]).stdout
    assert "\nFROM python:3.11-slim\n" in before, (
        f"{before_rev}:Dockerfile has no plain FROM python:3.11-slim"
    )
    before = before.replace(
        "\nFROM python:3.11-slim\n", "\nARG BASE_IMAGE=python:3.11-slim\nFROM ${BASE_IMAGE}\n"
    )
    assert BYTECODE_STEP in lean and NO_COMPILE in lean, "the Dockerfile's bytecode step has changed"
    return [
        Variant("before", before),
        Variant("lean", lean),
        Variant("lean, no .pyc", lean.replace(BYTECODE_STEP, "python -c")),
        Variant("lean, every .pyc", lean.replace(NO_COMPILE, "requirements.lock;")),
    ]


def copy_context(into: Path) -> None:
    """What .dockerignore lets through (its `!name` lines), and the Dockerfile."""
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    for name in [
        "Dockerfile",
        ".dockerignore",
        *(line[1:].rstrip("/") for line in lines if line.startswith("!")),
    ]:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, into / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, into / name)


def build(context: Path, dockerfile: Path, tag: str, base: str, *, cache: bool) -> float:
    argv = ["docker", "build", "-q", "-f", str(dockerfile), "--build-arg", f"BASE_IMAGE={base}", "-t", tag]
    start = time.perf_counter()
    sh([*argv, *([] if cache else ["--no-cache"]), str(context)])
    return time.perf_counter() - start


def first_line(argv: Sequence[str]) -> tuple[float, float, str]:
    """Seconds to the first line on stdout, seconds to exit, and the line."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    first = time.perf_counter() - start
    proc.stdout.read()
    proc.wait()
    return first, time.perf_counter() - start, line.strip()


def startup_sample(tag: str, event_dir: Path, api_base: str) -> dict[str, Any]:
    """One run of each startup measurement against one image."""
    action = [
        "docker", "run", "--rm",
        "-e", "GITHUB_EVENT_NAME=pull_request",
        "-e", "GITHUB_EVENT_PATH=/github/workflow/event.json",
        "-e", "GITHUB_REPOSITORY=octo/demo",
        "-v", f"{event_dir}:/github/workflow:ro",
        tag,
    ]  # fmt: skip
    python = ["docker", "run", "--rm", "--entrypoint", "/usr/local/bin/python", tag]
    action_first, action_exit, line = first_line(action)
    return {
        "action_first_line_s": action_first,
        "action_exit_s": action_exit,
        "action_line": line,
        "help_first_line_s": first_line([*python, "-m", "reviewer", "--help"])[0],
        "container_start_s": first_line(["docker", "run", "--rm", "--entrypoint", "/bin/true", tag])[1],
        "import_litellm_s": float(sh([*python, "-c", IMPORT_LITELLM]).stdout),
        "import_and_first_call_s": float(
            sh(["docker", "run", "--rm", "--network", "host", *python[3:], "-c", FIRST_CALL, api_base]).stdout
        ),
    }


def startup(tags: dict[str, str], event_dir: Path, runs: int) -> dict[str, dict[str, Any]]:
    """Medians per image; the images take turns in every round, so the machine's load (shared,
    changing) weighs on each alike. Round 0 is a warm-up and is dropped."""
    from tests.fakes.model_server import FakeModelServer, text

    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in tags}
    with FakeModelServer(handler=lambda _body: text("ok")) as model:
        for _ in range(runs + 1):
            for name, tag in tags.items():
                samples[name].append(startup_sample(tag, event_dir, model.api_base))
    medians: dict[str, dict[str, Any]] = {}
    for name, rows in samples.items():
        rows = rows[1:]
        medians[name] = {
            key: statistics.median(r[key] for r in rows) for key in rows[0] if key != "action_line"
        }
        medians[name]["action_line"] = rows[0]["action_line"]
    return medians


def sizes(tag: str) -> dict[str, Any]:
    image = int(sh(["docker", "image", "inspect", "--format", "{{.Size}}", tag]).stdout)
    history = sh(
        ["docker", "history", "--no-trunc", "--human=false", "--format", "{{.Size}}\t{{.CreatedBy}}", tag]
    )
    layers = [
        (int(size), step) for size, _, step in (line.partition("\t") for line in history.stdout.splitlines())
    ]
    stats = json.loads(
        sh(
            ["docker", "run", "--rm", "-i", "--entrypoint", "/usr/local/bin/python", tag, "-"],
            input=SITE_STATS,
        ).stdout
    )
    return {"image": image, "layers": layers[::-1], **stats}


def mb(n: int) -> str:
    return f"{n / 1e6:.0f} MB"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--base", default="python:3.11-slim", help="base image (BASE_IMAGE build argument)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per measurement (median)")
    ap.add_argument("--builds", type=int, default=5, help="cold and warm builds of `before` and `lean`")
    ap.add_argument("--before-rev", default=BEFORE_REV, help="commit holding the `before` Dockerfile")
    ap.add_argument("--json", type=Path, help="write the raw numbers here")
    ap.add_argument(
        "--resume", action="store_true", help="keep the variants already in --json, measure the rest"
    )
    ap.add_argument("--from-json", type=Path, help="print the tables from an earlier --json, measure nothing")
    args = ap.parse_args(argv)

    results = json.loads(args.from_json.read_text(encoding="utf-8")) if args.from_json else measure(args)
    render(results)
    return 0


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Builds every variant (the JSON file, if any, is rewritten after each), then runs them."""
    results: dict[str, Any] = {"_machine": {"base": args.base, "runs": args.runs, "builds": args.builds}}
    if args.resume and args.json and args.json.exists():
        results = json.loads(args.json.read_text(encoding="utf-8"))
        assert results["_machine"]["base"] == args.base, f"{args.json} measured another base"
    with tempfile.TemporaryDirectory(prefix="imreview-image-") as tmp:
        work = Path(tmp)
        context, event_dir = work / "context", work / "event"
        context.mkdir()
        event_dir.mkdir()
        copy_context(context)
        (event_dir / "event.json").write_text(json.dumps(EVENT), encoding="utf-8")
        init = context / "reviewer" / "__init__.py"
        for n, variant in enumerate(variants(args.before_rev)):
            if variant.name in results:
                continue
            tag = f"imreview-bench:{n}"
            dockerfile = work / f"Dockerfile.{n}"
            dockerfile.write_text(variant.dockerfile, encoding="utf-8")
            row: dict[str, Any] = {}
            if variant.name in ("before", "lean") and args.builds:
                cold = [build(context, dockerfile, tag, args.base, cache=False) for _ in range(args.builds)]
                warm = []
                for k in range(args.builds):
                    init.write_text(init.read_text(encoding="utf-8") + f"# bench {n}.{k}\n", encoding="utf-8")
                    warm.append(build(context, dockerfile, tag, args.base, cache=True))
                row |= {"cold_build_s": statistics.median(cold), "warm_rebuild_s": statistics.median(warm)}
                row |= {"cold_builds": cold, "warm_rebuilds": warm}
            else:
                build(context, dockerfile, tag, args.base, cache=False)
            results[variant.name] = row | sizes(tag)
            save(args.json, results)
            print(f"{variant.name}: built", file=sys.stderr)
        load = os.getloadavg()[0]
        tags = {variant.name: f"imreview-bench:{n}" for n, variant in enumerate(variants(args.before_rev))}
        for name, row in startup(tags, event_dir, args.runs).items():
            results[name] |= row
    results["_machine"] |= {"cores": os.cpu_count(), "load_start": load, "load_end": os.getloadavg()[0]}
    save(args.json, results)
    return results


def save(path: Path | None, results: dict[str, Any]) -> None:
    if path:
        path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


def render(results: dict[str, Any]) -> None:
    machine = results.pop("_machine")
    print(
        f"Base image: `{machine['base']}`; medians of {machine['runs']} runs ({machine['builds']} builds); "
        f"{machine['cores']} cores, load average {machine['load_start']:.1f} when the timed runs began, "
        f"{machine['load_end']:.1f} when they ended.\n"
    )
    columns = [
        "variant", "image", "site-packages", "of which .pyc", "cold build", "warm rebuild",
        "`docker run` → first line (Action)", "`imreview --help` first line",
        "`import litellm` in the container", "import + first model call (loopback)", "container start",
    ]  # fmt: skip
    print("| " + " | ".join(columns) + " |\n|" + "---|" * len(columns))
    for name, r in results.items():
        cells: list[str] = [name, mb(r["image"]), mb(r["site_packages"]), mb(r["pyc"])]
        cells.append(f"{r['cold_build_s']:.0f} s" if "cold_build_s" in r else "–")
        cells.append(f"{r['warm_rebuild_s']:.1f} s" if "warm_rebuild_s" in r else "–")
        for key in (
            "action_first_line_s", "help_first_line_s", "import_litellm_s", "import_and_first_call_s",
            "container_start_s",
        ):  # fmt: skip
            cells.append(f"{r[key]:.2f} s")
        print("| " + " | ".join(cells) + " |")
    for name in [name for name in ("before", "lean") if name in results]:
        print(f"\n`docker history` of `{name}` (oldest first):\n\n| size | step |\n|---|---|")
        for size, step in results[name]["layers"]:
            step = step.replace("/bin/sh -c #(nop) ", "").replace("/bin/sh -c ", "RUN ").replace("|", "\\|")
            print(f"| {mb(size)} | `{step[:90]}` |")
    for name, r in results.items():
        print(f"\nFirst line of the Action run (`{name}`): `{r['action_line']}`")


if __name__ == "__main__":
    raise SystemExit(main())
