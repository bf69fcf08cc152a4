"""The runner's file-command rules, re-implemented for tests (actions/runner FileCommandManager)."""

from __future__ import annotations


def runner_outputs(text: str) -> dict[str, str]:
    """Parse GITHUB_OUTPUT as actions/runner's FileCommandManager does (name=value or heredoc)."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        eq, heredoc = line.find("="), line.find("<<")
        if eq >= 0 and (heredoc < 0 or eq < heredoc):
            out[line[:eq]] = line[eq + 1 :]
            continue
        assert heredoc > 0, f"invalid format: {line!r}"
        name, delimiter = line[:heredoc], line[heredoc + 2 :]
        assert delimiter, "empty delimiter"
        value_lines = []
        while True:
            assert i < len(lines), f"Matching delimiter not found {delimiter!r}"
            candidate = lines[i]
            i += 1
            if candidate == delimiter:
                break
            value_lines.append(candidate)
        out[name] = "\n".join(value_lines)
    return out
