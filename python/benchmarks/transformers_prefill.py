"""transformers' linear attention on the CPU, with its PyTorch fallback and with hanpu patched in.

    .venv/bin/python python/benchmarks/transformers_prefill.py [--tokens 512,1024,2048,4096,8192]
        [--reps 3] [--e2e-tokens 2048] [--threads N] [--json FILE]

Two measurements (each also split into the time inside the GDN kernel function and the rest), each the median of --reps runs after one warm-up, both variants timed in the same
process and interleaved (patched, unpatched, patched, ...) so machine noise hits both alike:
  * layer: one Qwen3_5GatedDeltaNet layer of a Qwen3.5-0.8B-shaped config (hidden 1024, 16 q/k heads,
    16 value heads, head dims 128; the shape of hanpu's qwen3.5-0.8b bench preset), forward on
    [1, T, 1024] hidden states: projections, short convolution, the GDN kernel, gated norm, output
    projection. Only the kernel differs between the variants.
  * e2e: prefill (one forward, logits included) of a small random Qwen3.5 model of the same layer shape,
    4 decoder layers (3 linear attention + 1 full attention), vocab 4096.
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


def config(layers: int) -> "transformers.Qwen3_5TextConfig":
    types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)]
    return transformers.Qwen3_5TextConfig(vocab_size=4096, hidden_size=1024, intermediate_size=3584,
                                          num_hidden_layers=layers, num_attention_heads=8, num_key_value_heads=2,
                                          head_dim=256, layer_types=types, **LINEAR)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


@contextlib.contextmanager
def kernel_clock(spent: list):
    """Adds to spent[0] the ms spent inside the modeling module's GDN prefill kernel function (whichever
    is installed: transformers' fallback or hanpu's replacement), so a layer's time splits into the
    kernel and everything around it."""
    name = "torch_chunk_gated_delta_rule"
    inner = getattr(MODELING, name)

    def clocked(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[0] += (time.perf_counter() - t0) * 1e3

    setattr(MODELING, name, clocked)
    try:
        yield
    finally:
        setattr(MODELING, name, inner)


def compare(label: str, fn, reps: int) -> dict:
    """Median ms of fn (and of the GDN kernel calls inside it) with transformers' fallback and with
    hanpu, interleaved, after one warm-up each."""
    times = {"transformers": [], "hanpu": []}
    kernel = {"transformers": [], "hanpu": []}
    with torch.inference_mode():
        for r in range(-1, reps):  # r == -1: warm-up
            for variant in times:
                spent = [0.0]
                with hanpu_tf.patched() if variant == "hanpu" else contextlib.nullcontext(), kernel_clock(spent):
                    ms = timed(fn)
                if r >= 0:
                    times[variant].append(ms)
                    kernel[variant].append(spent[0])
            if r >= 0:
                print(f"  {label} rep {r + 1}/{reps}: transformers {times['transformers'][-1]:.1f} ms "
                      f"(kernel {kernel['transformers'][-1]:.1f}), hanpu {times['hanpu'][-1]:.1f} ms "
                      f"(kernel {kernel['hanpu'][-1]:.1f})", file=sys.stderr)
    med = {v: statistics.median(t) for v, t in times.items()}
    kmed = {v: statistics.median(t) for v, t in kernel.items()}
    return {"transformers_ms": med["transformers"], "hanpu_ms": med["hanpu"],
            "speedup": med["transformers"] / med["hanpu"],
            "transformers_kernel_ms": kmed["transformers"], "hanpu_kernel_ms": kmed["hanpu"],
            "kernel_speedup": kmed["transformers"] / kmed["hanpu"], "reps": reps,
            "transformers_all_ms": times["transformers"], "hanpu_all_ms": times["hanpu"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", default="512,1024,2048,4096,8192", help="layer benchmark token counts")
    ap.add_argument("--e2e-tokens", type=int, default=2048, help="prompt length of the end-to-end prefill")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="hanpu threads (0: every CPU); torch keeps its own")
    ap.add_argument("--json", help="write the records here")
    a = ap.parse_args()
    try:
        tokens = [int(t) for t in a.tokens.split(",")]
    except ValueError:
        ap.error(f"--tokens must be a comma-separated list of integers, got {a.tokens!r}")
    if a.reps < 1 or any(t < 1 for t in tokens) or a.e2e_tokens < 1 or a.threads < 0:
        ap.error("--reps, --tokens and --e2e-tokens must be >= 1 and --threads >= 0")
    hanpu.set_num_threads(a.threads)
    torch.manual_seed(0)
    records = []

    layer = MODELING.Qwen3_5GatedDeltaNet(config(4), layer_idx=0).eval()
    for T in tokens:
        x = torch.randn(1, T, 1024) * 0.1
        print(f"layer T={T}", file=sys.stderr)
        rec = compare(f"layer T={T}", lambda: layer(x), a.reps)
        records.append({"bench": "layer", "tokens": T, **rec})

    model = transformers.Qwen3_5ForCausalLM(config(4)).eval()
    ids = torch.randint(0, 4096, (1, a.e2e_tokens))
    print(f"e2e prefill T={a.e2e_tokens}", file=sys.stderr)
    rec = compare(f"e2e T={a.e2e_tokens}", lambda: model(ids), a.reps)
    records.append({"bench": "e2e_prefill", "tokens": a.e2e_tokens, "layers": 4, **rec})

    env = {"hanpu": hanpu.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
           "torch_threads": torch.get_num_threads(), **hanpu.cpu_features()}
    print(f"hanpu {env['hanpu']} ({env['simd_target']}, {env['threads']} threads), torch {env['torch']} "
          f"({env['torch_threads']} threads), transformers {env['transformers']}")
    print(f"{'bench':<12} {'tokens':>7} {'transformers ms':>16} {'hanpu ms':>10} {'speedup':>8}   "
          f"{'kernel: transformers ms':>23} {'hanpu ms':>9} {'speedup':>8}")
    for r in records:
        print(f"{r['bench']:<12} {r['tokens']:>7} {r['transformers_ms']:>16.1f} {r['hanpu_ms']:>10.1f} "
              f"{r['speedup']:>7.1f}x   {r['transformers_kernel_ms']:>23.1f} {r['hanpu_kernel_ms']:>9.1f} "
              f"{r['kernel_speedup']:>7.1f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"environment": env, "records": records}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
