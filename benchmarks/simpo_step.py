"""Peak memory and time of SimPO training steps (TRL's CPOTrainer, loss_type="simpo", cpo_alpha=0) on one GPU,
for a model of a published shape with random weights (memory and speed depend on the shape, not the values).

Not run in CI and not run by the project so far (no GPU was available). On a GPU machine:

    python benchmarks/simpo_step.py --shape llama3-8b --json simpo_step.json
    python benchmarks/simpo_step.py --largest --gradient-checkpointing --json simpo_step.json

`--largest` tries the shapes from the largest down and reports the first that completes its steps. The
sequences fill the paper's maximum length by default (LEAF paper, Table 8: max sequence length 2048, max prompt
length 1800; the split prompt 1536 + answer 512 is our choice), chosen and rejected in one forward pass, 4 pairs
per step as in the paper's per-device batch. The loss is SimPO's with Table 8's β = 2.5 and γ = 1.4, passed to TRL
as `simpo_gamma`, which is the absolute margin of the paper's Eq. 3 (not SimPO's γ/β ratio; see
`tests/test_selftrain.py::test_trl_simpo_loss_is_the_papers_eq3`). The optimizer is AdamW; with
`--weights bf16` (the default here, one GPU) weights, gradients and optimizer states are bf16; `--weights fp32`
keeps fp32 weights under bf16 autocast as a multi-GPU FSDP run does. The smoke check on CPU is
`python benchmarks/simpo_step.py --shape tiny --device cpu --steps 2 --prompt-tokens 32 --answer-tokens 16`.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

SHAPES = {  # published configs (config.json of each model); weights are random
    "llama3-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=8, vocab_size=128256, rope_theta=500000.0, tie_word_embeddings=False),
    "llama3.2-3b": dict(hidden_size=3072, intermediate_size=8192, num_hidden_layers=28, num_attention_heads=24,
                        num_key_value_heads=8, vocab_size=128256, rope_theta=500000.0, tie_word_embeddings=True),
    "llama3.2-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                        num_key_value_heads=8, vocab_size=128256, rope_theta=500000.0, tie_word_embeddings=True),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 vocab_size=49152, tie_word_embeddings=True),
}


def run(shape: str, a) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, TrainerCallback
    from trl.experimental.cpo import CPOConfig, CPOTrainer
    from leaf_nb.llm import embedded_dir

    tok = AutoTokenizer.from_pretrained(str(embedded_dir()), local_files_only=True)  # ids < 49152 fit every vocabulary above
    cfg = LlamaConfig(**SHAPES[shape], max_position_embeddings=max(8192, a.prompt_tokens + a.answer_tokens + 8),
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    dtype = torch.bfloat16 if a.weights == "bf16" else torch.float32
    torch.manual_seed(0)
    with torch.device(a.device):
        model = LlamaForCausalLM(cfg).to(dtype)
    n_params = sum(p.numel() for p in model.parameters())
    words = "the patient was given a dose and the response was recorded".split()
    text = lambda n, off: " ".join(words[(i + off) % len(words)] for i in range(n))  # about one token per word
    pairs = Dataset.from_list([{"prompt": text(a.prompt_tokens, i), "chosen": " " + text(a.answer_tokens, i + 1),
                                "rejected": " " + text(a.answer_tokens, i + 2)} for i in range(a.batch * (a.steps + a.warmup_steps))])

    times = []
    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            if a.device.startswith("cuda"): torch.cuda.synchronize()
            self.t = time.perf_counter()
        def on_step_end(self, args, state, control, **kw):
            if a.device.startswith("cuda"): torch.cuda.synchronize()
            times.append(time.perf_counter() - self.t)

    with tempfile.TemporaryDirectory() as d:
        args = CPOConfig(output_dir=d, loss_type="simpo", cpo_alpha=0.0, beta=2.5, simpo_gamma=1.4, learning_rate=1e-6,  # Table 8; simpo_gamma = Eq. 3's γ
                         per_device_train_batch_size=a.batch, gradient_accumulation_steps=1, max_steps=a.steps + a.warmup_steps,
                         max_length=a.prompt_tokens + a.answer_tokens + 4, optim="adamw_torch", bf16=a.device != "cpu",
                         use_cpu=a.device == "cpu", gradient_checkpointing=a.gradient_checkpointing, save_strategy="no",
                         report_to=[], logging_steps=1, disable_tqdm=True, remove_unused_columns=False)
        trainer = CPOTrainer(model=model, args=args, train_dataset=pairs, processing_class=tok, callbacks=[Clock()])
        if a.device.startswith("cuda"): torch.cuda.reset_peak_memory_stats()
        trainer.train()
    measured = times[a.warmup_steps:]
    out = {"shape": shape, "parameters": n_params, "weights": a.weights, "device": a.device,
           "device_name": torch.cuda.get_device_name() if a.device.startswith("cuda") else platform.processor(),
           "pairs_per_step": a.batch, "prompt_tokens": a.prompt_tokens, "answer_tokens": a.answer_tokens,
           "gradient_checkpointing": a.gradient_checkpointing, "step_seconds": measured,
           "median_step_seconds": statistics.median(measured) if measured else None,
           "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if a.device.startswith("cuda") else None,
           "torch": torch.__version__}
    del trainer, model
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=list(SHAPES), default="llama3-8b")
    p.add_argument("--largest", action="store_true", help="try every shape from the largest down; report the first that fits")
    p.add_argument("--device", default="cuda")
    p.add_argument("--weights", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--batch", type=int, default=4, help="pairs per step (paper: 4 per device)")
    p.add_argument("--prompt-tokens", type=int, default=1536)
    p.add_argument("--answer-tokens", type=int, default=512)
    p.add_argument("--steps", type=int, default=3, help="measured steps")
    p.add_argument("--warmup-steps", type=int, default=1, help="steps run before measuring (allocation, kernels)")
    p.add_argument("--gradient-checkpointing", action="store_true")
    p.add_argument("--json", default=None, help="write the result here")
    a = p.parse_args(argv)
    import torch
    shapes = [s for s in SHAPES if s != "tiny"] if a.largest else [a.shape]
    results = []
    for shape in shapes:
        try:
            r = run(shape, a)
        except torch.OutOfMemoryError as e:
            r = {"shape": shape, "error": "out of memory", "detail": str(e).splitlines()[0]}
            if a.device.startswith("cuda"): torch.cuda.empty_cache()
        results.append(r)
        print(json.dumps(r), flush=True)
        if a.largest and "error" not in r: break
    if a.json:
        with open(a.json, "w") as f: json.dump(results, f, indent=1)
    return 0 if any("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
