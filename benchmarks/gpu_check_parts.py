"""Pieces `gpu_check.py` builds its sections from; imported only inside a section's child process, so the parent
that probes packages and watches the clock never imports torch.

Everything here is built in the process from files in the repository, because the GPU machine has no network and
none of the project's embedded models: a tokenizer trained on the shipped corpus, causal LMs and a RoBERTa encoder
of published shapes with random weights (speed and memory depend on the shape, not on the values), leaf_nb's
`Transformers` backend serving such a model from memory, and a retriever that always hands back k passages.
"""
from __future__ import annotations

import json
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "data" / "medcorpus.jsonl"

TOKENIZER_VOCAB = 6144
"""Trained on the shipped corpus and leaf_nb's prompt templates, 6,144 entries give the real fact-check prompts about
as many tokens as SmolLM2's tokenizer does (when this was written, with three shipped passages: 713 label-only and
734 chain-of-thought, against SmolLM2's 739 and 763), so the forward passes cost what real checks cost; each run
records its prompts' mean length. Every id is below the vocabulary of each model shape used (49,152 and up)."""
SPECIAL_TOKENS = ["<|pad|>", "<|bos|>", "<|eos|>", "<|system|>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")

ROBERTA_SHAPES = {  # FFRR's encoder is "a pre-trained RoBERTa" (FFRR paper, Section 5); its size is not stated: base, the usual size of dual-encoder retrievers, is our choice
    "roberta-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, vocab_size=50265),
    "tiny": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=TOKENIZER_VOCAB),
}


def corpus_docs() -> list[dict]:
    "The shipped MedRAG-format passages (id, title, content)."
    return [json.loads(line) for line in CORPUS.read_text().splitlines() if line.strip()]


def train_tokenizer(vocab_size: int = TOKENIZER_VOCAB):
    "A byte-level BPE `PreTrainedTokenizerFast` trained here, in well under a second, with pad/bos/eos and a chat template of ours."
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from leaf_nb import prompts
    texts = [f"{d['title']}\n{d['content']}" for d in corpus_docs()]
    texts += [v for k, v in sorted(vars(prompts).items()) if k.isupper() and isinstance(v, str)]  # the instructions
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<|pad|>", bos_token="<|bos|>", eos_token="<|eos|>")
    tok.chat_template = CHAT_TEMPLATE
    return tok


def save_tokenizer(tok, folder: Path) -> Path:
    "Write `tok` where `AutoTokenizer.from_pretrained(folder)` finds it."
    folder.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(str(folder))
    return folder


def causal_lm(shape: str,  # a key of simpo_step.SHAPES ("llama3-8b", "tiny", ...)
              tok,  # its pad/bos/eos ids go into the config
              device: str,
              dtype: str,  # "bfloat16" or "float32"
             ):
    "A LlamaForCausalLM of a published shape with random weights, built directly on `device` in `dtype`; it never stops at EOS."
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from simpo_step import SHAPES
    cfg = LlamaConfig(**SHAPES[shape], max_position_embeddings=8192, bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    old = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))  # no float32 copy of 8B weights on the way
    try:
        with torch.device(device):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(old)
    # random weights would stop at EOS only by chance: every reply runs to max_tokens, so timings count a fixed length
    model.generation_config.eos_token_id = None
    return model.eval()


def in_memory_lm(model, tok, name: str, batch_size: int, cache=None):
    """leaf_nb's `Transformers` backend (batched generation, shared-prompt label scoring) on a model built in this
    process; `seconds` adds up the wall time of its `generate` and `label_logprobs` calls."""
    from leaf_nb.llm import Transformers

    class InMemory(Transformers):
        def __init__(self):
            super().__init__(name, model_id=name, batch_size=batch_size, device=str(model.device), cache=cache, progress=False)
            self.seconds = 0.0

        def load(self): return model, tok  # the weights live here, not in a folder
        def _identify(self): return f"{name}:random-weights"  # what cache keys call it (there is no folder to fingerprint)

        def _timed(self, fn, *args, **kwargs):
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            _sync(model.device)
            self.seconds += time.perf_counter() - t0
            return out

        def generate(self, *args, **kwargs): return self._timed(super().generate, *args, **kwargs)
        def label_logprobs(self, *args, **kwargs): return self._timed(super().label_logprobs, *args, **kwargs)

    return InMemory()


def _sync(device) -> None:
    import torch
    if str(device).startswith("cuda"): torch.cuda.synchronize()


def topped_up_retriever(use_bm25: bool, k: int = 3):
    """A retriever that returns exactly `k` shipped passages per query: BM25 over data/medcorpus.jsonl (bm25s, numpy
    scorer: no JIT compile in the timings) topped up with fixed passages when BM25 finds fewer (a random model writes
    queries that may share no word with the corpus), or, without bm25s, fixed passages alone. `topped_up` counts the fills."""
    from leaf_nb.retrieve import BM25, Retriever, as_corpus, index_fingerprint

    class ToppedUp(Retriever):
        def __init__(self):
            corpus = as_corpus(CORPUS, progress=False)
            super().__init__(corpus, cache=None, progress=False)
            self.bm25 = BM25(corpus, stemmer=None, backend="numpy", n_threads=1, progress=False) if use_bm25 else None
            self.fingerprint = index_fingerprint("gpu-check-topped-up", corpus, {"bm25": use_bm25})
            self.topped_up = 0

        def _search(self, queries, k):
            found = self.bm25._search(queries, k) if self.bm25 is not None else [[] for _ in queries]
            out = []
            for q, rows in zip(queries, found):
                rows = list(rows)
                start = zlib.crc32(q.encode())  # a fixed choice per query
                extra = (r % len(self.corpus) for r in range(start, start + 4 * k))
                for r in extra:
                    if len(rows) >= k: break
                    if r not in {x for x, _ in rows}:
                        rows.append((r, 0.0)); self.topped_up += 1
                out.append(rows)
            return out

    return ToppedUp()


def corpus_answers(n_sentences: int, per_answer: int = 4) -> list[str]:
    "Answers of `per_answer` distinct sentences, taken in order from the shipped passages, `n_sentences` sentences in all."
    from leaf_nb.text import split_sentences
    sents, seen = [], set()
    for d in corpus_docs():
        for s in split_sentences(d["content"]):
            if s not in seen and len(s.split()) >= 6: seen.add(s); sents.append(s)
        if len(sents) >= n_sentences: break
    if len(sents) < n_sentences: raise ValueError(f"the corpus holds {len(sents)} usable sentences, {n_sentences} asked for")
    sents = sents[:n_sentences]
    return [" ".join(sents[i:i + per_answer]) for i in range(0, n_sentences, per_answer)]


def refresh_pool(n: int) -> list[dict]:
    """`n` distinct documents for FFRR's policy to embed, each three consecutive shipped passages (about 250 words, so
    about 256 tokens at PAPER_FFRR's max_length) and its number."""
    docs = corpus_docs()
    return [{"id": f"refresh/{i}", "title": "", "content": " ".join(docs[(i + j) % len(docs)]["content"] for j in range(3)) + f" ({i})"}
            for i in range(n)]


def encoder_folder(shape: str, tok, folder: Path) -> Path:
    "A random-weight RoBERTa of `shape` saved with `tok` as a sentence-transformers folder (mean pooling), for `Policy(encoder=folder)`."
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import RobertaConfig, RobertaModel
    hf = folder / "hf"
    cfg = RobertaConfig(**ROBERTA_SHAPES[shape], max_position_embeddings=514, type_vocab_size=1,
                        pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    RobertaModel(cfg, add_pooling_layer=False).save_pretrained(str(hf))
    save_tokenizer(tok, hf)
    word = models.Transformer(str(hf), max_seq_length=256)
    dim = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension  # renamed in sentence-transformers 6
    st = SentenceTransformer(modules=[word, models.Pooling(dim(), "mean")], device="cpu")
    st.save(str(folder / "st"))
    return folder / "st"
