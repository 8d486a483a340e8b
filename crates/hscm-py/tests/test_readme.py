"""The README's "Use" section's Python block as a newcomer runs it: each `"$PY" -c '…'`
line, from the repository's root, by the interpreter of the environment
`scripts/python-env.sh` made (the block's first line, which the test command runs
before this suite). The file-system and NBD blocks run in
`crates/hscm-cli/tests/readme.rs`."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO


def use_python_lines() -> list[str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Use\n", 1)[1].split("The volume and everything else", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    python = [b for b in blocks if "scripts/python-env.sh" in b]
    assert len(python) == 1, blocks
    lines = python[0].strip().splitlines()
    assert lines[0].startswith("PY=$(bash scripts/python-env.sh)"), lines[0]
    return lines[1:]


def test_the_use_sections_python_lines_run_as_written() -> None:
    lines = use_python_lines()
    assert len(lines) >= 2, lines
    for line in lines:
        m = re.match(r"""^"\$PY" -c '([^']*)'""", line)
        assert m, f"not a \"$PY\" -c '…' line: {line}"
        out = subprocess.run(
            [sys.executable, "-c", m.group(1)], cwd=REPO, capture_output=True, text=True, timeout=300
        )
        assert out.returncode == 0, f"{line}\n{out.stdout}\n{out.stderr}"
        assert out.stdout.strip(), f"{line} printed nothing"
