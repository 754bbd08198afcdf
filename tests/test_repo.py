"""Repository invariants: README.md is nbs/index.ipynb rendered, and .ci/run runs the README's commands.

nbdev renders README.md with quarto, which this project does not install; the rendering of an
all-markdown index notebook is its cells joined by blank lines. Regenerate with:
    .venv/bin/python tests/test_repo.py --write
"""
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def render_index() -> str:
    cells = json.loads((ROOT / "nbs" / "index.ipynb").read_text())["cells"]
    assert all(c["cell_type"] == "markdown" for c in cells), "index.ipynb holds prose only"
    return "\n\n".join("".join(c["source"]).strip() for c in cells) + "\n"


def readme_commands() -> list[str]:
    "The commands in the README's ```bash blocks under 'Set up and test'."
    section = (ROOT / "README.md").read_text().split("## Set up and test", 1)[1].split("\n## ", 1)[0]
    return [line for block in re.findall(r"```bash\n(.*?)```", section, re.S) for line in block.splitlines() if line.strip()]


def test_readme_is_index_rendered():
    assert (ROOT / "README.md").read_text() == render_index(), "README.md is stale: python tests/test_repo.py --write"


def test_ci_runs_readme_commands_verbatim():
    setup, test = readme_commands()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert setup in ci and test in ci
    assert ci.index(setup) < ci.index(test)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    (ROOT / "README.md").write_text(render_index())
