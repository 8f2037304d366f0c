"""The README's bad-input table, Python column: every row through torch tensors and NumPy arrays, on the
chunk and fused_recurrent entry points. A bad argument raises ValueError or TypeError naming it; nothing
crashes; the caller's tensors are never written; unusual but valid layouts give the contiguous result."""

import re

import numpy as np
import pytest
import torch

import hanpu
from conftest import make_inputs

FNS = (hanpu.chunk_gated_delta_rule, hanpu.fused_recurrent_gated_delta_rule)
KINDS = ("torch", "numpy")


def as_kind(inp, kind):
    return {n: (t.numpy() if kind == "numpy" and isinstance(t, torch.Tensor) else t) for n, t in inp.items()}


def call(fn, inp, **kw):
    rest = {n: t for n, t in inp.items() if n not in ("q", "k", "v")}
    return fn(inp["q"], inp["k"], inp["v"], **rest, **kw)


def base():
    return make_inputs("gdn", B=1, T=12, H=2, HV=4, K=8, V=6)


# (row, mutation of the torch inputs, exception, message fragment). Mutations build torch tensors; the
# NumPy column converts them.
ROWS = [
    ("wrong dtype", lambda i: dict(i, q=i["q"].to(torch.int32)), TypeError, "q has dtype"),
    ("wrong rank", lambda i: dict(i, k=i["k"][0]), ValueError, "k must have 4 dims"),
    ("mismatched shapes", lambda i: dict(i, k=i["k"][:, :, :, :4]), ValueError, "k must have shape"),
    ("mismatched T", lambda i: dict(i, beta=i["beta"][:, :5]), ValueError, "beta must have shape"),
    ("HV not a multiple of H", lambda i: dict(i, v=i["v"][:, :, :3], beta=i["beta"][:, :, :3], g=i["g"][:, :, :3],
                                              initial_state=i["initial_state"][:, :3]),
     ValueError, "v.shape[2] (HV) = 3 must be a positive multiple of q.shape[2] (H) = 2"),
    ("K = 0", lambda i: dict(i, q=i["q"][..., :0], k=i["k"][..., :0], initial_state=i["initial_state"][:, :, :0]),
     ValueError, "q.shape[3] (K) = 0, expected 1..256"),
    ("K > 256", lambda i: dict(i, q=torch.zeros(1, 12, 2, 257), k=torch.zeros(1, 12, 2, 257), initial_state=None),
     ValueError, "q.shape[3] (K) = 257, expected 1..256"),
    ("V = 0", lambda i: dict(i, v=i["v"][..., :0], initial_state=i["initial_state"][..., :0]),
     ValueError, "v.shape[3] (V) = 0, expected 1..256"),
    ("V > 256", lambda i: dict(i, v=torch.zeros(1, 12, 4, 300), initial_state=None),
     ValueError, "v.shape[3] (V) = 300, expected 1..256"),
    ("zero tokens", lambda i: {n: (t[:, :0] if n != "initial_state" else t) for n, t in i.items()},
     ValueError, "q.shape[1] (T) must be >= 1"),
    ("zero batch", lambda i: {n: t[:0] for n, t in i.items()}, ValueError, "q.shape[0] (B) must be >= 1"),
    ("meta tensor", lambda i: dict(i, g=i["g"].to("meta")), ValueError, "g is on meta"),
    ("cu_seqlens of float dtype", lambda i: dict(_varlen(i), cu_seqlens=torch.tensor([0.0, 5.0, 12.0])),
     TypeError, "cu_seqlens has dtype"),
    ("cu_seqlens decreasing", lambda i: dict(_varlen(i), cu_seqlens=torch.tensor([0, 7, 5, 12])),
     ValueError, "cu_seqlens must be non-decreasing"),
    ("cu_seqlens not ending at T", lambda i: dict(_varlen(i), cu_seqlens=torch.tensor([0, 5, 11])),
     ValueError, "cu_seqlens[-1] must equal T = 12, got 11"),
    ("state of the v-first layout", lambda i: dict(i, initial_state=i["initial_state"].transpose(-1, -2)),
     ValueError, "initial_state must have shape [N, HV, K, V] = [1, 4, 8, 6], got [1, 4, 6, 8]"),
    ("state of the wrong dtype", lambda i: dict(i, initial_state=i["initial_state"].to(torch.int64)),
     TypeError, "initial_state has dtype"),
    ("state of the wrong batch", lambda i: dict(i, initial_state=torch.cat([i["initial_state"]] * 2)),
     ValueError, "initial_state must have shape [N, HV, K, V] = [1, 4, 8, 6], got [2, 4, 8, 6]"),
]


def _varlen(i):
    return dict(i, initial_state=None)


@pytest.mark.parametrize("fn", FNS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("row,mutate,exc,fragment", ROWS, ids=[r[0] for r in ROWS])
def test_bad_input_raises_naming_the_argument(row, mutate, exc, fragment, kind, fn):
    inp = mutate(base())
    if kind == "numpy":
        if any(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in inp.values()):
            pytest.skip("NumPy has no device: the meta/CUDA row is torch-only")
        inp = as_kind(inp, kind)
    with pytest.raises(exc, match=re.escape(fragment)):
        call(fn, inp, output_final_state=True)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fn", FNS, ids=lambda f: f.__name__)
def test_non_finite_inputs_with_and_without_check_finite(kind, fn):
    for bad in (float("nan"), float("inf")):
        inp = base()
        inp["k"][0, 11, 1, 7] = bad
        inp = as_kind(inp, kind)
        o, _ = call(fn, inp)  # propagates into the outputs of its own value heads (2, 3) only...
        o = torch.as_tensor(o)
        assert not torch.isfinite(o[0, 11, 2:]).all() and torch.isfinite(o[0, :, :2]).all()
        with pytest.raises(ValueError, match=r"k has a non-finite value \((nan|inf)\) at flat index"):
            call(fn, inp, check_finite=True)  # ...or is refused by name when asked


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fn", FNS, ids=lambda f: f.__name__)
def test_callers_state_is_untouched_by_a_failing_or_succeeding_call(kind, fn):
    inp = as_kind(base(), kind)
    before = torch.as_tensor(inp["initial_state"]).clone()
    bad = dict(inp, beta=inp["beta"][:, :5])
    with pytest.raises(ValueError):
        call(fn, bad, output_final_state=True)
    call(fn, inp, output_final_state=True)
    assert torch.equal(torch.as_tensor(inp["initial_state"]), before)
    for name in ("q", "k", "v", "g", "beta"):
        assert inp[name] is not None  # inputs are never replaced either


@pytest.mark.parametrize("fn", FNS, ids=lambda f: f.__name__)
def test_read_only_non_contiguous_and_broadcast_numpy_inputs_read_in_place(fn):
    inp = base()
    # every query and key the same (broadcast in time): built materialised for torch, strided for NumPy
    q0, k0 = inp["q"][:, :1], inp["k"][:, :1]
    inp["q"], inp["k"] = q0.expand(1, 12, 2, 8).contiguous(), k0.expand(1, 12, 2, 8).contiguous()
    want_o, want_s = call(fn, inp, output_final_state=True)
    arrays = {n: t.numpy() for n, t in inp.items()}
    arrays["q"] = np.broadcast_to(q0.numpy(), (1, 12, 2, 8))  # stride 0 along T, read-only
    arrays["k"] = np.broadcast_to(k0.numpy(), (1, 12, 2, 8))
    wide = np.zeros((1, 12, 4, 9), dtype=np.float32)
    wide[:, :, :, 2:8] = arrays["v"]
    arrays["v"] = wide[:, :, :, 2:8]  # non-contiguous slice
    for a in arrays.values():
        a.setflags(write=False)
    assert not arrays["q"].flags.writeable and not arrays["v"].flags.c_contiguous
    o, s = call(fn, arrays, output_final_state=True)
    assert np.array_equal(o, want_o.numpy()) and np.array_equal(s, want_s.numpy())


def test_broadcast_torch_inputs_read_in_place():
    inp = base()
    g_row = inp["g"][:, :1]
    inp["g"] = g_row.expand(1, 12, 4)  # stride 0 along T
    want = call(hanpu.chunk_gated_delta_rule, dict(inp, g=inp["g"].contiguous()))[0]
    assert torch.equal(call(hanpu.chunk_gated_delta_rule, inp)[0], want)
