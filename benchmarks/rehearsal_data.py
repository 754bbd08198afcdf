"""Seeded synthetic data for the rehearsal profile (`profiles/rehearsal.yaml`): every data set a paper notebook reads, in
its real published format and at its real size, so that `leaf-nb reproduce --profile rehearsal` takes the path a
workstation takes, on this machine, with stand-in models.

    python benchmarks/rehearsal_data.py --out /tmp/rehearsal/data --seed 0 --passages 1000000

writes (nothing here is committed; the same seed and sizes give the same bytes):

    MIRAGE/benchmark.json           MIRAGE's layout {dataset: {qid: {question, options, answer[, PMID]}}} with its five
                                    datasets at their true counts: medqa 1,273 (A-D), medmcqa 4,183 (A-D), pubmedqa 500
                                    (A-C yes/no/maybe, a PMID list), bioasq 618 (A-B yes/no, a PMID list), mmlu 1,089
                                    (A-D) = 7,663 (MIRAGE paper, Xiong et al. 2024, Table 1)
    MedQA/questions/US/test.jsonl   MedQA-USMLE's five-option US test set: 1,273 lines {question, answer, options A-E,
                                    meta_info, answer_idx}, among them the LEAF paper's six Figure 8-9 questions (its
                                    worked example is sample 1) with their options as the paper prints them
    RAWFC/{train,val,test}/*.json   CofCED's per-claim JSON, one file per claim: 1,612/200/200 claims, labels true 695 /
                                    half 671 / false 646 (FFRR paper, §6.1.1 and Table 1)
    LIAR-RAW/{train,val,test}.json  CofCED's per-claim JSON lists: 10,065/1,274/1,251 claims, labels true 2,021 /
                                    mostly-true 2,439 / half-true 2,592 / barely-true 2,057 / false 2,465 / pants-fire 1,012
    medrag/<tier>/chunk/*.jsonl     MedRAG's corpus schema {id, title, content, contents} (PubMed snippets also carry
                                    PMID), `--passages` in all, split over Textbooks, StatPearls, PubMed and Wikipedia in
                                    MedCorp's proportions (125,847 / 301,202 / 23.9M / 29.9M snippets, MedRAG's dataset cards)
    agreement/factcheck_bench.jsonl Factcheck-Bench's stance subtask layout (subtask3_claim_evidence_stance.jsonl): compact
                                    lines {claim, evidence, stance}, 661 claims x 5 evidence texts = 3,305 (the count
                                    data/agreement/README.md quotes from its paper); stances spread over its four (our choice)
    agreement/healthfc.csv          HealthFC's CSV (healthFC_annotated.csv's columns, en_top_sentences layout, UTF-8 with
                                    a BOM): 750 claims (HealthFC paper), labels 0/1/2 spread evenly (our choice)
    manifest.json                   the arguments and the counts written; a second run with the same arguments reuses it

The agreement files come from their own seeded stream (seed + 1), written beside older data that lacks them, so
adding them changed none of the other files' bytes.

Reports per claim and sentences per report follow FFRR's Table 1, which counts them *after* its leak filter removed
4.7 % (RAWFC) and 2.4 % (LIAR-RAW) of the documents (§6.1.1): so each claim gets its Table 1 average divided by
(1 - that share), and that share of reports is written as a leak (a fact-check site's domain, or a sentence stating a
verdict) that `leaf_nb.ffrr.drop_leaks` removes. After the filter the averages are Table 1's: 20.0 documents of 7.1
sentences per RAWFC claim, 12.0 of 5.5 per LIAR-RAW claim.

Text: `benchmarks/retrieval.py`'s generator (Zipf-Mandelbrot content words over a vocabulary that grows by Heaps'
law, 40 % function words, 100-200 words a passage). PubMedQA* and BioASQ questions are written from words of the
PubMed snippets they cite (their PMID lists), so some searches find their source article, as the leakage notebook
asks. Everything is streamed: memory stays at one chunk (about 10,000 passages) whatever `--passages` is.
`--fraction F` scales every question and claim count (for tests); the corpus size is `--passages`.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from retrieval import STOPWORDS, heaps_vocab, vocabulary, zipf_p  # noqa: E402  (benchmarks/retrieval.py, the corpus generator)

VERSION = 2  # bump when the output changes for the same arguments

MIRAGE_COUNTS = {"medqa": 1273, "medmcqa": 4183, "pubmedqa": 500, "bioasq": 618, "mmlu": 1089}  # MIRAGE paper, Table 1
MEDQA_US_TEST = 1273  # MedQA-USMLE's US test set (Jin et al. 2021); MIRAGE's medqa is the same questions with four options
RAWFC = {"splits": {"train": 1612, "val": 200, "test": 200}, "labels": {"true": 695, "half": 671, "false": 646},
         "docs": 20.0, "sentences": 7.1, "leak_share": 0.047}  # FFRR paper, §6.1.1 and Table 1
LIAR_RAW = {"splits": {"train": 10065, "val": 1274, "test": 1251},
            "labels": {"true": 2021, "mostly-true": 2439, "half-true": 2592, "barely-true": 2057, "false": 2465, "pants-fire": 1012},
            "docs": 12.0, "sentences": 5.5, "leak_share": 0.024}  # FFRR paper, §6.1.1 and Table 1
MEDCORP = {"textbooks": 125_847, "statpearls": 301_202, "pubmed": 23_898_701, "wikipedia": 29_913_202}  # MedRAG's dataset cards (Hugging Face hub, MedRAG/<corpus>)
CHUNK = 10_000  # passages generated (and held) at once

# The LEAF paper's six sample questions (appendix, Figures 8-9), quoted with their choices in the paper's order; sample 1
# is also the worked example of its appendix (Table 7), whose gold option the paper states: "(E) Surgical pinning of the
# femoral head (Correct)". The paper does not print the gold options of samples 2-6 (its Figure 7 marks them in gold,
# which the text copy cannot show); the `gold` letters below are our reading of the medicine, used only by the rehearsal.
LEAF_SAMPLES = [
    {"sample": 1, "gold": "E", "question": "A 13-year-old boy presents to the emergency department with severe knee, hip, and groin pain. The patient has a past medical history notable only for obesity and asthma. His temperature is 98°F (36.7°C), blood pressure is 124/65 mmHg, pulse is 128/min, respirations are 14/min, and oxygen saturation is 99% on room air. Physical exam is notable for an inability of the patient to bear weight on his left leg and limited range of motion of the left hip. Which of the following is the best management for this patient?",
     "options": ["Casting and crutches", "Immobilization of the hip in a Pavlik harness", "Supportive therapy and observation", "Surgical drainage of the hip", "Surgical pinning of the femoral head"]},
    {"sample": 2, "gold": "E", "question": "A 36-year-old nursing home worker presents to the clinic with the complaints of breathlessness, cough, and night sweats for the past 2 months. She further expresses her concerns about the possibility of contracting tuberculosis as one of the patients under her care is being treated for tuberculosis. A PPD skin test is done and reads 11 mm on day 3. Chest X-ray demonstrates a cavitary lesion in the right upper lobe. The standard anti-tuberculosis medication regimen is started. At a follow-up appointment 3 months later the patient presents with fatigue. She has also been experiencing occasional dizziness, weakness, and numbness in her feet. Physical exam is positive for conjunctival pallor. Lab work is significant for a hemoglobin level of 10 g/dL and mean corpuscular volume of 68 fl. What is the most likely cause of her current symptoms?",
     "options": ["Decreased methionine synthesis", "Inhibition of ferrochelatase", "Increased homocysteine degradation", "Increased GABA production", "Decreased ALA synthesis"]},
    {"sample": 3, "gold": "B", "question": "A 72-year-old woman is admitted to the hospital for treatment of unstable angina. Cardiac catheterization shows occlusion that has caused a 50% reduction in the diameter of the left circumflex artery. Resistance to blood flow in this vessel has increased by what factor relative to a vessel with no occlusion?",
     "options": ["64", "16", "8", "4", "32"]},
    {"sample": 4, "gold": "A", "question": "A 49-year-old woman is brought to the emergency department with progressive dyspnea and cough which she developed approx. 8 hours ago. 2 weeks ago she had a prophylactic ovariectomy because of a family history of ovarian cancer. She is known to have type 2 diabetes mellitus and stage 1 hypertension, but she does not take her antihypertensives because she is not concerned about her blood pressure. Also, she has a history of opioid abuse. She takes metformin 1000 mg and aspirin 81 mg. She has been smoking 1 pack of cigarettes per day for 22 years. Her vital signs are as follows: blood pressure 155/80 mm Hg, heart rate 101/min, respiratory rate 31/min, and temperature 37.9C (100.2F). Blood saturation on room air is 89%. On examination, the patient is dyspneic and acrocyanotic. Lung auscultation reveals bilateral rales over the lower lobes. A cardiac examination is significant for S2 accentuation best heard in the second intercostal space at the left sternal border and S3 presence. There is no leg edema. Neurological examination is within normal limits. Arterial blood gases analysis shows the following results: pH 7.49 PaO2 58 mm Hg PaCO2 30 mm Hg HCO3- 22 mEq/L Based on the given data, which of the following could cause respiratory failure in this patient?",
     "options": ["Increased alveolar dead space due to absent perfusion of certain alveoli", "Ischemia of the medullary respiratory center neurons", "Alveolar fibrosis", "Depression of the respiratory center via opioid receptors activation", "Decreased V/Q due to bronchial obstruction"]},
    {"sample": 5, "gold": "B", "question": "While in the ICU, a 62-year-old male undergoes placement of a Swan-Ganz catheter to evaluate his right heart pressures. All pressures are found to be within normal limits, and the cardiology fellow records a pulmonary wedge pressure of 10 mmHg. Which of the following are normal values for the pressures that will be obtained from this patient’s right ventricle?",
     "options": ["25/10 mmHg", "25/5 mmHg", "10/0 mmHg", "100/5 mmHg", "100/70 mmHg"]},
    {"sample": 6, "gold": "A", "question": "A previously healthy 6-year-old boy is brought to the physician because of generalized malaise and a palpable swelling in the left axilla. The parents report that 2 weeks ago, his daycare group visited an animal shelter, after which he developed a rash on the left hand. His temperature is 38.5°C (101.3°F). Physical examination shows three linear crusts on an erythematous background on the dorsum of the left hand. There is tender left-sided axillary and cervical lymphadenopathy. Histopathologic examination of an axillary lymph node shows necrotizing granulomas. The most likely causal organism of this patient’s clinical findings is also involved in the pathogenesis of which of the following conditions?",
     "options": ["Bacillary angiomatosis", "Burkitt lymphoma", "Condylomata lata", "Brucellosis", "Bubonic plague"]},
]
LEAF_SAMPLE_LINES = (17, 212, 455, 701, 930, 1188)  # where they sit in test.jsonl (our choice: spread out, none among the first six)

LETTERS = "ABCDE"
STEMS = ["Which of the following is the most appropriate next step in management?", "Which of the following is the most likely diagnosis?",
         "Which of the following is the most likely cause of these findings?", "Which of the following is the best initial treatment?",
         "Which of the following mechanisms best explains this effect?"]
FACT_CHECK_DOMAINS = ("snopes.com", "politifact.com", "factcheck.org")  # leaf_nb.ffrr.FACT_CHECK_SITES: what drop_leaks removes


class Text:
    "Seeded words with the statistics of `benchmarks/retrieval.py`'s corpora (one vocabulary for passages, questions and claims)."
    def __init__(self, passages: int, seed: int):
        self.rng = np.random.default_rng(seed)
        self.vocab = np.array(vocabulary(heaps_vocab(max(passages, 10_000)), seed))
        self.stop = np.array(STOPWORDS)
        self.p_vocab, self.p_stop = zipf_p(len(self.vocab), offset=20.0), zipf_p(len(self.stop), 1.0)
        self.cdf_vocab, self.cdf_stop = np.cumsum(self.p_vocab), np.cumsum(self.p_stop)

    def content(self, n: int) -> np.ndarray:
        return self.vocab[np.minimum(np.searchsorted(self.cdf_vocab, self.rng.random(n)), len(self.vocab) - 1)]

    def words(self, n: int) -> list[str]:
        "`n` words of running text: 40 % function words, the rest content words."
        content = self.content(n)
        function = self.stop[np.minimum(np.searchsorted(self.cdf_stop, self.rng.random(n)), len(self.stop) - 1)]
        return np.where(self.rng.random(n) < 0.4, function, content).tolist()

    def sentences(self, words: list[str], lo: int = 12, hi: int = 25) -> list[str]:
        "The words cut into sentences of `lo`-`hi` words, each capitalised and ended with a full stop."
        out, s = [], 0
        cuts = self.rng.integers(lo, hi + 1, size=len(words) // lo + 2)
        for c in cuts:
            if s >= len(words): break
            w = words[s:s + int(c)]
            out.append(w[0].capitalize() + (" " + " ".join(w[1:]) if len(w) > 1 else "") + ".")
            s += int(c)
        return out

    def phrase(self, lo: int, hi: int) -> str:
        return " ".join(self.content(int(self.rng.integers(lo, hi + 1))).tolist())


# ------------------------------------------------------------------ MedRAG corpus
def tier_sizes(passages: int) -> dict[str, int]:
    "`passages` split over MedCorp's four corpora in their proportions (each at least 1)."
    total = sum(MEDCORP.values())
    sizes = {t: max(1, round(passages * n / total)) for t, n in MEDCORP.items()}
    sizes["wikipedia"] += passages - sum(sizes.values())
    return sizes


def _passage_id(tier: str, i: int, chunk_no: int) -> str:
    "Ids in each MedRAG corpus's own style."
    if tier == "textbooks": return f"Textbook{chunk_no:02d}_{i}"
    if tier == "statpearls": return f"article-{10000 + i // 8}_{i % 8}"
    if tier == "pubmed": return f"pubmed23n{chunk_no + 1:04d}_{i % CHUNK}"
    return f"wiki20220301en{chunk_no:03d}_{i}"


def pmid_of(i: int) -> str:
    "The PMID of the i-th synthetic PubMed snippet: unique, eight digits, not in order of i (as real PMIDs are not in chunk order)."
    return str(10_000_000 + (i * 7_919_993) % 89_000_000)


def write_corpus(root: Path, text: Text, passages: int, sources: set[int], progress) -> dict[int, list[str]]:
    "Stream the four tiers' chunk files; return the words of the PubMed snippets whose indexes are in `sources`."
    kept: dict[int, list[str]] = {}
    for tier, n in tier_sizes(passages).items():
        folder = root / tier / "chunk"
        folder.mkdir(parents=True, exist_ok=True)
        for chunk_no, start in enumerate(range(0, n, CHUNK)):
            m = min(CHUNK, n - start)
            lengths = text.rng.integers(100, 201, size=m)
            words = text.words(int(lengths.sum()))
            titles = text.content(3 * m).reshape(m, 3).tolist()
            lines, pos = [], 0
            for j in range(m):
                i = start + j
                w = words[pos:pos + lengths[j]]; pos += int(lengths[j])
                title = " ".join(titles[j]).capitalize()
                content = " ".join(text.sentences(w))
                rec = {"id": _passage_id(tier, i, chunk_no), "title": title, "content": content, "contents": f"{title}. {content}"}
                if tier == "pubmed":
                    rec["PMID"] = pmid_of(i)
                    if i in sources: kept[i] = w
                lines.append(json.dumps(rec, ensure_ascii=False))
            name = f"pubmed23n{chunk_no + 1:04d}.jsonl" if tier == "pubmed" else f"{tier}_{chunk_no:04d}.jsonl"
            (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
            progress(tier, start + m, n)
    return kept


# ------------------------------------------------------------------ questions
def _letters(rng, n: int, k: int) -> list[str]:
    "Gold letters balanced over the first `k` options, in random order."
    out = [LETTERS[i % k] for i in range(n)]
    rng.shuffle(out)
    return out


def _vignette(text: Text, words: int) -> str:
    return " ".join(text.sentences(text.words(words), 10, 22))


def _from_source(text: Text, source: list[str], lo: int, hi: int) -> str:
    "A yes/no question from consecutive words of a source snippet (so a search can find the article it cites)."
    n = int(text.rng.integers(lo, hi + 1))
    at = int(text.rng.integers(0, max(1, len(source) - n)))
    return "Does " + " ".join(source[at:at + n]) + "?"


def mirage(text: Text, counts: dict[str, int], sources: dict[int, list[str]], pubmed_order: list[int]) -> dict:
    "MIRAGE's benchmark.json, dataset by dataset in its key order."
    rng, out = text.rng, {}
    src = iter(pubmed_order)
    for name, n in counts.items():
        recs = {}
        k = {"medqa": 4, "medmcqa": 4, "mmlu": 4, "pubmedqa": 3, "bioasq": 2}[name]
        gold = _letters(rng, n, k)
        for q in range(n):
            if name in ("pubmedqa", "bioasq"):
                i = next(src)
                question = _from_source(text, sources[i], 8, 14)
                options = {"A": "yes", "B": "no", "C": "maybe"} if name == "pubmedqa" else {"A": "yes", "B": "no"}
                cited = [pmid_of(i)] + ([pmid_of(int(rng.integers(0, 10 ** 6)))] if name == "bioasq" and rng.random() < 0.5 else [])
                rec = {"question": question, "options": options, "answer": gold[q], "PMID": cited}
                qid = pmid_of(i) if name == "pubmedqa" else f"{int(rng.integers(16 ** 11, 16 ** 12)):012x}{q:012x}"
                if qid in recs: qid = f"{qid}-{q}"  # a corpus smaller than the questions shares sources
            else:
                words = {"medqa": (90, 160), "medmcqa": (8, 20), "mmlu": (12, 45)}[name]
                body = _vignette(text, int(rng.integers(*words)))
                question = f"{body} {STEMS[q % len(STEMS)]}" if name == "medqa" else body.rstrip(".") + ":" if name == "medmcqa" else body
                rec = {"question": question, "options": {LETTERS[j]: text.phrase(1, 5).capitalize() for j in range(k)}, "answer": gold[q]}
                qid = {"medqa": f"test-{q:05d}", "mmlu": f"{['anatomy', 'clinical_knowledge', 'college_medicine', 'medical_genetics', 'professional_medicine', 'college_biology'][q % 6]}-{q // 6:03d}",
                       "medmcqa": f"{int(rng.integers(0, 2 ** 63)):016x}-{q:04x}-{int(rng.integers(0, 2 ** 31)):08x}"}[name]
            recs[qid] = rec
        out[name] = recs
    return out


def medqa_us(text: Text, n: int) -> list[dict]:
    "MedQA-USMLE's US test lines (five options), the LEAF paper's six samples at `LEAF_SAMPLE_LINES` where they fit."
    rng = text.rng
    gold = _letters(rng, n, 5)
    at = {line: s for line, s in zip(LEAF_SAMPLE_LINES, LEAF_SAMPLES) if line < n} or {min(n - 1, i): s for i, s in enumerate(LEAF_SAMPLES[:n])}
    lines = []
    for q in range(n):
        if q in at:
            s = at[q]
            options = dict(zip(LETTERS, s["options"]))
            lines.append({"question": s["question"], "answer": options[s["gold"]], "options": options, "meta_info": "step1",
                          "answer_idx": s["gold"]})
            continue
        options = {LETTERS[j]: text.phrase(1, 5).capitalize() for j in range(5)}
        lines.append({"question": f"{_vignette(text, int(rng.integers(90, 160)))} {STEMS[q % len(STEMS)]}", "answer": options[gold[q]],
                      "options": options, "meta_info": "step1" if rng.random() < 0.5 else "step2&3", "answer_idx": gold[q]})
    return lines


# ------------------------------------------------------------------ RAWFC and LIAR-RAW
def apportion(total: int, weights: dict[str, int]) -> dict[str, int]:
    "`total` split in proportion to `weights` by largest remainders (the counts themselves when `total` is their sum)."
    w = sum(weights.values())
    exact = {k: total * v / w for k, v in weights.items()}
    out = {k: int(x) for k, x in exact.items()}
    for k in sorted(exact, key=lambda k: out[k] - exact[k])[:total - sum(out.values())]: out[k] += 1
    return out


def _split_labels(rng, splits: dict[str, int], labels: dict[str, int]) -> dict[str, list[str]]:
    "Each split's labels: the label counts dealt out over the splits in proportion, shuffled."
    pool = [l for l, n in labels.items() for _ in range(n)]
    rng.shuffle(pool)
    out, s = {}, 0
    for split, n in splits.items():
        out[split] = pool[s:s + n]; s += n
    return out


def _report(text: Text, dataset: str, rid: int, sentences: float, leak: bool) -> dict:
    n = max(1, int(text.rng.poisson(sentences - 1)) + 1)
    sents = [" ".join(text.sentences(text.words(int(text.rng.integers(12, 26))), 30, 30)) for _ in range(n)]
    domain = f"news{rid % 97}.example.com"
    if leak:  # half from a fact-check site, half a report that states the verdict (leaf_nb.ffrr.report_leak's two kinds)
        if rid % 2: domain = FACT_CHECK_DOMAINS[rid % len(FACT_CHECK_DOMAINS)]
        else: sents[-1] = "A spokesperson said the claim is false."
    flags = (text.rng.random(n) < 0.15).astype(int).tolist()
    rec = {"content": " ".join(sents), "link": f"https://{domain}/story/{rid}", "domain": domain,
           "tokenized": [{"sent": s, "is_evidence": f} for s, f in zip(sents, flags)]}
    return {"report_id": f"r{rid}", **rec} if dataset == "liar-raw" else rec


def claims(text: Text, dataset: str, spec: dict, fraction: float) -> dict[str, list[dict]]:
    "Every split's claim records; reports per claim and sentences per report as Table 1 reads them after the leak filter."
    rng = text.rng
    splits = {s: max(1, round(n * fraction)) for s, n in spec["splits"].items()}
    labels = apportion(sum(splits.values()), spec["labels"])
    by_split = _split_labels(rng, splits, labels)
    per_claim = spec["docs"] / (1 - spec["leak_share"])  # before the filter
    out, rid, prefix = {}, 0, {"rawfc": "rf", "liar-raw": "lr"}[dataset]
    count = 0
    for split, labs in by_split.items():
        recs = []
        for lab in labs:
            count += 1
            n_rep = max(1, int(rng.poisson(per_claim - 1)) + 1)
            reps = []
            for _ in range(n_rep):
                rid += 1
                reps.append(_report(text, dataset, rid, spec["sentences"], rng.random() < spec["leak_share"]))
            rec = {"event_id": f"{prefix}_{count:05d}", "claim": " ".join(text.sentences(text.words(int(rng.integers(10, 25))), 40, 40)),
                   "label": lab, "original_label": lab, "explain": " ".join(text.sentences(text.words(int(rng.integers(20, 40))))),
                   "reports": reps}
            recs.append(rec)
        out[split] = recs
    return out


def write_claims(root: Path, dataset: str, data: dict[str, list[dict]]) -> None:
    "RAWFC: one JSON file per claim in each split's folder; LIAR-RAW: one JSON list per split."
    root.mkdir(parents=True, exist_ok=True)
    for split, recs in data.items():
        if dataset == "rawfc":
            (root / split).mkdir(exist_ok=True)
            for r in recs: (root / split / f"{r['event_id']}.json").write_text(json.dumps(r, ensure_ascii=False), encoding="utf-8")
        else:
            (root / f"{split}.json").write_text(json.dumps(recs, ensure_ascii=False), encoding="utf-8")


# ------------------------------------------------------------------ Factcheck-Bench and HealthFC (the rater-agreement notebook)
FACTCHECK_BENCH = {"claims": 661, "evidence": 5}  # Factcheck-Bench's paper: 661 check-worthy claims, five pieces of evidence each
FCB_STANCES = ("completely-support", "partially-support", "refute", "irrelevant")
HEALTHFC_CLAIMS = 750  # HealthFC (Vladika, Schneider and Matthes, LREC-COLING 2024): 750 claims
HEALTHFC_HEADER = ["en_claim", "en_explanation", "en_top_sentences", "de_claim", "de_explanation", "de_top_sentences", "label",
                   "de_verdict", "de_title", "authors", "date", "url"]  # healthFC_annotated.csv's columns, as data/agreement's fixture has them


def full_counts() -> dict:
    "The real data sets' counts in the manifest's shape (what `generate` writes at fraction 1), so a run on a share can say the full size."
    return {"mirage": dict(MIRAGE_COUNTS), "medqa_us": MEDQA_US_TEST,
            "claims": {"rawfc": dict(RAWFC["splits"]), "liar-raw": dict(LIAR_RAW["splits"])},
            "agreement": {"factcheck_bench_rows": FACTCHECK_BENCH["claims"] * FACTCHECK_BENCH["evidence"], "healthfc_claims": HEALTHFC_CLAIMS}}


def write_agreement(root: Path, seed: int, fraction: float) -> dict[str, int]:
    "Factcheck-Bench's stance JSONL and HealthFC's CSV at their sizes (times `fraction`), from a stream of their own."
    import csv
    text = Text(10_000, seed + 1)
    rng = text.rng
    root.mkdir(parents=True, exist_ok=True)
    n_fcb = max(1, round(FACTCHECK_BENCH["claims"] * fraction))
    with open(root / "factcheck_bench.jsonl", "w", encoding="utf-8") as f:
        for _ in range(n_fcb):
            claim = " ".join(text.sentences(text.words(int(rng.integers(10, 25))), 40, 40))
            for _ in range(FACTCHECK_BENCH["evidence"]):
                ev = " ".join(text.sentences(text.words(int(rng.integers(25, 70)))))
                f.write(json.dumps({"claim": claim, "evidence": ev, "stance": FCB_STANCES[int(rng.integers(0, 4))]},
                                   ensure_ascii=False, separators=(",", ":")) + "\n")
    n_hfc = max(1, round(HEALTHFC_CLAIMS * fraction))
    with open(root / "healthfc.csv", "w", encoding="utf-8-sig", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEALTHFC_HEADER)
        for i in range(n_hfc):
            claim = "Can " + " ".join(text.sentences(text.words(int(rng.integers(8, 18))), 40, 40)).rstrip(".") + "?"
            expl, top = (" ".join(text.sentences(text.words(int(rng.integers(a, b))))) for a, b in ((25, 60), (40, 110)))
            w.writerow([claim, expl, top, claim, expl, top, str(i % 3), ["ja", "unklar", "nein"][i % 3], f"Titel {i}",
                        "Autorin A,Autor B", "5. Dezember 2022", f"https://example.org/healthfc-rehearsal/{i}"])
    return {"factcheck_bench_rows": n_fcb * FACTCHECK_BENCH["evidence"], "healthfc_claims": n_hfc}


# ------------------------------------------------------------------ FFRR's encoder, a stand-in
# h100.yaml's `roberta_base` is RoBERTa-base (FFRR §5: "the encoder is a pre-trained RoBERTa"), 125M parameters that a
# GPU embeds FFRR's pool with in minutes; the embedded all-MiniLM-L6-v2 (22M) embeds it at about 3 reports a second on
# one busy core here (benchmarks/standin_encoder.py), and every trained method re-embeds LIAR-RAW's ~151k reports after
# its epoch. Every other model of the rehearsal is a stand-in that costs the harness nothing; this one makes the encoder
# one too. Our choice of size: 2 layers of width 32, one attention head, a feed-forward of 64 (1.0M parameters, nearly all
# of them the 30,522 x 32 token embeddings): a stack of real BERT layers (embeddings, self-attention, feed-forward, layer
# norms) under mean pooling, so loading, FAISS, REINFORCE's gradients, Adam and checkpoints all take RoBERTa's path, at a
# cost per report close to the tokenizer's own (measured on 1,000 reports of 256 tokens: tokenizing alone 568 reports/s;
# this size 297; one layer 337; two heads 242; width 64 with two heads 171). Its tokenizer is MiniLM's own (WordPiece,
# 30,522 entries), read from the embedded package: nothing is downloaded.
STANDIN_ENCODER = {"num_hidden_layers": 2, "hidden_size": 32, "num_attention_heads": 1, "intermediate_size": 64}


def build_standin_encoder(out_dir: Path, seed: int = 0) -> Path:
    """A seeded, randomly initialised BERT of `STANDIN_ENCODER`'s size with the embedded MiniLM's tokenizer, saved as a
    sentence-transformers folder (its transformer, then mean pooling: the modules sentence-transformers gives a plain
    RoBERTa folder such as h100.yaml's, which FFRR's `Policy` loads with `load_encoder`) in `out_dir/<name>`; reused when
    there. Untrained: its embeddings rank documents at random; it measures the pipeline, not retrieval."""
    import os
    import tempfile
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer, BertConfig, BertModel
    from transformers.utils import logging as hf_logging
    from leaf_nb.retrieve import embedded_encoder
    try: from sentence_transformers.sentence_transformer.modules import Pooling, Transformer  # sentence-transformers 6
    except ImportError: from sentence_transformers.models import Pooling, Transformer
    s = STANDIN_ENCODER
    out = Path(out_dir).expanduser() / f"bert-l{s['num_hidden_layers']}-h{s['hidden_size']}-a{s['num_attention_heads']}-seed{seed}"  # BERT's L/H/A naming
    if (out / "modules.json").exists(): return out
    out.parent.mkdir(parents=True, exist_ok=True)
    src = embedded_encoder()
    tok = AutoTokenizer.from_pretrained(str(src), local_files_only=True)
    mini = BertConfig.from_pretrained(str(src), local_files_only=True)  # MiniLM's vocabulary, positions and token types
    config = BertConfig(vocab_size=mini.vocab_size, max_position_embeddings=mini.max_position_embeddings,
                        type_vocab_size=mini.type_vocab_size, pad_token_id=mini.pad_token_id, **s)
    torch.manual_seed(seed)
    bert = BertModel(config)  # its pooler layer, as RoBERTa's, is saved and unused (mean pooling reads the token states)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error(); hf_logging.disable_progress_bar()  # its save and load reports are noise here
    try:
        raw = tmp / "raw"
        bert.save_pretrained(raw); tok.save_pretrained(raw)
        t = Transformer(str(raw), max_seq_length=256)  # RoBERTa's and the paper profile's max_length (FFRR's Policy sets its own)
        dim = (getattr(t, "get_embedding_dimension", None) or t.get_word_embedding_dimension)()
        SentenceTransformer(modules=[t, Pooling(dim, pooling_mode="mean")], device="cpu").save(str(tmp / "st"))
        try: os.replace(tmp / "st", out)
        except OSError: pass  # another process made it first
    finally:
        hf_logging.set_verbosity(level)
        if bars: hf_logging.enable_progress_bar()
        shutil.rmtree(tmp, ignore_errors=True)
    return out


# ------------------------------------------------------------------ the whole folder
def generate(out: Path, seed: int = 0, passages: int = 1_000_000, fraction: float = 1.0, quiet: bool = False) -> dict:
    "Write the rehearsal data under `out` (or reuse it when its manifest has the same arguments); return the manifest."
    args = {"version": VERSION, "seed": seed, "passages": passages, "fraction": fraction}
    manifest = out / "manifest.json"
    if manifest.exists():
        old = json.loads(manifest.read_text())
        if old.get("args") == args:
            if not quiet: print(f"rehearsal data in {out} already has these arguments: reused", file=sys.stderr)
            if "agreement" not in old or not (out / "agreement" / "healthfc.csv").exists():  # data written before these files
                old["agreement"] = write_agreement(out / "agreement", seed, fraction)
                manifest.write_text(json.dumps(old, indent=1) + "\n")
            return old
    for sub in ("MIRAGE", "MedQA", "RAWFC", "LIAR-RAW", "agreement", "medrag", "indexes", "models", "figures", "runs"):  # what was built from old data too
        shutil.rmtree(out / sub, ignore_errors=True)
    manifest.unlink(missing_ok=True)
    t0 = time.perf_counter()
    last = [0.0]
    def progress(tier, done, n):
        if not quiet and (time.perf_counter() - last[0] > 10 or done == n):
            last[0] = time.perf_counter()
            print(f"  {tier}: {done:,}/{n:,} passages ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    text = Text(passages, seed)
    counts = {d: max(1, round(n * fraction)) for d, n in MIRAGE_COUNTS.items()}
    n_pubmed = tier_sizes(passages)["pubmed"]
    need = counts["pubmedqa"] + counts["bioasq"]
    order = text.rng.choice(n_pubmed, size=min(need, n_pubmed), replace=False).tolist()
    order = (order * (need // max(1, len(order)) + 1))[:need]  # a corpus smaller than the questions: sources are shared
    sources = write_corpus(out / "medrag", text, passages, set(order), progress)
    bench = mirage(text, counts, sources, order)
    (out / "MIRAGE").mkdir(parents=True, exist_ok=True)
    (out / "MIRAGE" / "benchmark.json").write_text(json.dumps(bench, ensure_ascii=False), encoding="utf-8")
    us = medqa_us(text, max(len(LEAF_SAMPLES), round(MEDQA_US_TEST * fraction)))  # the six sample questions at any size
    (out / "MedQA" / "questions" / "US").mkdir(parents=True, exist_ok=True)
    (out / "MedQA" / "questions" / "US" / "test.jsonl").write_text("".join(json.dumps(l, ensure_ascii=False) + "\n" for l in us), encoding="utf-8")
    fc = {}
    for dataset, spec, folder in (("rawfc", RAWFC, "RAWFC"), ("liar-raw", LIAR_RAW, "LIAR-RAW")):
        data = claims(text, dataset, spec, fraction)
        write_claims(out / folder, dataset, data)
        fc[dataset] = {s: len(r) for s, r in data.items()}
        if not quiet: print(f"  {dataset}: {sum(fc[dataset].values()):,} claims ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    agreement = write_agreement(out / "agreement", seed, fraction)
    sample_lines = [i for i, l in enumerate(us) if any(l["question"] == s["question"] for s in LEAF_SAMPLES)]
    m = {"args": args, "mirage": {d: len(v) for d, v in bench.items()}, "medqa_us": len(us), "leaf_sample_lines": sample_lines,
         "claims": fc, "agreement": agreement, "corpus": tier_sizes(passages), "seconds": round(time.perf_counter() - t0, 1)}
    manifest.write_text(json.dumps(m, indent=1) + "\n")
    return m


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="the data folder (the rehearsal profile's ${LEAF_NB_REHEARSAL})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--passages", type=int, default=1_000_000, help="MedRAG-schema passages over the four corpora")
    ap.add_argument("--fraction", type=float, default=1.0, help="scale every question and claim count (1: the real sizes)")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    if a.passages < 1 or not 0 < a.fraction <= 1: ap.error("--passages must be >= 1 and --fraction in (0, 1]")
    m = generate(a.out, a.seed, a.passages, a.fraction, a.quiet)
    print(json.dumps(m))
    return m


if __name__ == "__main__":
    main()
