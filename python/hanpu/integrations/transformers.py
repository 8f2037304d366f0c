"""Run the linear-attention layers of Hugging Face transformers on hanpu's CPU engine.

    from hanpu.integrations import transformers as hanpu_tf
    hanpu_tf.patch()            # or: with hanpu_tf.patched(): ...
    model.generate(...)
    hanpu_tf.unpatch()

The GDN layers of Qwen3-Next, Qwen3.5 (and Qwen3.5-MoE) and the KDA layers of Kimi Linear call
module-level kernel functions (the chunked prefill and the token-by-token decode); patch() replaces
exactly those functions in their modeling modules and nothing else, so the layer's projections,
convolution, gating, norm and cache handling stay transformers' own. The replacements take the same
arguments and return the same (output, final_state) pair. When autograd needs the result (training),
the call goes to transformers' original function, since hanpu is forward-only.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from .. import ops

# modeling module -> (chunked prefill function, token-by-token function, operator kind)
_TARGETS: Dict[str, Tuple[str, str, str]] = {
    "transformers.models.qwen3_next.modeling_qwen3_next":
        ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule", "gdn"),
    "transformers.models.qwen3_5.modeling_qwen3_5":
        ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule", "gdn"),
    "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe":
        ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule", "gdn"),
    "transformers.models.kimi_linear.modeling_kimi_linear":
        ("chunk_kimi_delta_attention", "recurrent_kimi_delta_attention", "kda"),
}

# (module, function name) -> the original function, while patched
_originals: Dict[Tuple[str, str], Callable] = {}
_settings: Optional[Tuple[str, Optional[int]]] = None  # (strategy, threads) of the current patch
# Calls served since the last patch(): "chunk" and "recurrent" by hanpu, "fallback" by transformers.
_calls: Dict[str, int] = {"chunk": 0, "recurrent": 0, "fallback": 0}


def _needs_grad(*tensors) -> bool:
    import torch

    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _make_chunk(original: Callable, kind: str, strategy: str, threads: Optional[int]) -> Callable:
    run = ops.chunk_gated_delta_rule if kind == "gdn" else ops.chunk_kda

    @functools.wraps(original)
    def chunk(query, key, value, g, beta, chunk_size=64, initial_state=None, output_final_state=False,
              use_qk_l2norm_in_kernel=False, cu_seqlens=None, **kwargs):
        if _needs_grad(query, key, value, g, beta, initial_state):
            _calls["fallback"] += 1
            return original(query, key, value, g=g, beta=beta, chunk_size=chunk_size, initial_state=initial_state,
                            output_final_state=output_final_state,
                            use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, cu_seqlens=cu_seqlens, **kwargs)
        o, state = run(query, key, value, g, beta, initial_state=initial_state, output_final_state=output_final_state,
                       use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, cu_seqlens=cu_seqlens,
                       chunk_size=chunk_size, strategy=strategy, threads=threads)
        _calls["chunk"] += 1
        return o.to(query.dtype), state

    return chunk


def _make_recurrent(original: Callable, kind: str, threads: Optional[int]) -> Callable:
    run = ops.fused_recurrent_gated_delta_rule if kind == "gdn" else ops.fused_recurrent_kda

    @functools.wraps(original)
    def recurrent(query, key, value, g, beta, initial_state=None, output_final_state=False,
                  use_qk_l2norm_in_kernel=False, cu_seqlens=None, **kwargs):
        if _needs_grad(query, key, value, g, beta, initial_state):
            _calls["fallback"] += 1
            return original(query, key, value, g=g, beta=beta, initial_state=initial_state,
                            output_final_state=output_final_state,
                            use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, cu_seqlens=cu_seqlens, **kwargs)
        o, state = run(query, key, value, g=g, beta=beta, initial_state=initial_state,
                       output_final_state=output_final_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                       cu_seqlens=cu_seqlens, threads=threads)
        _calls["recurrent"] += 1
        return o.to(query.dtype), state

    return recurrent


def patch(strategy: str = "hanpu", threads: Optional[int] = None) -> List[str]:
    """Routes the linear-attention kernels of every supported model that this transformers provides
    to hanpu. Returns the patched modules. Patching again replaces the settings (strategy, threads)
    and keeps the true originals. Raises ImportError when transformers has none of the models."""
    if strategy not in ops._hanpu.strategies():
        raise ValueError(f"strategy must be one of {', '.join(ops._hanpu.strategies())}; got {strategy!r}")
    global _settings
    ops._resolve_threads(threads)
    patched = []
    for module_name, (chunk_name, recurrent_name, kind) in _TARGETS.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if not hasattr(module, chunk_name) or not hasattr(module, recurrent_name):
            continue
        for name, make in ((chunk_name, lambda f: _make_chunk(f, kind, strategy, threads)),
                           (recurrent_name, lambda f: _make_recurrent(f, kind, threads))):
            original = _originals.setdefault((module_name, name), getattr(module, name))
            setattr(module, name, make(original))
        patched.append(module_name)
    if not patched:
        import transformers

        raise ImportError(f"transformers {transformers.__version__} has none of the models hanpu patches "
                          f"({', '.join(m.split('.')[2] for m in _TARGETS)})")
    _settings = (strategy, threads)
    for key in _calls:
        _calls[key] = 0
    return patched


def unpatch() -> None:
    """Puts transformers' original functions back (a no-op when nothing is patched)."""
    global _settings
    _settings = None
    for (module_name, name), original in list(_originals.items()):
        setattr(importlib.import_module(module_name), name, original)
        del _originals[(module_name, name)]


def call_counts() -> Dict[str, int]:
    """Kernel calls since the last patch(): {"chunk", "recurrent"} served by hanpu, "fallback" sent
    back to transformers because autograd needed them."""
    return dict(_calls)


def is_patched() -> bool:
    return bool(_originals)


@contextlib.contextmanager
def patched(strategy: str = "hanpu", threads: Optional[int] = None) -> Iterator[List[str]]:
    """patch() for the duration of a with block; restores the state it found on exit."""
    before = _settings
    modules = patch(strategy, threads)
    try:
        yield modules
    finally:
        if before is None:
            unpatch()
        else:
            patch(*before)
