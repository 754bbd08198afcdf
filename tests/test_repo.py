"""Repository invariants: README.md is nbs/index.ipynb rendered, and .ci/run runs the README's commands.

nbdev renders README.md with quarto, which this project does not install; the rendering of an
all-markdown index notebook is its cells joined by blank lines. Regenerate with:
    .venv/bin/python tests/test_repo.py --write
"""
import json
import posixpath
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


LINK = re.compile(r"(\]\()([^)\s]+)(\))")  # a Markdown link's target: [text](target)


def _relative(target: str) -> bool:
    return not re.match(r"[a-z][a-z0-9+.-]*:|#|/", target)


def render_index() -> str:
    """index.ipynb's cells joined by blank lines, its links (written relative to nbs/, where it lives) rewritten
    relative to the repository root, where README.md lives."""
    cells = json.loads((ROOT / "nbs" / "index.ipynb").read_text())["cells"]
    assert all(c["cell_type"] == "markdown" for c in cells), "index.ipynb holds prose only"
    text = "\n\n".join("".join(c["source"]).strip() for c in cells) + "\n"
    return LINK.sub(lambda m: m[1] + (posixpath.normpath("nbs/" + m[2]) if _relative(m[2]) else m[2]) + m[3], text)


def readme_commands() -> list[str]:
    "The commands in the README's ```bash blocks under 'Set up and test'."
    section = (ROOT / "README.md").read_text().split("## Set up and test", 1)[1].split("\n## ", 1)[0]
    return [line for block in re.findall(r"```bash\n(.*?)```", section, re.S) for line in block.splitlines() if line.strip()]


def test_readme_is_index_rendered():
    assert (ROOT / "README.md").read_text() == render_index(), "README.md is stale: python tests/test_repo.py --write"


def test_links_resolve_from_readme_and_from_index():
    "Every relative link of README.md (from the root) and of nbs/index.ipynb (from nbs/, as JupyterLab opens it) names a file."
    index = "\n".join("".join(c["source"]) for c in json.loads((ROOT / "nbs" / "index.ipynb").read_text())["cells"])
    for name, text, base in [("README.md", (ROOT / "README.md").read_text(), ROOT), ("nbs/index.ipynb", index, ROOT / "nbs")]:
        targets = [t.split("#")[0] for t in (m[2] for m in LINK.finditer(text)) if _relative(t)]
        assert targets, f"{name}: no relative link"
        broken = [t for t in targets if not (base / t).exists()]
        assert not broken, f"{name}: links to missing files {broken}"


def test_index_maps_every_paper_notebook_to_its_command():
    "The table of paper notebooks names each one, with a link and the reproduce command typed from the repository root."
    from leaf_nb.runs import paper_notebooks
    readme = (ROOT / "README.md").read_text()
    rows = [line for line in readme.split("### Every table and figure", 1)[1].split("\n## ", 1)[0].splitlines() if line.startswith("| ")][1:]
    want = [nb.relative_to(ROOT).as_posix() for nb in paper_notebooks()]
    got = [re.search(r"\]\(([^)]+)\)", r)[1] for r in rows]
    assert sorted(got) == sorted(want), f"the table links {sorted(got)}, the paper notebooks are {sorted(want)}"
    for row, path in zip(rows, got):
        assert f"`leaf-nb reproduce {path} --profile h100`" in row, row


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


# What a reader must not meet in a committed notebook (issue 23): markup only Quarto renders, tables of 6-decimal floats
# or mostly empty cells, figures with nothing drawn, check lines clipped at the page's right edge.
QUARTO = re.compile(r'\{target="_blank"|\{style="|::: ?\{|\{\.(?:cell|callout|column)|\{#[a-z][\w-]*\}')
LONG_FLOAT = re.compile(r"^[-+−]?\d*\.\d{5,}(?:e[-+]?\d+)?$")
EMPTY_CELL = {"", "nan", "none", "<na>", "nat", "null"}
MAX_EMPTY, MAX_ASSERT = 0.10, 110
# nbconvert's HTML (lab template, 13 px monospace, 7.8 px a character) clips a code line at 114 characters in a
# 1024-px-wide window and at 162 in a 1400-px one; GitHub's notebook column is narrower: the paper notebooks and the
# tour, which readers open there, keep every code line within 100
MAX_LINE = 100


class _Tables(HTMLParser):
    "The body cells (<td>, not headers) of every HTML table in an output, as text, all together and row by row."
    def __init__(self):
        super().__init__(); self.tables, self.rows, self._cell = [], [], None
    def handle_starttag(self, tag, attrs):
        if tag == "table": self.tables.append([]); self.rows.append([])
        if tag == "tr" and self.rows: self.rows[-1].append([])
        if tag == "td" and self.tables: self._cell = []
    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            text = "".join(self._cell).strip(); self._cell = None
            self.tables[-1].append(text)
            if self.rows[-1]: self.rows[-1][-1].append(text)
    def handle_data(self, data):
        if self._cell is not None: self._cell.append(data)


def html_tables(html: str) -> list[list[str]]:
    parser = _Tables(); parser.feed(html)
    return parser.tables


# A table beside the paper (leaf_nb.show.Beside): a caption paragraph that explains its row kinds ("Rows: 'both' = ...;
# 'paper only' = ..."), then the table, whose first body column names each row's kind
BESIDE = re.compile(r"<p>([^<]*Rows: [^<]*)</p>\s*(<table.*?</table>)", re.S)


def beside_problems(html: str) -> list[str]:
    "Where a Beside caption and its table disagree on the row kinds: a kind explained that no row has, or a row of a kind left unexplained."
    import html as html_lib
    from leaf_nb.show import ROW_KINDS
    out = []
    for caption, table in BESIDE.findall(html):
        rows = sum(_rows(table), [])
        named = set(re.findall(r"'([^']+)' = ", html_lib.unescape(caption).split("Rows: ", 1)[1].split(".", 1)[0]))
        present = {r[0] for r in rows if r and r[0] in ROW_KINDS}
        if named - present: out.append(f"a Beside caption explains row kinds no row has: {sorted(named - present)}")
        if present - named: out.append(f"Beside rows of kinds its caption does not explain: {sorted(present - named)}")
    return out


def _rows(table_html: str) -> list[list[list[str]]]:
    parser = _Tables(); parser.feed(table_html)
    return [[r for r in t if r] for t in parser.rows]


def figure_problem(png: bytes) -> str | None:
    """Why a PNG shows nothing, else None: almost one colour, or an axes frame with nothing drawn inside it but text
    (n labels, annotations: shapes of fewer than 150 pixels) and thin grey lines across the whole frame (grid lines, a zero line)."""
    import io
    import numpy as np
    from PIL import Image
    from scipy import ndimage
    im = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    packed = (im[..., 0] << 16 | im[..., 1] << 8 | im[..., 2]).ravel()
    colours, counts = np.unique(packed, return_counts=True)
    top = colours[counts.argmax()]
    bg = np.array([top >> 16, (top >> 8) & 255, top & 255])
    if counts.max() / len(packed) > 0.995: return "a figure of almost one colour"
    dark = im.sum(axis=2) < 3 * 110
    h, w = dark.shape
    empty = 0
    for y in np.flatnonzero(dark.sum(axis=1) >= w // 5):  # a spine: a dark horizontal run of a fifth of the width or more,
        # with a dark vertical run going up from its left end
        row = np.flatnonzero(np.diff(np.r_[0, dark[y].astype(int), 0]))
        for x0, x1 in zip(row[::2], row[1::2]):
            if x1 - x0 < w // 5 or (y + 1 < h and dark[y + 1, x0:x1].mean() > 0.9): continue  # keep the lowest row of a thick spine
            def up(x):  # the dark run going up from (y, x)
                col = dark[:y + 1, x][::-1]
                return int(np.argmin(col)) if not col.all() else y + 1
            x0 = max(range(x0, min(x0 + 12, x1)), key=up)  # the left spine (tick marks stick out to its left)
            height = up(x0)
            if height < h // 8: continue
            box = im[y - height + 4:y - 3, x0 + 4:x1 - 4]
            ink = np.abs(box - bg).sum(axis=2) > 30
            grey = box.max(axis=2) - box.min(axis=2) < 40
            for axis in (0, 1):  # thin grey lines across the frame (grid lines, a zero line, axvline) draw no data
                full = np.r_[False, (ink & grey).mean(axis=axis) > 0.9, False]
                edges = np.flatnonzero(np.diff(full.astype(int)))
                for a, b in zip(edges[::2], edges[1::2]):
                    if b - a <= 3: ink[(slice(None), slice(a, b)) if axis == 0 else (slice(a, b), slice(None))] = False
            parts, n_parts = ndimage.label(ink)
            sizes = ndimage.sum_labels(ink, parts, range(1, n_parts + 1))
            ink = np.isin(parts, 1 + np.flatnonzero(sizes >= 150))  # letters and digits, even touching, are smaller
            if box.size and ink.mean() < 0.0005: empty += 1
    return f"{empty} axes with nothing drawn inside" if empty else None


def reader_problems(cells: list[dict],
                    max_line: int | None = None,  # the longest code line allowed; None: only assert lines are measured
                   ) -> list[str]:
    "What a reader would see go wrong in a notebook's committed cells, one line each, naming the cell."
    out = []
    for i, c in enumerate(cells):
        if c["cell_type"] != "code": continue
        for line in "".join(c["source"]).splitlines():
            if max_line is not None and len(line) > max_line:
                out.append(f"cell {i}: a code line of {len(line)} characters (at most {max_line}): {line.strip()[:60]!r}...")
            elif line.lstrip().startswith("assert") and len(line) > MAX_ASSERT:
                out.append(f"cell {i}: an assert line of {len(line)} characters (at most {MAX_ASSERT}): {line.strip()[:60]!r}...")
        for o in c.get("outputs", []):
            data = o.get("data", {})
            text = "".join(o.get("text", "")) + "".join("".join(v) for k, v in data.items() if k in ("text/markdown", "text/html", "text/plain"))
            if m := QUARTO.search(text): out.append(f"cell {i}: Quarto-only markup {m.group(0)!r} in its output")
            out += [f"cell {i}: {p}" for p in beside_problems("".join(data.get("text/html", "")))]
            for t, table in enumerate(html_tables("".join(data.get("text/html", "")))):
                long = [v for v in table if LONG_FLOAT.match(v)]
                if long: out.append(f"cell {i}: table {t} shows {len(long)} numbers with more than 4 decimals, e.g. {long[0]}")
                empty = sum(v.lower() in EMPTY_CELL for v in table)
                if table and empty / len(table) > MAX_EMPTY:
                    out.append(f"cell {i}: table {t} has {empty} of {len(table)} cells empty (NaN/None/blank; at most {MAX_EMPTY:.0%})")
            if "image/png" in data:
                import base64
                if why := figure_problem(base64.b64decode("".join(data["image/png"]))): out.append(f"cell {i}: {why}")
    return out


def _png(draw) -> str:
    import base64, io
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3))
    draw(ax)
    buf = io.BytesIO(); fig.savefig(buf, format="png"); plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def test_reader_checks_catch_each_failure():
    "Each check fires on a cell made to fail it, and stays quiet on its clean twin."
    import pandas as pd
    def cell(source="x", **data): return {"cell_type": "code", "source": source, "outputs": [{"output_type": "display_data", "data": data}]}
    def zero_bars(ax):
        ax.bar([0, 1], [0, 0]); ax.set_ylim(0, 100)
        for x in (0, 1): ax.annotate("n=0", (x, 2), rotation=90, fontsize=7)
    quarto = cell(**{"text/markdown": '[source](https://x/y.py#L3){target="_blank" style="float:right"}'})
    floats = cell(**{"text/html": pd.DataFrame({"a": [0.123456, 1.5]}).to_html()})
    nans = cell(**{"text/html": pd.DataFrame({"a": [1.0, None], "b": [float("nan"), 2.0]}).to_html()})
    empty = cell(**{"image/png": _png(zero_bars)})
    from leaf_nb.show import ROW, beside_paper
    ours = pd.DataFrame({"USMLE": [50.0, float("nan")]}, index=["Original accuracy", "Filtered accuracy"])
    paper = pd.DataFrame({"USMLE": [73.53, 86.52]}, index=ours.index)
    patched = beside_paper(ours, paper, "LEAF paper, Table 1")  # the empty row reads 'paper only'
    patched.table[ROW] = "both"  # overwritten by hand, the caption left as it was
    beside = cell(**{"text/html": patched._repr_html_()})
    unexplained = beside_paper(ours, paper, "LEAF paper, Table 1", ran=True)
    unexplained.table.loc["Filtered accuracy", ROW] = "this run only"
    unexplained = cell(**{"text/html": unexplained._repr_html_()})
    long = {"cell_type": "code", "source": "assert " + " and ".join(["x == 1"] * 20), "outputs": []}
    wide = {"cell_type": "code", "source": "y = 1\nxs = [" + ", ".join(["1"] * 32) + "]", "outputs": []}  # a line of 101
    for bad, says, width in [(quarto, "Quarto-only markup", None), (floats, "more than 4 decimals", None),
                             (nans, "2 of 4 cells empty", None), (empty, "nothing drawn", None),
                             (beside, "explains row kinds no row has: ['paper only']", None),
                             (unexplained, "its caption does not explain: ['this run only']", None),
                             (long, "an assert line of", None), (wide, "a code line of 101 characters", MAX_LINE)]:
        problems = reader_problems([{"cell_type": "markdown", "source": ""}, bad], max_line=width)
        assert len(problems) == 1 and problems[0].startswith("cell 1: ") and says in problems[0], problems
    assert reader_problems([wide]) == []  # the width is measured only where asked
    assert reader_problems([{**wide, "source": wide["source"].replace(", 1]", "]")}], max_line=MAX_LINE) == []  # 98
    clean = [cell(**{"text/markdown": "[source](https://x/y.py#L3)"}), cell(**{"text/html": pd.DataFrame({"a": [0.1235, 1.5]}).to_html()}),
             cell(**{"image/png": _png(lambda ax: ax.bar([0, 1], [40, 60]))}), cell(**{"image/png": _png(lambda ax: ax.plot([0, 1], [22, 22]))}),
             {"cell_type": "code", "source": "assert x == 1", "outputs": []},
             cell(**{"text/html": beside_paper(ours, paper, "LEAF paper, Table 1", ran=True)._repr_html_()}),
             cell(**{"text/html": beside_paper(ours, paper, "LEAF paper, Table 1")._repr_html_()})]
    assert reader_problems(clean) == []



def test_no_machine_folder_in_committed_files():
    """No tracked file names this machine's folders (the home folder, the checkout): a row, a notebook output or a
    profile written on one machine must read the same on every other. /tmp paths of a benchmark's scratch data are
    fine; they say where a run put its files, not whose machine it was."""
    import subprocess
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    needles = [str(ROOT) + "/"] + ([str(Path.home()) + "/"] if len(Path.home().parts) > 1 else [])
    bad = []
    for name in filter(None, files.split("\0")):
        path = ROOT / name
        if not path.is_file() or path.stat().st_size > 20_000_000: continue
        try: text = path.read_text()
        except UnicodeDecodeError: continue  # a binary file
        for needle in needles:
            if needle in text: bad.append(f"{name}: {needle}")
    assert not bad, bad


def test_committed_notebooks_read_well():
    """No Quarto markup, 6-decimal floats or NaN-heavy tables in outputs, no empty figure, no clipped assert line, anywhere;
    no code line over `MAX_LINE` in a paper notebook or the tour."""
    bad = {}
    for nb in sorted(NOTEBOOKS.rglob("*.ipynb")):
        if nb.name.startswith("_") or ".ipynb_checkpoints" in nb.parts: continue
        rel = nb.relative_to(NOTEBOOKS).as_posix()
        read = rel.startswith("papers/") or rel == "tutorial.ipynb"
        width = MAX_LINE if read else None
        if problems := reader_problems(json.loads(nb.read_text())["cells"], max_line=width): bad[rel] = problems
    assert not bad, "\n".join(f"{nb}: {p}" for nb, ps in bad.items() for p in ps)


# A show_doc output as nbdev renders it in a notebook: its title (the documented name), then its source link
SHOW_DOC = re.compile(r"^---\n\n(#+) ([\w.]+)\n\n\[source\]\(https://[^)#]+/blob/[^/)]+/(leaf_nb/[\w/]+\.py)#L(\d+)\)")


def show_doc_problems(cells: list[dict]) -> list[str]:
    """Each committed show_doc output that no longer says what the library holds: its source link's line is not where
    the name is defined now (nbdev's own table of definition lines, read from the module; nbdev is pinned, see
    settings.ini), or its signature, docstring or parameter table differ from show_doc's rendering of the object now.
    Both happen when a cell's code changes and the notebook's outputs are not re-executed."""
    import importlib
    from nbdev.doclinks import _get_exps
    from nbdev.showdoc import show_doc
    out = []
    for i, c in enumerate(cells):
        for o in c.get("outputs", []):
            md = "".join(o.get("data", {}).get("text/markdown", ""))
            if not (m := SHOW_DOC.match(md)): continue
            level, name, py, line = m.groups()
            now = _get_exps(py).get(name)
            if now != int(line):
                out.append(f"cell {i}: {name}'s source link points at {py} line {line}, "
                           f"{'it is defined at line ' + str(now) if now else 'which defines no such name'}")
                continue
            obj = importlib.import_module(py[:-3].replace("/", "."))
            for part in name.split("."): obj = getattr(obj, part)
            # outside a notebook show_doc's link has no line number; the line is checked above
            if show_doc(obj, title_level=len(level))._repr_markdown_() != re.sub(r"\.py#L\d+\)", ".py)", md, count=1):
                out.append(f"cell {i}: {name}'s signature or docstring differs from the library's now")
    return out


def test_show_docs_say_what_the_library_holds():
    """A reader of a show_doc output sees the definition as it is: no committed output keeps a source line, signature or
    docstring from before its module changed (re-execute the notebook: `leaf-nb execute NB`). The check fires on a link
    one line off, a name the module lacks, and a docstring edited."""
    from nbdev.doclinks import _get_exps
    from nbdev.showdoc import show_doc
    from leaf_nb.show import fmt
    at = _get_exps("leaf_nb/show.py")["fmt"]
    def cell(line, name="fmt", edit=lambda md: md):
        md = show_doc(fmt)._repr_markdown_().replace("/leaf_nb/show.py)", f"/leaf_nb/show.py#L{line})", 1)
        return {"cell_type": "code", "source": "", "outputs": [{"output_type": "display_data",
                "data": {"text/markdown": edit(md.replace("### fmt", f"### {name}", 1))}}]}
    assert show_doc_problems([cell(at)]) == []
    bad = [cell(at + 1), cell(at, name="no_such_name"), cell(at, edit=lambda md: md.replace("*", "*Formerly: ", 1))]
    assert [p.split(": ", 1)[0] for p in show_doc_problems(bad)] == ["cell 0", "cell 1", "cell 2"]
    bad = {}
    for nb in sorted(NOTEBOOKS.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in nb.parts: continue
        if problems := show_doc_problems(json.loads(nb.read_text())["cells"]): bad[nb.relative_to(NOTEBOOKS).as_posix()] = problems
    assert not bad, "\n".join(f"{nb}: {p}" for nb, ps in bad.items() for p in ps)


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


def test_every_notebook_is_tested_once():
    """The README's nbdev_test runs --flags slow over every notebook outside nbs/papers, and the paper notebooks it skips
    are exactly those `leaf-nb reproduce --all` runs in tests/test_cli.py: each notebook runs once, none is left out."""
    from nbdev.doclinks import nbglob  # what nbdev_test itself selects with these arguments
    from leaf_nb.runs import paper_notebooks
    test = readme_commands()[1]
    nbdev = test.split("&&")[0]
    assert "--flags slow" in nbdev, nbdev
    skip = re.search(r"--skip_folder_re '([^']+)'", nbdev)[1]
    tested = {p.resolve() for p in nbglob(NOTEBOOKS, skip_folder_re=skip, as_path=True)}
    everything = {p.resolve() for p in nbglob(NOTEBOOKS, as_path=True)}
    papers = {p.resolve() for p in paper_notebooks()}
    assert tested and papers and not tested & papers, sorted(tested & papers)
    assert tested | papers == everything, sorted(everything - tested - papers)
    assert "test_reproduce_all_on_the_smoke_profile" in (ROOT / "tests" / "test_cli.py").read_text()


def test_readme_starts_students_at_the_tutorial():
    readme = (ROOT / "README.md").read_text()
    assert "nbs/tutorial.ipynb" in readme.split("## ")[1] + readme.split("## ")[0], "the tutorial is linked before the first section"


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    (ROOT / "README.md").write_text(render_index())
