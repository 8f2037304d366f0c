"""The package surface: FLA's signatures and return conventions, both array kinds, strided inputs,
dtypes, threads, strategies, and errors that name the argument."""

import threading

import numpy as np
import pytest
import torch

import hanpu
from conftest import bar, err_ratio, make_inputs, nmse

GDN_FNS = (hanpu.chunk_gated_delta_rule, hanpu.fused_recurrent_gated_delta_rule)
KDA_FNS = (hanpu.chunk_kda, hanpu.fused_recurrent_kda)


def call(fn, inp, **kw):
    """FLA's calling convention: q, k, v positional; g and beta by keyword (fused_recurrent_gdn's fourth
    and fifth positional parameters are g and gk)."""
    rest = {n: t for n, t in inp.items() if n not in ("q", "k", "v")}
    return fn(inp["q"], inp["k"], inp["v"], **rest, **kw)


def test_package_metadata():
    assert hanpu.__version__ == "0.1.0"
    feats = hanpu.cpu_features()
    assert feats["simd_target"] in feats["kernel_sets"]
    assert feats["kernel_sets"][-1] == "reference"
    assert feats["threads"] >= 1
    assert "hanpu" in feats["strategies"] and "fla" in feats["strategies"]


def test_threads_setting_round_trip():
    before = hanpu.get_num_threads()
    try:
        hanpu.set_num_threads(1)
        assert hanpu.get_num_threads() == 1
    finally:
        hanpu.set_num_threads(0)
    assert hanpu.get_num_threads() == before
    with pytest.raises(ValueError, match="threads"):
        hanpu.set_num_threads(-1)


@pytest.mark.parametrize("kind,fns", [("gdn", GDN_FNS), ("kda", KDA_FNS)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_matches_fp64_reference_and_dtype_rules(kind, fns, dtype):
    inp = make_inputs(kind, B=2, T=77, H=2, HV=4, K=32, V=24, dtype=dtype)
    ref_o, ref_s = call(lambda *a, **k: hanpu.reference(kind, *a, **k), inp, output_final_state=True)
    assert ref_o.dtype == torch.float64
    chunk, recurrent = fns
    o, s = call(chunk, inp, output_final_state=True, precision="exact")  # the exact contract's bars
    assert o.dtype == dtype and s.dtype == torch.float32  # FLA: o in q.dtype, state fp32
    assert o.shape == (2, 77, 4, 24) and s.shape == (2, 4, 32, 24)
    assert nmse(o, ref_o) <= bar(ref_o, dtype)
    assert nmse(s, ref_s) <= 1e-10
    o, s = call(recurrent, inp, output_final_state=True)
    assert o.dtype == dtype and s.dtype == torch.float32  # FLA: o in v.dtype
    assert nmse(o, ref_o) <= bar(ref_o, dtype)
    assert nmse(s, ref_s) <= 1e-10


@pytest.mark.parametrize("fn", GDN_FNS)
def test_numpy_in_numpy_out_identical_to_torch(fn):
    inp = make_inputs("gdn", T=40)
    o_t, s_t = call(fn, inp, output_final_state=True)
    o_n, s_n = call(fn, {n: t.numpy() for n, t in inp.items()}, output_final_state=True)
    assert isinstance(o_n, np.ndarray) and isinstance(s_n, np.ndarray)
    assert np.array_equal(o_n, o_t.numpy()) and np.array_equal(s_n, s_t.numpy())


def test_no_final_state_unless_asked():
    inp = make_inputs("gdn", T=20)
    assert call(hanpu.chunk_gated_delta_rule, inp)[1] is None
    assert call(hanpu.fused_recurrent_gated_delta_rule, inp)[1] is None


@pytest.mark.parametrize("kind,chunk", [("gdn", hanpu.chunk_gated_delta_rule), ("kda", hanpu.chunk_kda)])
def test_strided_views_read_in_place(kind, chunk):
    """Transposed, sliced and reversed views give exactly the contiguous result."""
    inp = make_inputs(kind, B=1, T=50, H=2, K=16, V=16)
    contiguous = call(chunk, inp, output_final_state=True)
    strided = {}
    for name, t in inp.items():
        # Store the tensor with its last two dims swapped and view it back: same values, other strides.
        strided[name] = t.transpose(-1, -2).contiguous().transpose(-1, -2) if t.dim() >= 2 else t
    wide = torch.zeros(1, 50, 2, 40)
    wide[..., 3:19] = inp["q"]
    strided["q"] = wide[..., 3:19]  # a column slice of a wider buffer
    o, s = call(chunk, strided, output_final_state=True)
    assert not strided["q"].is_contiguous()
    assert torch.equal(o, contiguous[0]) and torch.equal(s, contiguous[1])
    rev = {n: t.numpy() for n, t in inp.items()}
    rev["v"] = np.ascontiguousarray(rev["v"][:, ::-1])[:, ::-1]  # negative time stride, same values
    o_n, _ = call(chunk, rev)
    assert np.array_equal(o_n, contiguous[0].numpy())


def test_varlen_equals_separate_sequences():
    lens = [0, 1, 63, 64, 65, 7]
    cu = torch.tensor(np.cumsum([0] + lens), dtype=torch.int64)
    inp = make_inputs("gdn", B=1, T=int(cu[-1]), H=2, HV=4, K=16, V=8, N=len(lens))
    o, s = call(hanpu.chunk_gated_delta_rule, inp, cu_seqlens=cu, output_final_state=True)
    for n, (a, b) in enumerate(zip(cu[:-1].tolist(), cu[1:].tolist())):
        part = {name: (t[:, a:b] if name != "initial_state" else t[n:n + 1]) for name, t in inp.items()}
        if b == a:
            assert torch.equal(s[n], inp["initial_state"][n])  # an empty sequence keeps its state
            continue
        o_n, s_n = call(hanpu.chunk_gated_delta_rule, part, output_final_state=True)
        assert torch.allclose(o[:, a:b], o_n, rtol=1e-5, atol=1e-6)
        assert torch.allclose(s[n:n + 1], s_n, rtol=1e-5, atol=1e-6)
    o32, _ = call(hanpu.chunk_gated_delta_rule, inp, cu_seqlens=cu.to(torch.int32))  # int32 is widened
    assert torch.equal(o32, o)


def test_state_v_first_is_the_transposed_state():
    inp = make_inputs("kda", T=30)
    o, s = call(hanpu.chunk_kda, inp, output_final_state=True)
    inp_vf = dict(inp, initial_state=inp["initial_state"].transpose(-1, -2).contiguous())
    o_vf, s_vf = call(hanpu.chunk_kda, inp_vf, output_final_state=True, state_v_first=True)
    assert torch.equal(o, o_vf) and torch.equal(s, s_vf.transpose(-1, -2))
    o_alias, _ = call(hanpu.chunk_kda, inp_vf, transpose_state_layout=True)  # FLA's deprecated alias
    assert torch.equal(o_alias, o)


@pytest.mark.parametrize("kind,fns", [("gdn", GDN_FNS), ("kda", KDA_FNS)])
def test_tiled_head_mapping_is_the_call_on_tiled_q_and_k(kind, fns):
    # ggml's mapping: value head hv reads q/k head hv % H, i.e. q and k tiled to HV heads (torch's repeat).
    inp = make_inputs(kind, T=70, H=2, HV=6)
    tiled = dict(inp, q=inp["q"].repeat(1, 1, 3, 1), k=inp["k"].repeat(1, 1, 3, 1))
    for fn in fns + (lambda *a, **kw: hanpu.reference(kind, *a, **kw),):
        o, s = call(fn, inp, output_final_state=True, head_mapping="tiled")
        o_t, s_t = call(fn, tiled, output_final_state=True)
        assert torch.equal(o, o_t) and torch.equal(s, s_t)
        assert not torch.equal(o, call(fn, inp)[0])  # grouped (the default) pairs other heads
    with pytest.raises(ValueError, match="head_mapping must be one of grouped, tiled; got 'modulo'"):
        call(fns[0], inp, head_mapping="modulo")


def test_in_kernel_gates_and_l2norm_match_explicit_forms():
    inp = make_inputs("gdn", T=60, H=2, HV=2)
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(1, 60, 2, generator=gen)
    b = torch.randn(1, 60, 2, generator=gen)
    A_log, dt_bias = torch.rand(2, generator=gen), torch.rand(2, generator=gen)
    q_raw, k_raw = inp["q"] * 3, inp["k"] * 2
    o_kernel, _ = hanpu.chunk_gated_delta_rule(
        q_raw, k_raw, inp["v"], a, b, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, A_log=A_log,
        dt_bias=dt_bias, use_beta_sigmoid_in_kernel=True)
    l2 = lambda x: x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)  # FLA's l2norm
    g = -A_log.exp() * torch.nn.functional.softplus(a + dt_bias)
    o_explicit, _ = hanpu.chunk_gated_delta_rule(l2(q_raw), l2(k_raw), inp["v"], g, b.sigmoid())
    assert nmse(o_kernel, o_explicit) < 1e-12


@pytest.mark.parametrize("kind,recurrent", [("gdn", hanpu.fused_recurrent_gated_delta_rule),
                                             ("kda", hanpu.fused_recurrent_kda)])
@pytest.mark.parametrize("T", [1, 3])
def test_decode_slots_updates_the_pool_in_place(kind, recurrent, T):
    # three sequences over a pool of five slots, the middle one padding: the active slots end where the
    # recurrence from the same states ends, the others keep their bits, padding rows are zero
    inp = make_inputs(kind, B=3, T=T, H=2, HV=4, state=False)
    pool = torch.randn(5, 4, 32, 16, generator=torch.Generator().manual_seed(3)) * 0.1
    pool0 = pool.clone()
    slots = torch.tensor([3, -1, 0])
    o = hanpu.decode_slots(kind, inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], pool, slots)
    want_o, want_s = call(recurrent, dict(inp, initial_state=pool0[[3, 1, 0]]), output_final_state=True)
    assert torch.equal(o[1], torch.zeros_like(o[1]))
    assert nmse(o[[0, 2]], want_o[[0, 2]]) < 1e-12
    assert nmse(pool[[3, 0]], want_s[[0, 2]]) < 1e-12
    assert torch.equal(pool[[1, 2, 4]], pool0[[1, 2, 4]])
    # a NumPy pool is updated in place too
    pool_np = pool0.numpy().copy()
    o_np = hanpu.decode_slots(kind, *(inp[n].numpy() for n in ("q", "k", "v", "g", "beta")), pool_np, [3, -1, 0])
    assert np.array_equal(o_np, o.numpy()) and np.array_equal(pool_np, pool.numpy())


def test_decode_slots_refuses_what_it_cannot_update_in_place():
    inp = make_inputs("gdn", B=2, T=1, state=False)
    args = [inp[n] for n in ("q", "k", "v", "g", "beta")]
    pool = torch.zeros(3, 2, 32, 16)
    with pytest.raises(ValueError, match="distinct"):
        hanpu.decode_slots("gdn", *args, pool, [1, 1])
    with pytest.raises(ValueError, match="out of range"):
        hanpu.decode_slots("gdn", *args, pool, [0, 3])
    assert torch.equal(pool, torch.zeros_like(pool))  # nothing written
    with pytest.raises(TypeError, match="state_pool must be float32"):
        hanpu.decode_slots("gdn", *args, pool.to(torch.bfloat16), [0, 1])
    ro = np.zeros((3, 2, 32, 16), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="state_pool is read-only"):
        hanpu.decode_slots("gdn", *args, ro, [0, 1])


def test_thread_count_does_not_change_bits():
    inp = make_inputs("gdn", B=1, T=300, H=5, K=32, V=32)
    runs = [call(hanpu.chunk_gated_delta_rule, inp, output_final_state=True, threads=t) for t in (1, 2, 3)]
    for o, s in runs[1:]:
        assert torch.equal(o, runs[0][0]) and torch.equal(s, runs[0][1])


def test_every_strategy_meets_the_bar():
    inp = make_inputs("kda", B=1, T=200, H=3, K=32, V=16)
    ref_o, ref_s = call(lambda *a, **k: hanpu.reference("kda", *a, **k), inp, output_final_state=True)
    for strategy in hanpu.cpu_features()["strategies"]:
        o, s = call(hanpu.chunk_kda, inp, output_final_state=True, strategy=strategy)
        assert nmse(o, ref_o) <= 1e-10 and nmse(s, ref_s) <= 1e-10, strategy


def test_gil_is_released_while_computing():
    """A Python thread keeps running while another is inside the engine."""
    inp = make_inputs("gdn", B=1, T=4096, H=8, K=64, V=64)
    done = threading.Event()
    ticks = [0]

    def spin():
        while not done.is_set():
            ticks[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        before = ticks[0]
        call(hanpu.chunk_gated_delta_rule, inp, threads=1)
        during = ticks[0] - before
    finally:
        done.set()
        t.join()
    assert during > 1000  # with the GIL held the spinner could not have run at all


# --- errors: a clear exception naming the argument, never a crash --------------------------------


def test_shape_errors_name_the_argument():
    inp = make_inputs("gdn", T=10, H=2, HV=2)
    with pytest.raises(ValueError, match="v"):
        call(hanpu.chunk_gated_delta_rule, dict(inp, v=inp["v"][:, :, :1]))
    with pytest.raises(ValueError, match="q must have 4 dims"):
        call(hanpu.chunk_gated_delta_rule, dict(inp, q=inp["q"][0]))
    with pytest.raises(ValueError, match="beta"):
        call(hanpu.chunk_gated_delta_rule, dict(inp, beta=inp["beta"][:, :5]))
    with pytest.raises(ValueError, match="initial_state"):
        call(hanpu.fused_recurrent_gated_delta_rule, dict(inp, initial_state=inp["initial_state"][:, :, :3]))
    with pytest.raises(ValueError, match="chunk_size"):
        call(hanpu.chunk_gated_delta_rule, inp, chunk_size=48)


def test_type_errors_name_the_argument():
    inp = make_inputs("gdn", T=10)
    with pytest.raises(TypeError, match="g has dtype torch.int32"):
        call(hanpu.chunk_gated_delta_rule, dict(inp, g=inp["g"].to(torch.int32)))
    with pytest.raises(TypeError, match="k must be a torch.Tensor or a numpy.ndarray"):
        call(hanpu.chunk_gated_delta_rule, dict(inp, k=inp["k"].tolist()))
    with pytest.raises(TypeError, match="unexpected keyword argument 'chunksize'"):
        call(hanpu.chunk_gated_delta_rule, inp, chunksize=64)
    with pytest.raises(ValueError, match="strategy must be one of"):
        call(hanpu.chunk_gated_delta_rule, inp, strategy="fast")
    with pytest.raises(ValueError, match="threads"):
        call(hanpu.chunk_gated_delta_rule, inp, threads=-2)
    with pytest.raises(ValueError, match="gk"):
        call(hanpu.fused_recurrent_gated_delta_rule, inp, gk=inp["g"])
    with pytest.raises(ValueError, match="head_first"):
        call(hanpu.chunk_gated_delta_rule, inp, head_first=True)


def test_cu_seqlens_errors():
    inp = make_inputs("gdn", B=2, T=10, state=False)
    with pytest.raises(ValueError, match="cu_seqlens"):
        call(hanpu.chunk_gated_delta_rule, inp, cu_seqlens=torch.tensor([0, 10]))  # needs B == 1
    inp = make_inputs("gdn", B=1, T=10, state=False)
    with pytest.raises(ValueError, match="cu_seqlens"):
        call(hanpu.chunk_gated_delta_rule, inp, cu_seqlens=torch.tensor([0, 6, 4, 10]))


def test_non_finite_inputs_rejected_on_request():
    inp = make_inputs("gdn", T=10)
    inp["v"][0, 3, 0, 2] = float("nan")
    o, _ = call(hanpu.chunk_gated_delta_rule, inp)
    assert torch.isnan(o).any()  # propagates by default (no scan)...
    with pytest.raises(ValueError, match="v"):
        call(hanpu.chunk_gated_delta_rule, inp, check_finite=True)  # ...and is named when asked


def test_autograd_is_refused_not_silently_dropped():
    inp = make_inputs("gdn", T=10)
    inp["q"].requires_grad_(True)
    with pytest.raises(NotImplementedError, match="q requires grad"):
        call(hanpu.chunk_gated_delta_rule, inp)
    with torch.no_grad():
        call(hanpu.chunk_gated_delta_rule, inp)


def _resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/statm"), reason="needs /proc/self/statm")
def test_ten_thousand_calls_keep_resident_memory_flat():
    """Repeated small calls reuse the engine's workspaces, plans and threads: resident memory stays flat."""
    inp = make_inputs("gdn", T=64, H=1, K=16, V=16, state=False)
    for i in range(10000):
        o, _ = hanpu.chunk_gated_delta_rule(inp["q"], inp["k"], inp["v"], g=inp["g"], beta=inp["beta"])
        if i == 999:
            after_warmup = _resident_bytes()
    growth = _resident_bytes() - after_warmup
    assert growth < 4 << 20, f"resident memory grew by {growth} bytes over 9,000 calls"


# --- precision modes (README "Precision modes") -------------------------------------------------------


@pytest.mark.parametrize("kind,chunk", [("gdn", hanpu.chunk_gated_delta_rule), ("kda", hanpu.chunk_kda)])
def test_precision_modes(kind, chunk):
    inp = make_inputs(kind, T=300, K=64, V=32, dtype=torch.bfloat16)
    ref_o, ref_s = hanpu.reference(kind, **inp, output_final_state=True, use_qk_l2norm_in_kernel=True)
    runs = {p: call(chunk, inp, output_final_state=True, use_qk_l2norm_in_kernel=True, precision=p)
            for p in ("auto", "exact", "bf16")}
    # auto on bf16 inputs is bf16 where the bf16 unit beats the fp32 FMA, else exact, bit for bit; the two
    # are different computations
    auto_mode = hanpu.cpu_features()["auto_bf16_mode"]
    assert auto_mode == ("bf16" if hanpu.cpu_features()["bf16_unit"] != "fp32 FMA on rounded operands" else "exact")
    assert torch.equal(runs["auto"][0], runs[auto_mode][0]) and torch.equal(runs["auto"][1], runs[auto_mode][1])
    assert not torch.equal(runs["exact"][1], runs["bf16"][1])
    floor = err_ratio(ref_o.to(torch.bfloat16), ref_o)
    assert err_ratio(runs["exact"][0], ref_o) <= 1.01 * floor  # exact sits on the bf16 rounding floor
    assert err_ratio(runs["bf16"][0], ref_o) <= 5e-3 and err_ratio(runs["bf16"][1], ref_s) <= 5e-3
    # float32 inputs: auto is exact
    f32 = {n: t.float() for n, t in inp.items()}
    assert torch.equal(call(chunk, f32, precision="auto")[0], call(chunk, f32, precision="exact")[0])
    with pytest.raises(ValueError, match="precision must be one of auto, exact, bf16"):
        call(chunk, inp, precision="fp8")
    with pytest.raises(TypeError, match="precision must be a str"):
        call(chunk, inp, precision=16)
