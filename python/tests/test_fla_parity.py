"""Parity with FLA's own naive references (flash-linear-attention from PyPI, fla/ops/*/naive.py).

FLA's naive functions compute in float32, so they are themselves about 1e-7 (error ratio) away from
the exact result. Each case checks two things:
  * hanpu against FLA's naive output with FLA's metric (error ratio, RMS(diff) / RMS(ref)), at the
    tolerance FLA's own tests use for these kernels (0.005 for o and the final state) and, for float32
    inputs, far tighter (1e-5: both sides are fp32 computations of the same maths);
  * hanpu and FLA's naive against the fp64 reference by NMSE, where hanpu must meet the operators' bar.
The naive GDN function has no GVA and no varlen: as in FLA's tests, q and k are repeated per value
head, and varlen runs are compared with per-sequence naive runs concatenated.
"""

import numpy as np
import pytest
import torch

import hanpu
from conftest import bar, err_ratio, make_inputs, nmse


def naive(fla_naive, kind, inp, cu=None):
    """FLA's naive recurrence over every sequence (cu_seqlens split by hand), with GVA by repeat."""
    q, k, v, g, beta, h0 = (inp[n] for n in ("q", "k", "v", "g", "beta", "initial_state"))
    rep = v.shape[2] // q.shape[2]
    q, k = q.repeat_interleave(rep, dim=2), k.repeat_interleave(rep, dim=2)
    spans = [(0, q.shape[1])] if cu is None else list(zip(cu[:-1].tolist(), cu[1:].tolist()))
    outs, states = [], []
    for n, (a, b) in enumerate(spans):
        h = h0 if cu is None else h0[n:n + 1]
        if a == b:
            outs.append(v[:, a:b].float())
            states.append(h.float())
            continue
        args = [t[:, a:b] for t in (q, k, v)]
        if kind == "gdn":
            o, s = fla_naive["gdn"].naive_recurrent_gated_delta_rule(
                *args, beta[:, a:b], g[:, a:b], initial_state=h, output_final_state=True)
        else:
            o, s = fla_naive["kda"].naive_recurrent_kda(
                *args, g[:, a:b], beta[:, a:b], initial_state=h, output_final_state=True)
        outs.append(o.float())
        states.append(s)
    return torch.cat(outs, dim=1), torch.cat(states, dim=0)


CASES = [  # (B, T, H, HV, K, V)
    (1, 1, 1, 1, 16, 16),
    (2, 63, 2, 2, 64, 64),
    (1, 130, 2, 4, 60, 100),  # GVA x2, dims that are not powers of two
    (1, 200, 1, 4, 128, 32),  # GVA x4
    (3, 65, 4, 4, 32, 48),
]


@pytest.mark.parametrize("kind", ["gdn", "kda"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "B{}T{}H{}HV{}K{}V{}".format(*c))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_chunk_and_recurrent_match_fla_naive(fla_naive, kind, case, dtype):
    B, T, H, HV, K, V = case
    inp = make_inputs(kind, B=B, T=T, H=H, HV=HV, K=K, V=V, dtype=dtype, seed=sum(case))
    fla_o, fla_s = naive(fla_naive, kind, inp)
    ref_o, ref_s = hanpu.reference(kind, **inp, output_final_state=True)
    chunk = hanpu.chunk_gated_delta_rule if kind == "gdn" else hanpu.chunk_kda
    recurrent = hanpu.fused_recurrent_gated_delta_rule if kind == "gdn" else hanpu.fused_recurrent_kda
    tol = 1e-5 if dtype == torch.float32 else 0.005
    for fn in (chunk, recurrent):
        exact = dict(precision="exact") if fn is chunk else {}  # the exact contract (bf16 mode: below)
        o, s = fn(inp["q"], inp["k"], inp["v"], g=inp["g"], beta=inp["beta"], initial_state=inp["initial_state"],
                  output_final_state=True, **exact)
        assert err_ratio(o, fla_o) <= tol, fn.__name__
        assert err_ratio(s, fla_s) <= tol, fn.__name__
        assert nmse(o, ref_o) <= bar(ref_o, dtype), fn.__name__
        assert nmse(s, ref_s) <= 1e-10, fn.__name__
    # the default precision (bf16 GEMM operands for bf16 inputs) within FLA's own tolerance for its
    # half-precision kernels against the naive recurrence
    o, s = chunk(inp["q"], inp["k"], inp["v"], g=inp["g"], beta=inp["beta"], initial_state=inp["initial_state"],
                 output_final_state=True)
    assert err_ratio(o, fla_o) <= tol and err_ratio(s, fla_s) <= tol
    # FLA's fp32 naive itself sits within the float32 bar of the fp64 reference: the comparison is sound.
    assert nmse(fla_s, ref_s) <= 1e-10


@pytest.mark.parametrize("kind", ["gdn", "kda"])
def test_varlen_matches_fla_naive_per_sequence(fla_naive, kind):
    lens = [15, 0, 64, 100, 1, 33]
    cu = torch.tensor(np.cumsum([0] + lens), dtype=torch.int64)
    inp = make_inputs(kind, B=1, T=int(cu[-1]), H=2, HV=4, K=64, V=32, N=len(lens), seed=7)
    fla_o, fla_s = naive(fla_naive, kind, inp, cu)
    chunk = hanpu.chunk_gated_delta_rule if kind == "gdn" else hanpu.chunk_kda
    o, s = chunk(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], initial_state=inp["initial_state"],
                 output_final_state=True, cu_seqlens=cu)
    assert err_ratio(o, fla_o) <= 1e-5
    assert err_ratio(s, fla_s) <= 1e-5


def test_decode_continues_a_prefill_like_fla(fla_naive):
    """Prefill T tokens with the chunk kernel, then decode one token at a time from its final state:
    the same as FLA's naive recurrence over all T + 4 tokens."""
    inp = make_inputs("gdn", B=2, T=68, H=2, HV=4, K=32, V=32, seed=11)
    fla_o, fla_s = naive(fla_naive, "gdn", inp)
    pre = {n: (t[:, :64] if n != "initial_state" else t) for n, t in inp.items()}
    o, s = hanpu.chunk_gated_delta_rule(pre["q"], pre["k"], pre["v"], pre["g"], pre["beta"],
                                        initial_state=pre["initial_state"], output_final_state=True)
    outs = [o]
    for t in range(64, 68):
        step = {n: inp[n][:, t:t + 1] for n in ("q", "k", "v", "g", "beta")}
        o, s = hanpu.fused_recurrent_gated_delta_rule(step["q"], step["k"], step["v"], g=step["g"], beta=step["beta"],
                                                      initial_state=s, output_final_state=True)
        outs.append(o)
    assert err_ratio(torch.cat(outs, dim=1), fla_o) <= 1e-5
    assert err_ratio(s, fla_s) <= 1e-5
