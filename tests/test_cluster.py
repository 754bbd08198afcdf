"""Paper notebooks as cluster jobs through submitit, tested with its LocalExecutor (each job a real process, as on a Slurm
node): two smoke notebooks, each on a cache of its own, merged into one after (twice: the second adds nothing), the
submitting machine's own cache untouched, each job's log saying where its model calls stand as it runs; a job that stops
at an error is one line and its cache is merged too; and a submission whose data is missing stops before anything is
queued."""
import json
import re
from pathlib import Path

import pytest
import submitit

from leaf_nb.cache import Cache
from leaf_nb.cluster import NotReady, collect, merge_caches, submit

ROOT = Path(__file__).resolve().parents[1]
TABLE1 = ROOT / "nbs" / "papers" / "leaf" / "table1_filtered_accuracy.ipynb"
TABLE7 = ROOT / "nbs" / "papers" / "leaf" / "table7_worked_example.ipynb"


def keys(path: Path) -> set:
    return {k for (k,) in Cache(path)._conn().execute("SELECT key FROM entries")}


def test_two_smoke_notebooks_as_jobs_then_one_cache(tmp_path, monkeypatch):
    mine = tmp_path / "workstation" / "cache.sqlite"
    monkeypatch.setenv("LEAF_NB_CACHE", str(mine))  # the submitting machine's default cache: the jobs must not write to it
    executor = submitit.LocalExecutor(folder=tmp_path / "logs")
    executor.update_parameters(timeout_min=15)
    jobs = submit([TABLE1, TABLE7], executor, tmp_path / "jobs", overrides={"out_dir": str(tmp_path / "figures")},
                  progress_every=0.5)
    assert [j.cache for j in jobs] == [tmp_path / "jobs" / nb.stem / "cache.sqlite" for nb in (TABLE1, TABLE7)]
    done = collect(jobs, into=tmp_path / "merged.sqlite")
    assert done.state.tolist() == ["done", "done"], done.result.tolist()
    for j, nb in zip(jobs, (TABLE1, TABLE7)):
        assert j.job.job_id and Path(j.job.paths.stdout).exists()  # a real process with its own log
        assert (tmp_path / "figures" / "smoke" / f"{nb.stem}.provenance.json").exists()
        # where its model calls stood went to the job's own log as it ran (every half second here), then its totals:
        # no model called, the record answered
        log = Path(j.job.paths.stderr).read_text()
        assert re.search(rf"leaf-nb: {nb.stem}: \S+ min in: .+ new calls", log), log[-2000:]
        assert re.search(rf"leaf-nb: {nb.stem}: 0 model calls made, [1-9][\d,]* read from the cache", log), log[-2000:]
    own = [keys(j.cache) for j in jobs]
    assert all(own) and keys(tmp_path / "merged.sqlite") == own[0] | own[1]
    assert done.entries.tolist() == [len(k) for k in own] and done.added.sum() == len(own[0] | own[1])
    assert [r["added"] for r in merge_caches([j.cache for j in jobs], into=tmp_path / "merged.sqlite")] == [0, 0]  # idempotent
    ops = {json.loads(r)["op"] for (r,) in Cache(tmp_path / "merged.sqlite")._conn().execute("SELECT request FROM entries")}
    assert ops == {"search"}  # the smoke runs replay their model calls from the records; their searches are cached
    assert not mine.exists()


def test_a_failed_job_is_one_line_and_a_missing_index_stops_the_submission(tmp_path):
    executor = submitit.LocalExecutor(folder=tmp_path / "logs")
    nowhere = tmp_path / "no-index"
    with pytest.raises(NotReady, match=r"✘ index\s+" + str(nowhere)):  # checked before anything is queued
        submit([TABLE1], executor, tmp_path / "jobs", overrides={"index": str(nowhere)})
    assert not (tmp_path / "jobs").exists()
    jobs = submit([TABLE1], executor, tmp_path / "jobs", overrides={"index": str(nowhere), "out_dir": str(tmp_path / "figures")}, check=False)
    row = collect(jobs, into=tmp_path / "merged.sqlite").iloc[0]
    assert row.state == "failed"
    assert row.result.startswith("leaf_nb.runs.NotebookError: table1_filtered_accuracy.ipynb: cell [")
    assert f"FileNotFoundError: {nowhere} holds no index (no retriever.json)" in row.result
