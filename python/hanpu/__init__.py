"""hanpu: Gated DeltaNet and Kimi Delta Attention on the CPU with FLA's API.

    import hanpu
    o, state = hanpu.chunk_gated_delta_rule(q, k, v, g, beta, output_final_state=True)

Inputs are CPU ``torch.Tensor`` objects or NumPy arrays (float32, float16, bfloat16; any strides), read
in place; results are the same kind of object. ``hanpu.integrations.transformers.patch()`` makes the
linear-attention layers of Qwen3-Next, Qwen3.5 and Kimi Linear in Hugging Face transformers run here.
"""

from . import _hanpu
from .ops import (
    chunk_gated_delta_rule,
    chunk_kda,
    decode_slots,
    fused_recurrent_gated_delta_rule,
    fused_recurrent_kda,
    get_num_threads,
    reference,
    set_num_threads,
)

__version__: str = _hanpu.__version__


def cpu_features() -> dict:
    """What the engine runs with on this machine: the kernel set in use (Highway's target name, e.g.
    "AVX3" for AVX-512; HANPU_KERNELS=NAME picks another), every kernel set this build and CPU offer, best
    first, what runs the bf16 precision mode's GEMMs ("AVX512-BF16 dot products" where the CPU has them),
    the mode ``precision="auto"`` runs bf16 inputs in ("bf16" where that unit beats the fp32 FMA, else
    "exact"), the threads a call uses now, and the engine's dataflow strategies."""
    return {
        "simd_target": _hanpu.simd_target(),
        "bf16_unit": _hanpu.bf16_unit(),
        "auto_bf16_mode": _hanpu.auto_bf16_mode(),
        "kernel_sets": _hanpu.kernel_sets(),
        "threads": get_num_threads(),
        "strategies": _hanpu.strategies(),
    }


__all__ = [
    "__version__",
    "chunk_gated_delta_rule",
    "chunk_kda",
    "cpu_features",
    "decode_slots",
    "fused_recurrent_gated_delta_rule",
    "fused_recurrent_kda",
    "get_num_threads",
    "reference",
    "set_num_threads",
]
