"""Whole linear-attention layers on hanpu: projections, short convolution, gates, the GDN/KDA core, gated
RMSNorm and output projection in one C++ call (hanpu/layer.h), prefill and decode.

    from hanpu.layers import LinearAttentionLayer
    layer = LinearAttentionLayer.from_module(model.model.layers[0].linear_attn)   # a transformers module
    layer = LinearAttentionLayer.from_checkpoint("Qwen3.5-0.8B", layer=0)           # or a checkpoint
    y = layer.prefill(x)                                   # x [B, T, hidden]
    y = layer.prefill(x, conv_state=c, recurrent_state=s)  # fills the states for decoding
    y = layer.decode(x1, conv_pool=c, state_pool=s, slots=idx)   # x1 [N, hidden], pools updated in place

States, as transformers' cache holds them: conv_state [B, conv_dim, conv_kernel] in the layer's activation
dtype (the last conv_kernel projected q/k/v inputs), recurrent_state [B, HV, K, V] float32. Supported
modules: Qwen3NextGatedDeltaNet, Qwen3_5GatedDeltaNet (and the MoE variant's), KimiLinearDeltaAttention.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from . import _hanpu
from . import _tensors as tn
from .ops import _resolve_threads

_PRECISIONS = ("auto", "exact", "bf16")


def _check_precision(precision: str) -> None:
    if precision not in _PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(_PRECISIONS)}; got {precision!r}")


def module_arch(module: Any) -> Optional[str]:
    """The layout of a transformers linear-attention module, read off its projections, or None."""
    if hasattr(module, "in_proj_qkvz") and hasattr(module, "in_proj_ba"):
        return "qwen3_next"
    if hasattr(module, "in_proj_qkv") and hasattr(module, "in_proj_z"):
        return "qwen3_5"
    if hasattr(module, "forget_gate") and hasattr(module, "g_a_proj"):
        return "kimi_linear"
    return None


def module_spec(module: Any) -> Dict[str, Any]:
    """The layer dimensions of a supported transformers module (its own attributes)."""
    arch = module_arch(module)
    if arch is None:
        raise TypeError(f"{type(module).__name__} is not a linear-attention layer hanpu runs "
                        "(Qwen3-Next / Qwen3.5 GatedDeltaNet, Kimi Linear KimiLinearDeltaAttention)")
    activation = getattr(module, "activation", "silu")
    if activation not in ("silu", "swish"):
        raise ValueError(f"{type(module).__name__}: the short convolution's activation must be silu, got {activation!r}")
    if arch == "kimi_linear":
        heads, dim = module.num_heads, module.head_dim
        dims = dict(num_k_heads=heads, num_v_heads=heads, head_k_dim=dim, head_v_dim=dim)
    else:
        dims = dict(num_k_heads=module.num_k_heads, num_v_heads=module.num_v_heads, head_k_dim=module.head_k_dim,
                    head_v_dim=module.head_v_dim)
    return dict(arch=arch, hidden_size=module.hidden_size, conv_kernel=module.conv_kernel_size,
                rms_norm_eps=float(module.layer_norm_epsilon), **dims)


class LinearAttentionLayer:
    """One linear-attention layer on hanpu's CPU engine (build it with from_module or from_checkpoint)."""

    def __init__(self, impl: Any, *, threads: Optional[int] = None, strategy: str = "hanpu"):
        self._impl = impl
        self.threads = threads
        self.strategy = strategy
        self.last_breakdown: Dict[str, float] = {}

    @classmethod
    def from_module(cls, module: Any, *, precision: str = "auto", threads: Optional[int] = None,
                    strategy: str = "hanpu") -> "LinearAttentionLayer":
        """Copies the weights of a transformers module (auto precision: bf16 for a bf16 module)."""
        _check_precision(precision)
        spec = module_spec(module)
        with tn.torch_module().no_grad():  # a module implies torch
            tensors = {name: tn.as_array(f"weights[{name!r}]", t.detach()) for name, t in module.state_dict().items()}
        weights = {name: tn.describe(t) for name, t in tensors.items()}
        return cls(_hanpu.layer_create(spec["arch"], spec, weights, precision), threads=threads, strategy=strategy)

    @classmethod
    def from_checkpoint(cls, model_dir: str, layer: int, *, precision: str = "auto", threads: Optional[int] = None,
                        strategy: str = "hanpu") -> "LinearAttentionLayer":
        """Reads layer `layer` of a Hugging Face checkpoint directory (config.json + safetensors)."""
        _check_precision(precision)
        if isinstance(layer, bool) or not isinstance(layer, int):
            raise TypeError(f"layer must be an int, got {type(layer).__name__}")
        return cls(_hanpu.layer_load(str(model_dir), layer, precision), threads=threads, strategy=strategy)

    @property
    def spec(self) -> Dict[str, Any]:
        return self._impl.spec

    @property
    def precision(self) -> str:
        """"exact" (fp32 throughout) or "bf16" (rounded where transformers' bf16 model rounds)."""
        return self._impl.precision

    @property
    def activation_dtype(self) -> str:
        """"F32" or "BF16": the dtype of the conv state and of the layer's rounded activations."""
        return self._impl.activation_dtype

    def _run_args(self, breakdown: bool):
        return dict(threads=_resolve_threads(self.threads), strategy=self.strategy, breakdown=breakdown)

    def prefill(self, hidden_states: Any, *, conv_state: Any = None, recurrent_state: Any = None,
                continuing: bool = False, out: Any = None, breakdown: bool = False) -> Any:
        """y [B, T, hidden] for hidden_states [B, T, hidden]. With conv_state and recurrent_state (one row per
        sequence) the final states are written into them; with continuing=True the prefill starts from
        them (a prompt continued) instead of from zeros."""
        x = tn.as_array("hidden_states", hidden_states)
        if len(x.shape) != 3:
            raise ValueError(f"hidden_states must have 3 dims [B, T, hidden], got shape {tuple(x.shape)}")
        y = out if out is not None else tn.empty_like_kind(x, tuple(x.shape), tn.dtype_of(x))
        y = tn.as_array("out", y)
        states = [None if s is None else tn.describe(tn.as_array(n, s))
                  for n, s in (("conv_state", conv_state), ("recurrent_state", recurrent_state))]
        self.last_breakdown = self._impl.prefill(tn.describe(x), tn.describe(y), states[0], states[1], bool(continuing),
                                                 **self._run_args(breakdown))
        return y

    def decode(self, hidden_states: Any, *, conv_pool: Any, state_pool: Any, slots: Any, out: Any = None,
               breakdown: bool = False) -> Any:
        """One token per sequence: y [N, hidden] for hidden_states [N, hidden]. Sequence n reads and updates,
        in place, conv_pool[slots[n]] ([P, conv_dim, conv_kernel]) and state_pool[slots[n]] ([P, HV, K, V]
        float32); a negative slot is padding (zero output, nothing touched)."""
        x = tn.as_array("hidden_states", hidden_states)
        if len(x.shape) != 2:
            raise ValueError(f"hidden_states must have 2 dims [N, hidden], got shape {tuple(x.shape)}")
        y = out if out is not None else tn.empty_like_kind(x, tuple(x.shape), tn.dtype_of(x))
        y = tn.as_array("out", y)
        arrays = [tn.as_array("conv_pool", conv_pool), tn.as_array("state_pool", state_pool),
                  tn.as_array("slots", slots, index=True)]
        self.last_breakdown = self._impl.decode(tn.describe(x), tn.describe(y), *(tn.describe(a) for a in arrays),
                                                **self._run_args(breakdown))
        return y


__all__ = ["LinearAttentionLayer", "module_arch", "module_spec"]
