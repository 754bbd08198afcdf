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


NOTEBOOKS = ROOT / "nbs"


def _code_cells(path):
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def _outputs(cells):
    return [o for c in cells for o in c.get("outputs", [])]


def test_committed_notebooks_show_their_outputs():
    "A reader on GitHub or in JupyterLab sees results: API notebooks keep their outputs, paper notebooks a table and a figure."
    from leaf_nb.notebooks import output_problems
    api = sorted((NOTEBOOKS / "api").glob("*.ipynb"))
    papers = sorted((NOTEBOOKS / "papers").rglob("*.ipynb"))
    assert api and papers
    for nb in api:
        cells = _code_cells(nb)
        shown = [c for c in cells if c.get("outputs")]
        assert len(shown) >= 3, f"{nb.name}: only {len(shown)} code cells with outputs"
    for nb in papers:
        outs = _outputs(_code_cells(nb))
        html = ["".join(o.get("data", {}).get("text/html", "")) for o in outs]
        assert any("<table" in h for h in html), f"{nb.name}: no table in its outputs"
        assert any("image/png" in o.get("data", {}) for o in outs), f"{nb.name}: no figure in its outputs"
    tutorial = _code_cells(NOTEBOOKS / "tutorial.ipynb")
    missing = [i for i, c in enumerate(tutorial) if i > 0 and not c.get("outputs")]
    assert not missing, f"tutorial.ipynb: code cells {missing} show nothing"
    for nb in [*api, *papers, NOTEBOOKS / "tutorial.ipynb"]:
        cells = json.loads(nb.read_text())["cells"]
        problems = output_problems(cells, roots=(str(ROOT) + "/", str(Path.home()) + "/"))
        assert not problems, f"{nb.name}: {problems[:3]}"


def test_every_paper_parameter_is_explained():
    "Each line of a paper notebook's parameters cell carries a comment saying what the value is."
    for nb in sorted((NOTEBOOKS / "papers").rglob("*.ipynb")):
        cell = next(c for c in json.loads(nb.read_text())["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
        import ast
        src = "".join(cell["source"])
        lines = src.splitlines()
        bare = [lines[n.lineno - 1] for n in ast.parse(src).body
                if isinstance(n, ast.Assign) and not any("#" in lines[i] for i in range(n.lineno - 1, n.end_lineno))]
        assert not bare, f"{nb.name}: parameters without a comment: {bare}"


def test_slow_pass_names_every_notebook_with_slow_cells():
    "The README's second nbdev_test runs --flags slow over the notebooks its regular expression names: exactly those with slow cells."
    from leaf_nb.notebooks import cell_flags
    test = readme_commands()[1]
    pattern = re.search(r"--file_re '([^']+)'", test)[1]
    slow = {p.name for p in NOTEBOOKS.rglob("*.ipynb")
            if any("slow" in cell_flags("".join(c["source"])) for c in json.loads(p.read_text())["cells"] if c["cell_type"] == "code")}
    named = {p.name for p in NOTEBOOKS.rglob("*.ipynb") if re.search(pattern, p.name)}
    assert named == slow, f"the slow pass runs {sorted(named)}, the notebooks with slow cells are {sorted(slow)}"


def test_readme_starts_students_at_the_tutorial():
    readme = (ROOT / "README.md").read_text()
    assert "nbs/tutorial.ipynb" in readme.split("## ")[1] + readme.split("## ")[0], "the tutorial is linked before the first section"


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    (ROOT / "README.md").write_text(render_index())
