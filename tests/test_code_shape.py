"""Every function in reviewer/ reads in one screen: at most 60 lines and cyclomatic complexity 15.

Measured with radon (the same numbers `radon cc -s reviewer` prints): functions, methods and nested
functions, not class bodies. A nested function's branches count for itself, not for its parent; its
lines count for both.

ALLOWED lists functions allowed over a limit, with their (lines, complexity) when the entry was
written; it is empty (the 19 entries the test arrived with were all split). It only shrinks: an
entry fails the test when its function grows past the numbers recorded, when it is back within the
limits (delete the entry), or when it is gone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from radon.complexity import cc_visit
from radon.visitors import Class, Function

MAX_LINES = 60
MAX_COMPLEXITY = 15
PACKAGE = Path(__file__).resolve().parent.parent / "reviewer"

# "path/inside/reviewer.py::qualified.name": (lines, complexity) when the entry was written.
ALLOWED: dict[str, tuple[int, int]] = {}


def _functions(blocks: list[Function | Class], prefix: str = "") -> Iterator[tuple[str, Function]]:
    for block in blocks:
        if isinstance(block, Class):
            yield from _functions(block.methods, f"{prefix}{block.name}.")
            yield from _functions(block.inner_classes, f"{prefix}{block.name}.")
        else:
            name = f"{prefix}{block.name}"
            yield name, block
            yield from _functions(block.closures, f"{name}.")


def measure(package: Path = PACKAGE) -> dict[str, tuple[int, int]]:
    """Every function in the package: "file::qualified.name" -> (lines, complexity)."""
    sizes: dict[str, tuple[int, int]] = {}
    for path in sorted(package.rglob("*.py")):
        blocks = [b for b in cc_visit(path.read_text(encoding="utf-8")) if not getattr(b, "is_method", False)]
        module = path.relative_to(package).as_posix()
        for name, function in _functions(blocks):
            sizes[f"{module}::{name}"] = (function.endline - function.lineno + 1, function.complexity)
    return sizes


def _over(size: tuple[int, int]) -> bool:
    return size[0] > MAX_LINES or size[1] > MAX_COMPLEXITY


def test_no_function_in_the_package_is_over_60_lines_or_complexity_15() -> None:
    offenders = [
        f"{name}: {lines} lines, complexity {complexity}"
        for name, (lines, complexity) in measure().items()
        if _over((lines, complexity)) and name not in ALLOWED
    ]
    assert not offenders, (
        f"over {MAX_LINES} lines or complexity {MAX_COMPLEXITY} (split into named helpers):\n"
        + "\n".join(offenders)
    )


def test_the_allowlist_only_shrinks() -> None:
    sizes = measure()
    stale = []
    for name, allowed in ALLOWED.items():
        size = sizes.get(name)
        if size is None:
            stale.append(f"{name}: no such function any more; delete the entry")
        elif not _over(size):
            stale.append(f"{name}: now {size[0]} lines, complexity {size[1]}; delete the entry")
        elif size[0] > allowed[0] or size[1] > allowed[1]:
            stale.append(
                f"{name}: grew to {size[0]} lines, complexity {size[1]} "
                f"(allowed {allowed[0]}, {allowed[1]}); split it instead"
            )
    assert not stale, "\n".join(stale)


def test_the_measure_names_methods_and_nested_functions_with_their_own_numbers(tmp_path: Path) -> None:
    body = "".join(f"        x{i} = {i}\n" for i in range(60))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "m.py").write_text(
        "class Box:\n"
        "    def long(self):\n" + body + "        return 0\n"
        "def outer(a):\n"
        "    def inner(b):\n"
        "        return 1 if b else 2\n"
        "    return inner(a) if a else 0\n",
        encoding="utf-8",
    )
    sizes = measure(tmp_path)
    assert sizes == {
        "sub/m.py::Box.long": (62, 1),
        "sub/m.py::outer": (4, 2),
        "sub/m.py::outer.inner": (2, 2),
    }
