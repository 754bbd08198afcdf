"""The retrieval benchmark (benchmarks/retrieval.py) runs end to end on a tiny synthetic corpus: each
build and search in its own subprocess, through the same `build_index`/`load_index` path as the CLI."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_benchmark_smoke(tmp_path):
    rows_file = tmp_path / "rows.json"
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "retrieval.py"), "--sizes", "300",
                        "--queries", "30", "--dense-max-seq-length", "32", "--workdir", str(tmp_path / "work"),
                        "--json", str(rows_file), "--timeout", "300"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "| bm25 (numpy) | 300 |" in p.stdout and "| dense (flat, passages cut to 32 tokens) | 300 |" in p.stdout, p.stdout
    rows = {r["retriever"]: r for r in json.loads(rows_file.read_text())}
    bm25, dense = rows["bm25 (numpy)"], rows["dense (flat, passages cut to 32 tokens)"]
    assert bm25["hit_at_k"] >= 0.9, bm25  # each query's words come from its passage
    assert 0 <= dense["hit_at_k"] <= 1, dense  # synthetic words mean nothing to MiniLM: no accuracy to expect
    for r in (bm25, dense):
        assert r["passages"] == 300 and r["qps"] > 0 and 0 < r["peak_rss_mb"] < 4096 and r["index_mb"] > 0
    assert dense["qps_no_encoding"] > 0 and "qps_no_encoding" not in bm25
    assert not (tmp_path / "work" / "bm25_300").exists()  # indexes are removed after measuring
