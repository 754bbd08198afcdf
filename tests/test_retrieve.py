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


# ---------------------------------------------------------------- leaf-nb index: --retriever tantivy, --faiss
CORPUS = ROOT / "data" / "medcorpus.jsonl"


def _tiny_corpus(path: Path, n: int = 20) -> Path:
    path.write_text("".join(json.dumps({"id": f"d{i}", "title": f"Topic {i}", "content": f"passage number {i} about subject {i % 7}"}) + "\n"
                            for i in range(n)))
    return path


def test_cli_index_tantivy(tmp_path, capsys):
    from leaf_nb.cli import main
    assert main(["index", str(CORPUS), "--retriever", "tantivy", "--out", str(tmp_path / "tv")]) == 0
    assert "(tantivy) into" in capsys.readouterr().out
    meta = json.loads((tmp_path / "tv" / "retriever.json").read_text())
    assert meta["kind"] == "tantivy" and meta["passages"] == 300 and (tmp_path / "tv" / "tantivy" / "meta.json").exists()
    assert main(["search", str(tmp_path / "tv"), "antidote for acetaminophen overdose", "-k", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["id"] == "emtox_0002"


def test_cli_faiss_flag(tmp_path, capsys, monkeypatch):
    from leaf_nb import retrieve
    from leaf_nb.cli import main
    corpus = _tiny_corpus(tmp_path / "c.jsonl")
    # --faiss names a FAISS index: an error for a retriever that has none
    assert main(["index", str(corpus), "--retriever", "bm25", "--faiss", "ivfpq", "--out", str(tmp_path / "b")]) == 2
    assert "bm25 has none" in capsys.readouterr().err
    # auto on a corpus whose vectors fit: flat, said in the output and recorded in retriever.json
    assert main(["index", str(corpus), "--retriever", "dense", "--out", str(tmp_path / "d")]) == 0
    assert "(dense, FAISS flat) into" in capsys.readouterr().out
    assert json.loads((tmp_path / "d" / "retriever.json").read_text())["settings"]["index"] == "flat"
    # auto when the vectors would not fit: IVF-PQ, which 20 passages cannot train (the error comes before any encoding)
    monkeypatch.setattr(retrieve, "available_memory", lambda: 1000)
    assert main(["index", str(corpus), "--retriever", "RRF-2", "--out", str(tmp_path / "r")]) == 2
    assert "IVF-PQ learns 2**pq_nbits = 256 codes" in capsys.readouterr().err
    # an explicit choice overrides auto, and reaches the dense member of a preset
    assert main(["index", str(corpus), "--retriever", "RRF-2", "--faiss", "hnsw", "--out", str(tmp_path / "r")]) == 0
    assert "(RRF-2, FAISS hnsw) into" in capsys.readouterr().out
    assert json.loads((tmp_path / "r" / "members" / "1-dense" / "retriever.json").read_text())["settings"]["index"] == "hnsw"


def test_ivfpq_streams_a_corpus_bigger_than_its_training_sample(tmp_path, monkeypatch):
    """IVF-PQ trains on a sample encoded on its own, then adds every passage chunk by chunk; with a stub encoder
    (random unit vectors from each text's hash, so no model is needed) the index holds every passage once, and a
    passage's own vector finds it."""
    import hashlib
    import numpy as np
    from leaf_nb import retrieve

    class Stub:
        max_seq_length = 16
        def get_embedding_dimension(self): return 32
        def encode(self, texts, **_):
            v = np.stack([np.random.default_rng(int(hashlib.sha1(t.encode()).hexdigest()[:8], 16)).normal(size=32) for t in texts])
            return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    monkeypatch.setattr(retrieve, "load_encoder", lambda *a, **k: Stub())
    monkeypatch.setattr(retrieve, "encoder_identity", lambda *a, **k: "stub")
    monkeypatch.setattr(retrieve, "ivf_settings", lambda kind, n, nlist=None: (4, 300))  # train on 300 of 1,000
    calls = []
    encode = retrieve.Dense._encode_passages
    monkeypatch.setattr(retrieve.Dense, "_encode_passages", lambda self, rows=None: calls.append(rows) or encode(self, rows))
    docs = [{"id": f"p{i}", "content": f"passage {i}"} for i in range(1000)]
    d = retrieve.Dense(docs, index="ivfpq", batch_size=8, progress=False)   # chunks of 256 passages
    assert d.index.ntotal == 1000 and d.settings["pq_m"] == 4 and d.settings["nlist"] == 4
    assert len(calls[0]) == 300 and calls[1] is None   # the sample, then every passage in order
    vecs = np.concatenate(list(encode(d, [5, 500, 999])))
    d.index.nprobe = 4
    assert [r for r, _ in (x[0] for x in d.search_vectors(vecs, 1))] == [5, 500, 999]


def test_bm25_engines_benchmark_smoke(tmp_path):
    "benchmarks/bm25_engines.py end to end on 400 passages, bm25s against tantivy (Lucene itself is tested through `--retriever lucene`)."
    out = tmp_path / "rows.csv"
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bm25_engines.py"), "--sizes", "400", "--engines", "bm25s", "tantivy",
                        "--queries", "40", "--warmup", "5", "--workdir", str(tmp_path / "work"), "--csv", str(out), "--timeout", "300", "--busy-sample-s", "0.2"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "tantivy / bm25s at 400 passages:" in p.stdout, p.stdout
    import csv
    rows = {r["engine"]: r for r in csv.DictReader(out.open())}
    assert set(rows) == {"bm25s", "tantivy"}
    assert float(rows["tantivy"]["overlap_at_10_vs_bm25s"]) >= 0.8, rows  # the same words, BM25 with the same k1 and b
    for r in rows.values():
        assert float(r["hit_at_10"]) >= 0.9 and float(r["qps"]) > 0 and 0 < float(r["build_peak_gb"]) < 4 and r["load_avg_1min"]
    assert not (tmp_path / "work" / "tantivy_400").exists()  # indexes are removed after measuring


def test_dense_indexes_benchmark_smoke(tmp_path):
    "benchmarks/dense_indexes.py on 3,000 synthetic vectors: flat is its own reference; HNSW and IVF-PQ are measured against it."
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "dense_indexes.py"), "--n", "3000", "--dim", "64", "--queries", "50",
                        "--workdir", str(tmp_path), "--csv", str(tmp_path / "rows.csv"), "--busy-sample-s", "0.2"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    import csv
    rows = {r["index"]: r for r in csv.DictReader((tmp_path / "rows.csv").open())}
    assert set(rows) == {"flat", "hnsw", "ivfpq"} and float(rows["flat"]["recall_at_10"]) == 1.0
    assert float(rows["hnsw"]["recall_at_10"]) > 0.9 and 0 < float(rows["ivfpq"]["recall_at_10"]) <= 1
    assert float(rows["ivfpq"]["index_mb"]) < float(rows["flat"]["index_mb"]) / 4 and rows["ivfpq"]["pq_m"] == "8"


# ---------------------------------------------------------------- MedRAG's RRF-4 (issue 22)

def _medrag_stand_ins(folder: Path) -> Path:
    "A folder holding MedRAG's four encoder folders, each the embedded MiniLM standing in (a link to it)."
    from leaf_nb.retrieve import MEDRAG_FOLDERS, embedded_encoder
    folder.mkdir()
    for name in MEDRAG_FOLDERS.values(): (folder / name).symlink_to(embedded_encoder(), target_is_directory=True)
    return folder


def test_cli_index_builds_medrags_rrf4_from_a_folder_of_its_encoders(tmp_path, capsys):
    # MedRAG's RRF-4 (Xiong et al. 2024): BM25, Contriever, SPECTER and MedCPT fused by RRF with rrf_k = 100; the CLI's
    # --encoder names the folder holding the four encoders (the real ones are not on this machine: MiniLM stands in)
    from leaf_nb.cli import main
    from leaf_nb.retrieve import load_index
    corpus, encoders = _tiny_corpus(tmp_path / "c.jsonl"), _medrag_stand_ins(tmp_path / "encoders")
    assert main(["index", str(corpus), "--retriever", "RRF-4", "--encoder", str(encoders), "--out", str(tmp_path / "r4")]) == 0
    assert "(RRF-4, FAISS flat) into" in capsys.readouterr().out
    r = load_index(tmp_path / "r4")
    assert (r.name, r.k0, [m.kind for m in r.members]) == ("RRF-4", 100, ["bm25", "dense", "dense", "dense"])
    dense = {m.settings["passage_format"]: m for m in r.members[1:]}
    assert set(dense) == {"contriever", "sep", "pair"} and dense["sep"].settings["metric"] == "l2"
    assert dense["pair"].settings["query_encoder"] == "MedCPT-Query-Encoder" and not any(m.normalize for m in dense.values())
    assert "d13" in [h.id for h in r.search(["Topic 13: passage number 13"], k=3)[0]]
    assert r.depth == 100 and sorted(p.name for p in (tmp_path / "r4" / "members").iterdir()) == ["0-bm25", "1-dense", "2-dense", "3-dense"]
    assert [m.pooling for m in r.members[1:]] == ["mean", "cls", "cls"]  # Contriever mean, SPECTER and MedCPT first-token
    fused = {}  # MedRAG's merge: 1 / (rrf_k + rank) summed over the four members, rrf_k = 100
    for m in r.members:
        for rank, (row, _) in enumerate(m._search(["Topic 13"], len(r.corpus))[0], 1): fused[row] = fused.get(row, 0.0) + 1 / (100 + rank)
    assert [h.id for h in r.search(["Topic 13"], k=4)[0]] == [r.corpus.id(x) for x in sorted(fused, key=lambda x: -fused[x])[:4]]
    # without the encoders it stops before reading a passage, naming what it needs
    assert main(["index", str(corpus), "--retriever", "RRF-4", "--out", str(tmp_path / "none")]) == 2
    assert "needs its encoders" in capsys.readouterr().err and not (tmp_path / "none" / "members").exists()


def test_medcpt_queries_go_through_the_query_encoder(tmp_path):
    # MedCPT has two encoders: passages by the article encoder, queries by the query encoder. A second encoder whose
    # weights differ (MiniLM with its embedding table scaled) must be the one that embeds the queries, also after a reload
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer
    from leaf_nb.retrieve import MEDRAG_DENSE, Dense, embedded_encoder, load_index
    other = tmp_path / "query_encoder"
    model, tok = AutoModel.from_pretrained(embedded_encoder()), AutoTokenizer.from_pretrained(embedded_encoder())
    with torch.no_grad(): model.embeddings.word_embeddings.weight.mul_(1.5)
    model.save_pretrained(other); tok.save_pretrained(other)
    d = Dense(_tiny_corpus(tmp_path / "c.jsonl"), encoder=embedded_encoder(), query_encoder=other, progress=False, **MEDRAG_DENSE["medcpt"])

    def cls(m, text):
        with torch.no_grad(): return m(**tok([text], return_tensors="pt")).last_hidden_state[0, 0].numpy()
    q = d.encode_queries(["subject 3"])[0]
    assert np.allclose(q, cls(model.eval(), "subject 3"), atol=1e-4)
    assert not np.allclose(q, cls(AutoModel.from_pretrained(embedded_encoder()).eval(), "subject 3"), atol=1e-3)
    back = load_index(d.save(tmp_path / "medcpt"))
    assert np.allclose(back.encode_queries(["subject 3"])[0], q, atol=1e-5)
    with torch.no_grad(): model.embeddings.word_embeddings.weight.mul_(2.0)
    model.save_pretrained(other)  # the query encoder changed after the build: refused, naming it
    import pytest
    with pytest.raises(ValueError, match="MedCPT-Query-Encoder|query_encoder"):
        load_index(tmp_path / "medcpt").encode_queries(["x"])
