"""What a cache key calls a model: the files it computes with, never its folder's path or name (issue: two fine-tunes
saved as runs/a/final and runs/b/final used to share cache entries)."""
import json
import shutil

import numpy as np
import pytest

from leaf_nb.cache import Cache, mark_source
from leaf_nb.llm import LlamaCppServer, OpenAICompatible, Transformers, load_llm

WORDS = ["[UNK]", "[PAD]", "</s>", "the", "heart", "pumps", "blood", "insulin", "lowers", "glucose", "liver", "kidney"]


def tiny_model(folder, seed):
    "A one-layer Llama with random weights and a word-level tokenizer: a real transformers model folder, in a second."
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", eos_token="</s>")
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(WORDS), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                      pad_token_id=1, eos_token_id=2, bos_token_id=2)
    LlamaForCausalLM(cfg).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def generate(folder, cache):
    lm = Transformers(folder, cache=cache, progress=False)
    out = lm.generate(["the heart pumps", "insulin lowers"], max_tokens=6)
    return lm, out


def test_same_folder_name_other_weights_never_share_entries(tmp_path):
    cache = Cache(tmp_path / "cache.sqlite")
    a, b = tiny_model(tmp_path / "a" / "final", seed=1), tiny_model(tmp_path / "b" / "final", seed=2)
    lm_a, out_a = generate(a, cache)
    lm_b, out_b = generate(b, cache)
    assert lm_a.model_id == lm_b.model_id == "final"  # what the old keys used
    assert lm_a.identity != lm_b.identity
    assert lm_a.calls == 2 and lm_b.calls == 2  # model B computed its own answers
    # retrained in place: same path, new weights -> new identity, new calls
    tiny_model(a, seed=3)
    lm_r, _ = generate(a, cache)
    assert lm_r.identity not in (lm_a.identity, lm_b.identity) and lm_r.calls == 2


def test_same_model_copied_or_renamed_hits_the_cache(tmp_path):
    cache = Cache(tmp_path / "cache.sqlite")
    a = tiny_model(tmp_path / "runs" / "final", seed=1)
    lm_a, out_a = generate(a, cache)
    moved = shutil.copytree(a, tmp_path / "backup" / "sft-round-1")
    (moved / "trainer_state.json").write_text("{}")  # training state does not change what it computes
    lm_m, out_m = generate(moved, cache)
    assert lm_m.identity == lm_a.identity
    assert lm_m.calls == 0 and out_m == out_a


def test_a_converted_or_trained_folder_is_named_by_its_source(tmp_path):
    """Two machines convert (or train) the same model and write other float bits: marked with the source they were
    made from, both get one identity, so the calls one recorded answer the other; a file changed afterwards, the
    files name the folder again."""
    cache = Cache(tmp_path / "cache.sqlite")
    here, there = tiny_model(tmp_path / "here" / "final", seed=1), tiny_model(tmp_path / "there" / "final", seed=2)
    for folder in (here, there): mark_source(folder, "ab" * 32)
    lm_here, out_here = generate(here, cache)
    lm_there, out_there = generate(there, cache)
    assert lm_here.identity == lm_there.identity == "sha256:" + "ab" * 8
    assert (lm_here.calls, lm_there.calls) == (2, 0) and out_there == out_here
    tiny_model(there, seed=3)  # retrained in place after it was marked
    lm_changed, _ = generate(there, cache)
    assert lm_changed.identity != lm_here.identity and lm_changed.calls == 2


def test_missing_model_folder_is_named(tmp_path):
    lm = load_llm(f"hf:{tmp_path / 'nope'}", progress=False)
    with pytest.raises(FileNotFoundError, match="nope"):
        lm.generate(["x"], max_tokens=1)


def test_server_identity(server, tmp_path):
    # llama-cpp-python's /models says nothing but the alias: LlamaCppServer names the GGUF it serves
    lm = server.lm(progress=False)
    assert lm.identity.startswith(server.alias + "@sha256:")
    # without that, the client warns and falls back to the served name
    bare = OpenAICompatible(server.base_url, server.alias, progress=False)
    with pytest.warns(UserWarning, match="says nothing"):
        assert bare.identity == server.alias
    # a name the server does not serve is an error that lists what it serves
    wrong = OpenAICompatible(server.base_url, "llama-3-70b", progress=False)
    with pytest.raises(Exception, match=f"serves \\['{server.alias}'\\]"):
        wrong.generate(["x"], max_tokens=1)
    # an explicit identity in the spec is used as given, and two identities never share entries
    cache = Cache(tmp_path / "c.sqlite")
    one = load_llm(f"openai:{server.base_url}#{server.alias}@run-1", cache=cache, progress=False)
    two = load_llm(f"openai:{server.base_url}#{server.alias}@run-2", cache=cache, progress=False)
    one.generate(["The kidney filters"], max_tokens=4)
    two.generate(["The kidney filters"], max_tokens=4)
    assert (one.identity, two.identity) == (f"{server.alias}@run-1", f"{server.alias}@run-2")
    assert one.calls == two.calls == 1


def test_reward_models_in_same_named_folders_never_share_scores(tmp_path):
    from leaf_nb.selftrain import RewardModelScorer, build_test_reward_model
    a = shutil.copytree(build_test_reward_model(tmp_path / "build", seed=1), tmp_path / "a" / "rm")
    b = shutil.copytree(build_test_reward_model(tmp_path / "build", seed=2), tmp_path / "b" / "rm")
    cache = Cache(tmp_path / "c.sqlite")
    sa, sb = RewardModelScorer(a, cache=cache, progress=False), RewardModelScorer(b, cache=cache, progress=False)
    assert sa.model_id == sb.model_id == "rm" and sa.identity != sb.identity
    qa = [("Which drug reverses opioid overdose?", "Naloxone.")]
    ra, rb = sa.score(*zip(*qa)), sb.score(*zip(*qa))
    assert sa.calls == 1 and sb.calls == 1 and not np.allclose(ra, rb)
    moved = RewardModelScorer(shutil.copytree(a, tmp_path / "elsewhere" / "armorm-copy"), cache=cache, progress=False)
    assert np.allclose(moved.score(*zip(*qa)), ra) and moved.calls == 0
