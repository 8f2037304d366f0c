"""Shared inputs and references for the Python tests.

Accuracy is NMSE = sum (y - y_ref)^2 / sum y_ref^2 (DESIGN.md §1) against the fp64 reference, with
the operators' bars: 1e-10 for float32 outputs and states; for half-precision outputs, twice the NMSE
of the reference merely rounded to that dtype, plus 1e-10 (the rounding floor is the bar).
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F


def nmse(y, ref) -> float:
    y = torch.as_tensor(y).double()
    ref = torch.as_tensor(ref).double()
    den = float((ref * ref).sum())
    return float(((y - ref) ** 2).sum()) / max(den, 1e-300)


def err_ratio(y, ref) -> float:
    """FLA's test metric (fla/utils.py get_err_ratio): RMS(y - ref) / RMS(ref)."""
    y = torch.as_tensor(y).double()
    ref = torch.as_tensor(ref).double()
    return float(((y - ref) ** 2).mean().sqrt() / (ref ** 2).mean().sqrt().clamp_min(1e-300))


def bar(ref, dtype: torch.dtype) -> float:
    """The operators' accuracy bar for an output of `dtype` against the fp64 `ref`."""
    ref = torch.as_tensor(ref).double()
    if dtype == torch.float32:
        return 1e-10
    return 2 * nmse(ref.to(dtype), ref) + 1e-10


def make_inputs(kind: str, B=1, T=100, H=2, HV=None, K=32, V=16, dtype=torch.float32, seed=0, state=True, N=None):
    """Realistic inputs in FLA's layout: unit-norm keys, log-sigmoid gates, beta in (0, 1). Returns a
    dict of FLA argument names; the initial state has N (default B) sequences."""
    HV = HV or H
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, T, H, K, generator=gen)
    k = F.normalize(torch.randn(B, T, H, K, generator=gen), dim=-1)
    v = torch.randn(B, T, HV, V, generator=gen)
    gshape = (B, T, HV) if kind == "gdn" else (B, T, HV, K)
    g = F.logsigmoid(torch.randn(*gshape, generator=gen)) * 0.5
    beta = torch.rand(B, T, HV, generator=gen)
    out = dict(q=q.to(dtype), k=k.to(dtype), v=v.to(dtype), g=g, beta=beta)
    if state:
        out["initial_state"] = torch.randn(N or B, HV, K, V, generator=gen) * 0.1
    return out


def _load_fla_naive():
    """FLA's own naive references, loaded from the installed flash-linear-attention package.

    FLA's package root imports triton, which has no CPU build here, so `import fla` fails on this
    machine; the two naive modules need only torch and einops, so they are loaded by path instead."""
    spec = importlib.util.find_spec("fla")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = list(spec.submodule_search_locations)[0]
    mods = {}
    for name, rel in (("gdn", "ops/gated_delta_rule/naive.py"), ("kda", "ops/kda/naive.py")):
        path = os.path.join(root, rel)
        s = importlib.util.spec_from_file_location(f"_fla_naive_{name}", path)
        m = importlib.util.module_from_spec(s)
        s.loader.exec_module(m)
        mods[name] = m
    return mods


@pytest.fixture(scope="session")
def fla_naive():
    mods = _load_fla_naive()
    if mods is None:
        if os.environ.get("HANPU_REQUIRE_FLA"):
            pytest.fail("HANPU_REQUIRE_FLA is set but flash-linear-attention is not installed")
        pytest.skip("flash-linear-attention is not installed (pip install flash-linear-attention)")
    return mods


@pytest.fixture(autouse=True)
def _no_leftover_patch():
    """Every test starts and ends with transformers unpatched."""
    yield
    from hanpu.integrations import transformers as ht

    ht.unpatch()


__all__ = ["bar", "err_ratio", "make_inputs", "nmse", "np"]
