"""Run the linear-attention layers of Hugging Face transformers on hanpu's CPU engine.

    from hanpu.integrations import transformers as hanpu_tf
    hanpu_tf.patch()                  # or: with hanpu_tf.patched(): ...
    hanpu_tf.patch(level="layer")     # the whole layer, not only its kernel
    model.generate(...)
    hanpu_tf.unpatch()

level="kernel" (the default): the GDN layers of Qwen3-Next, Qwen3.5 (and Qwen3.5-MoE) and the KDA layers of
Kimi Linear call module-level kernel functions (the chunked prefill and the token-by-token decode); patch()
replaces exactly those functions in their modeling modules and nothing else, so the layer's projections,
convolution, gating, norm and cache handling stay transformers' own. The replacements take the same
arguments and return the same (output, final_state) pair.

level="layer": the layer classes' forward is replaced by one that runs the whole layer on hanpu
(hanpu.layers: projections, conv, gates, core, gated norm, output projection; prefill, continued prefill and
cached decode), reading and writing transformers' own cache tensors in place. The hanpu layer is built from
the module's weights on first use and rebuilt when they change.

Either way, when autograd needs the result (training) the call goes to transformers' original code, since
hanpu is forward-only; so do calls hanpu does not serve at layer level (packed sequences through
cu_seq_lens_q, a cache recording its past for rollback, tensors off the CPU, float16).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from .. import ops
from ..layers import LinearAttentionLayer

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

# modeling module -> its linear-attention layer classes (patch(level="layer") replaces their forward)
_LAYER_CLASSES: Dict[str, Tuple[str, ...]] = {
    "transformers.models.qwen3_next.modeling_qwen3_next": ("Qwen3NextGatedDeltaNet",),
    "transformers.models.qwen3_5.modeling_qwen3_5": ("Qwen3_5GatedDeltaNet",),
    "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe": ("Qwen3_5MoeGatedDeltaNet",),
    "transformers.models.kimi_linear.modeling_kimi_linear": ("KimiLinearDeltaAttention",),
}

# (module, attribute) -> the original: kernel functions, or (module, "Class.forward") for layer forwards
_originals: Dict[Tuple[str, str], Callable] = {}
_settings: Optional[Tuple[str, Optional[int], str, str]] = None  # (strategy, threads, level, precision)
# Calls served since the last patch(): "chunk" and "recurrent" (kernel level), "layer_prefill" and
# "layer_decode" (layer level) by hanpu, "fallback" by transformers.
_calls: Dict[str, int] = {"chunk": 0, "recurrent": 0, "layer_prefill": 0, "layer_decode": 0, "fallback": 0}


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


def _layer_for(module: Any, precision: str, strategy: str, threads: Optional[int]) -> LinearAttentionLayer:
    """The hanpu layer of a transformers module, built on first use and rebuilt when its weights change
    (another tensor, or an in-place update: the tensors' version counters) or the settings do."""
    key = (precision, tuple((p.data_ptr(), p._version, p.dtype) for p in module.parameters()))
    cached = getattr(module, "_hanpu_layer", None)
    if cached is None or cached[0] != key:
        cached = (key, LinearAttentionLayer.from_module(module, precision=precision))
        module._hanpu_layer = cached
    layer = cached[1]
    layer.strategy, layer.threads = strategy, threads
    return layer


def _serves(module: Any, hidden_states: Any, cache: Any, kwargs: Dict[str, Any]) -> bool:
    """Whether hanpu runs this layer call (else transformers' own forward does)."""
    import torch

    if torch.is_grad_enabled() and (hidden_states.requires_grad or any(p.requires_grad for p in module.parameters())):
        return False
    if hidden_states.device.type != "cpu" or hidden_states.dtype not in (torch.float32, torch.bfloat16):
        return False
    if kwargs.get("cu_seq_lens_q") is not None:
        return False
    return cache is None or not cache.is_recording_past(module.layer_idx)


def _make_layer_forward(original: Callable, precision: str, strategy: str, threads: Optional[int]) -> Callable:
    @functools.wraps(original)
    def forward(self, hidden_states, cache=None, attention_mask=None, **kwargs):
        import torch

        if cache is None and "cache_params" in kwargs:  # the argument's name before transformers 5.40
            cache = kwargs.pop("cache_params")
        if not _serves(self, hidden_states, cache, kwargs):
            _calls["fallback"] += 1
            return original(self, hidden_states, cache=cache, attention_mask=attention_mask, **kwargs)
        layer = _layer_for(self, precision, strategy, threads)
        x = hidden_states
        if attention_mask is not None and attention_mask.dim() == 2:  # padding tokens are zeroed, as transformers does
            x = (x * attention_mask[:, :, None]).to(x.dtype)
        B, T, _ = x.shape
        y = torch.empty_like(x, memory_format=torch.contiguous_format)
        if cache is None:
            layer.prefill(x, out=y)
            _calls["layer_prefill"] += 1
            return y
        spec, idx = layer.spec, self.layer_idx
        act = torch.bfloat16 if layer.activation_dtype == "BF16" else torch.float32
        conv, rec = cache.get_conv_state(idx), cache.get_recurrent_state(idx)
        if conv is None or rec is None:
            # First prefill: the states are made here, then handed to the cache, which stores them.
            conv = torch.zeros(B, spec["conv_dim"], spec["conv_kernel"], dtype=act)
            rec = torch.zeros(B, spec["num_v_heads"], spec["head_k_dim"], spec["head_v_dim"], dtype=torch.float32)
            layer.prefill(x, conv_state=conv, recurrent_state=rec, out=y)
            cache.update_conv_state(conv.to(x.dtype), idx, conv_kernel_size=spec["conv_kernel"])
            cache.update_recurrent_state(rec, idx)
            _calls["layer_prefill"] += 1
            return y
        # The cache's own tensors are read and updated in place (through a converted copy if the layer's
        # precision keeps its conv state in another dtype than the model's).
        work = conv if conv.dtype == act else conv.to(act)
        if T == 1:
            slots = torch.arange(B, dtype=torch.int64)
            layer.decode(x.view(B, -1), conv_pool=work, state_pool=rec, slots=slots, out=y.view(B, -1))
            _calls["layer_decode"] += 1
        else:
            layer.prefill(x, conv_state=work, recurrent_state=rec, continuing=True, out=y)
            _calls["layer_prefill"] += 1
        if work is not conv:
            conv.copy_(work)
        return y

    return forward


def patch(strategy: str = "hanpu", threads: Optional[int] = None, level: str = "kernel",
          precision: str = "auto") -> List[str]:
    """Routes the linear attention of every supported model that this transformers provides to hanpu:
    level="kernel" replaces the kernel functions, level="layer" the layer classes' forward (`precision`:
    auto, exact or bf16, for the layer level). Returns the patched modules. Patching again replaces the
    settings and keeps the true originals. Raises ImportError when transformers has none of the models."""
    if strategy not in ops._hanpu.strategies():
        raise ValueError(f"strategy must be one of {', '.join(ops._hanpu.strategies())}; got {strategy!r}")
    if level not in ("kernel", "layer"):
        raise ValueError(f"level must be 'kernel' or 'layer', got {level!r}")
    if precision not in ("auto", "exact", "bf16"):
        raise ValueError(f"precision must be auto, exact or bf16, got {precision!r}")
    global _settings
    ops._resolve_threads(threads)
    unpatch()  # one level at a time: the other level's replacements go back first
    patched = []
    for module_name, (chunk_name, recurrent_name, kind) in _TARGETS.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if level == "kernel":
            if not hasattr(module, chunk_name) or not hasattr(module, recurrent_name):
                continue
            for name, make in ((chunk_name, lambda f: _make_chunk(f, kind, strategy, threads)),
                               (recurrent_name, lambda f: _make_recurrent(f, kind, threads))):
                original = _originals.setdefault((module_name, name), getattr(module, name))
                setattr(module, name, make(original))
        else:
            classes = [getattr(module, c) for c in _LAYER_CLASSES[module_name] if hasattr(module, c)]
            if not classes:
                continue
            for cls in classes:
                original = _originals.setdefault((module_name, cls.__name__ + ".forward"), cls.forward)
                cls.forward = _make_layer_forward(original, precision, strategy, threads)
        patched.append(module_name)
    if not patched:
        import transformers

        raise ImportError(f"transformers {transformers.__version__} has none of the models hanpu patches "
                          f"({', '.join(m.split('.')[2] for m in _TARGETS)})")
    _settings = (strategy, threads, level, precision)
    for key in _calls:
        _calls[key] = 0
    return patched


def unpatch() -> None:
    """Puts transformers' original functions and forwards back (a no-op when nothing is patched)."""
    global _settings
    _settings = None
    for (module_name, name), original in list(_originals.items()):
        module = importlib.import_module(module_name)
        if name.endswith(".forward"):
            setattr(getattr(module, name[: -len(".forward")]), "forward", original)
        else:
            setattr(module, name, original)
        del _originals[(module_name, name)]


def call_counts() -> Dict[str, int]:
    """Calls since the last patch(): "chunk", "recurrent" (kernel level), "layer_prefill", "layer_decode"
    (layer level) served by hanpu, "fallback" sent back to transformers (autograd, or a call the layer
    level does not serve)."""
    return dict(_calls)


def is_patched() -> bool:
    return bool(_originals)


@contextlib.contextmanager
def patched(strategy: str = "hanpu", threads: Optional[int] = None, level: str = "kernel",
            precision: str = "auto") -> Iterator[List[str]]:
    """patch() for the duration of a with block; restores the state it found on exit."""
    before = _settings
    modules = patch(strategy, threads, level, precision)
    try:
        yield modules
    finally:
        if before is None:
            unpatch()
        else:
            patch(*before)
