"""transformers' linear attention on the CPU: stock, with hanpu's kernel patched in, and with hanpu's whole layer.

    .venv/bin/python python/benchmarks/transformers_prefill.py [--tokens 512,4096] [--dtypes fp32,bf16]
        [--reps 3] [--e2e-tokens 2048] [--decode-batches 1,16] [--threads N] [--json FILE]

Three variants of the same module, timed in one process and interleaved (stock, kernel, layer, stock, ...)
so machine noise hits all alike; each number is the median of --reps runs after one warm-up:
  * transformers: stock (its PyTorch fallbacks for the conv and the GDN kernel, as on any CPU);
  * kernel: hanpu_tf.patch(level="kernel"), only the GDN kernel function replaced;
  * layer:  hanpu_tf.patch(level="layer"), the whole layer forward on hanpu.
Measurements, per dtype (float32, bfloat16: the model converted with .to()):
  * layer: one Qwen3_5GatedDeltaNet of a Qwen3.5-0.8B-shaped config (hidden 1024, 16 q/k heads, 16 value
    heads, head dims 128; hanpu's qwen3.5-0.8b preset), forward on [1, T, 1024] hidden states;
  * e2e: prefill (one forward, logits included) of a random Qwen3.5 model of the same layer shape, 4 decoder
    layers (3 linear attention + 1 full attention), vocab 4096;
  * decode: one cached decode step of that one layer for each batch size (the cache filled by a 64-token
    prefill of the same variant), timed per step.
The table goes to stdout, progress to stderr, records to --json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time

import torch
import transformers

import hanpu
from hanpu.integrations import transformers as hanpu_tf

MODELING = transformers.models.qwen3_5.modeling_qwen3_5
LINEAR = dict(linear_num_key_heads=16, linear_num_value_heads=16, linear_key_head_dim=128, linear_value_head_dim=128,
              linear_conv_kernel_dim=4)
VARIANTS = ("transformers", "kernel", "layer")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def config(layers: int) -> "transformers.Qwen3_5TextConfig":
    types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)]
    return transformers.Qwen3_5TextConfig(vocab_size=4096, hidden_size=1024, intermediate_size=3584,
                                          num_hidden_layers=layers, num_attention_heads=8, num_key_value_heads=2,
                                          head_dim=256, layer_types=types, **LINEAR)


def variant(name: str, threads: int):
    if name == "transformers":
        return contextlib.nullcontext()
    return hanpu_tf.patched(level=name, threads=threads or None)


def compare(label: str, fn, reps: int, threads: int, setup=None) -> dict:
    """Median ms of fn() per variant, interleaved, after one warm-up each; setup() (untimed) before each."""
    times = {v: [] for v in VARIANTS}
    with torch.inference_mode():
        for r in range(-1, reps):  # r == -1: warm-up
            for v in VARIANTS:
                with variant(v, threads):
                    state = setup() if setup else None
                    t0 = time.perf_counter()
                    fn(state)
                    ms = (time.perf_counter() - t0) * 1e3
                if r >= 0:
                    times[v].append(ms)
            if r >= 0:
                print(f"  {label} rep {r + 1}/{reps}: " + ", ".join(f"{v} {times[v][-1]:.1f} ms" for v in VARIANTS),
                      file=sys.stderr)
    med = {v: statistics.median(t) for v, t in times.items()}
    return {**{f"{v}_ms": med[v] for v in VARIANTS},
            "kernel_speedup": med["transformers"] / med["kernel"], "layer_speedup": med["transformers"] / med["layer"],
            "reps": reps, **{f"{v}_all_ms": times[v] for v in VARIANTS}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", default="512,4096", help="layer benchmark token counts")
    ap.add_argument("--dtypes", default="fp32,bf16", help="model dtypes: fp32, bf16")
    ap.add_argument("--e2e-tokens", type=int, default=2048, help="prompt length of the end-to-end prefill (0: skip)")
    ap.add_argument("--decode-batches", default="1,16", help="batch sizes of the decode step ('' to skip)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="hanpu threads (0: every CPU); torch keeps its own")
    ap.add_argument("--json", help="write the records here")
    a = ap.parse_args()
    try:
        tokens = [int(t) for t in a.tokens.split(",")]
        batches = [int(b) for b in a.decode_batches.split(",")] if a.decode_batches else []
    except ValueError:
        ap.error("--tokens and --decode-batches must be comma-separated lists of integers")
    dtypes = a.dtypes.split(",")
    if any(d not in DTYPES for d in dtypes):
        ap.error(f"--dtypes must name fp32 and/or bf16, got {a.dtypes!r}")
    if a.reps < 1 or any(t < 1 for t in tokens) or any(b < 1 for b in batches) or a.e2e_tokens < 0 or a.threads < 0:
        ap.error("--reps, --tokens and --decode-batches must be >= 1, --e2e-tokens and --threads >= 0")
    hanpu.set_num_threads(a.threads)
    records = []
    for dname in dtypes:
        dt = DTYPES[dname]
        torch.manual_seed(0)
        layer = MODELING.Qwen3_5GatedDeltaNet(config(4), layer_idx=0).eval().to(dt)
        for T in tokens:
            x = (torch.randn(1, T, 1024) * 0.1).to(dt)
            print(f"layer {dname} T={T}", file=sys.stderr)
            rec = compare(f"layer {dname} T={T}", lambda _: layer(x), a.reps, a.threads)
            records.append({"bench": "layer", "dtype": dname, "tokens": T, **rec})

        model = transformers.Qwen3_5ForCausalLM(config(4)).eval().to(dt)
        if a.e2e_tokens:
            ids = torch.randint(0, 4096, (1, a.e2e_tokens))
            print(f"e2e prefill {dname} T={a.e2e_tokens}", file=sys.stderr)
            rec = compare(f"e2e {dname} T={a.e2e_tokens}", lambda _: model(ids), a.reps, a.threads)
            records.append({"bench": "e2e_prefill", "dtype": dname, "tokens": a.e2e_tokens, "layers": 4, **rec})

        gdn = model.model.layers[0].linear_attn
        for b in batches:
            def prefilled(b=b):
                cache = transformers.DynamicCache(config=model.config)
                gdn(torch.randn(b, 64, 1024).to(dt) * 0.1, cache=cache)
                return cache

            x1 = (torch.randn(b, 1, 1024) * 0.1).to(dt)
            print(f"decode {dname} batch {b}", file=sys.stderr)
            rec = compare(f"decode {dname} B={b}", lambda cache: gdn(x1, cache=cache), max(a.reps, 10), a.threads,
                          setup=prefilled)
            records.append({"bench": "decode_step", "dtype": dname, "batch": b, "tokens": 1, **rec})

    env = {"hanpu": hanpu.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
           "torch_threads": torch.get_num_threads(), **hanpu.cpu_features()}
    print(f"hanpu {env['hanpu']} ({env['simd_target']}, {env['threads']} threads, bf16 unit: {env['bf16_unit']}), "
          f"torch {env['torch']} ({env['torch_threads']} threads), transformers {env['transformers']}")
    print(f"{'bench':<12} {'dtype':<5} {'T/batch':>7} {'transformers ms':>16} {'kernel ms':>10} {'layer ms':>9} "
          f"{'kernel x':>9} {'layer x':>8}")
    for r in records:
        size = r["batch"] if r["bench"] == "decode_step" else r["tokens"]
        print(f"{r['bench']:<12} {r['dtype']:<5} {size:>7} {r['transformers_ms']:>16.2f} {r['kernel_ms']:>10.2f} "
              f"{r['layer_ms']:>9.2f} {r['kernel_speedup']:>8.2f}x {r['layer_speedup']:>7.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"environment": env, "records": records}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
