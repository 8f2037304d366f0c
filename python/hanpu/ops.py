"""FLA's four entry points, with FLA's signatures, defaults and return values, on hanpu's CPU engine.

Shapes (FLA's time-major convention; B batch, T tokens, H q/k heads, HV value heads, N sequences):
    q, k [B, T, H, K]; v [B, T, HV, V]; g [B, T, HV] (GDN) or [B, T, HV, K] (KDA); beta [B, T, HV];
    initial_state / final_state [N, HV, K, V] ([N, HV, V, K] with state_v_first); cu_seqlens [N + 1].
Value head hv reads q/k head hv // (HV // H) as FLA's kernels do, or hv % H with ``head_mapping="tiled"``
(ggml's GGML_OP_GATED_DELTA_NET, whose llama.cpp tensors tile the q/k heads).
The chunk functions return ``o`` in q's dtype, the fused_recurrent ones in v's dtype; ``final_state``
is always float32 (FLA's rule). Everything is forward-only: hanpu has no backward pass.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from . import _hanpu
from . import _tensors as tn

_threads = 0

# FLA keyword arguments that carry no meaning on the CPU and are accepted as FLA accepts them.
_IGNORED = ("cu_seqlens_cpu", "chunk_indices", "safe_gate", "disable_recompute")


def set_num_threads(threads: int) -> None:
    """Threads for every later call (0: every CPU this process may use, the default)."""
    global _threads
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise ValueError(f"threads must be an int >= 0 (0: every CPU), got {threads!r}")
    _threads = threads


def get_num_threads() -> int:
    """Threads a call uses now (the setting of set_num_threads resolved against the CPUs available)."""
    return _hanpu.resolve_threads(_threads)


def _check_grad(fn: str, tensors) -> None:
    torch = tn.torch_module()
    if torch is None or not torch.is_grad_enabled():
        return
    for name, t in tensors.items():
        if tn.is_torch(t) and t.requires_grad:
            raise NotImplementedError(
                f"{fn}: {name} requires grad, but hanpu is forward-only (no backward pass); "
                "call it under torch.no_grad() or torch.inference_mode()")


def _take_kwargs(fn: str, kwargs: Dict[str, Any], allowed: Tuple[str, ...]) -> Dict[str, Any]:
    """Consumes FLA's **kwargs: the ones in `allowed` are returned, FLA's no-ops are dropped, and
    anything else is a TypeError, as an unknown keyword argument is in Python."""
    taken = {}
    for key, value in kwargs.items():
        if key in allowed:
            taken[key] = value
        elif key == "head_first":
            if value:
                raise ValueError(f"{fn}: head_first=True was removed from FLA; pass [B, T, H, K] tensors")
        elif key == "cp_context":
            if value is not None:
                raise ValueError(f"{fn}: cp_context (multi-device context parallelism) is not supported")
        elif key not in _IGNORED:
            raise TypeError(f"{fn}() got an unexpected keyword argument '{key}'")
    return taken


def _rank4(name: str, x: Any) -> Tuple[int, ...]:
    if len(x.shape) != 4:
        raise ValueError(f"{name} must have 4 dims [B, T, heads, dim], got shape {tuple(x.shape)}")
    return tuple(x.shape)


_PRECISIONS = ("auto", "exact", "bf16")
_HEAD_MAPPINGS = ("grouped", "tiled")


def _choice(name: str, value: Any, choices: Tuple[str, ...]) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return value


def _options(scale, use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
             state_v_first, lower_bound=None, chunk_size=64, check_finite=False, precision="auto",
             head_mapping="grouped") -> Dict[str, Any]:
    _choice("precision", precision, _PRECISIONS)
    _choice("head_mapping", head_mapping, _HEAD_MAPPINGS)
    for name, value in (("scale", scale), ("lower_bound", lower_bound)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise TypeError(f"{name} must be a float or None, got {type(value).__name__}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        raise TypeError(f"chunk_size must be an int, got {type(chunk_size).__name__}")
    return dict(scale=None if scale is None else float(scale),
                lower_bound=None if lower_bound is None else float(lower_bound), chunk_size=chunk_size,
                use_qk_l2norm_in_kernel=bool(use_qk_l2norm_in_kernel), use_gate_in_kernel=bool(use_gate_in_kernel),
                use_beta_sigmoid_in_kernel=bool(use_beta_sigmoid_in_kernel), allow_neg_eigval=bool(allow_neg_eigval),
                state_v_first=bool(state_v_first), check_finite=bool(check_finite), precision=precision,
                head_mapping=head_mapping)


class _Call:
    """One operator call: its arrays checked and described, its outputs allocated like q."""

    def __init__(self, fn: str, q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias, state_v_first):
        raw = dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=initial_state, A_log=A_log, dt_bias=dt_bias)
        _check_grad(fn, {n: t for n, t in raw.items() if t is not None})
        self.fn = fn
        self.arrays = {n: tn.optional(n, t) for n, t in raw.items()}
        self.arrays["cu_seqlens"] = tn.optional("cu_seqlens", cu_seqlens, index=True)
        B, T, _, K = _rank4("q", self.arrays["q"])
        _rank4("k", self.arrays["k"])
        _, _, HV, V = _rank4("v", self.arrays["v"])
        cu = self.arrays["cu_seqlens"]
        if cu is not None and len(cu.shape) != 1:
            raise ValueError(f"cu_seqlens must have 1 dim [N + 1], got shape {tuple(cu.shape)}")
        self.B, self.T, self.HV, self.K, self.V = B, T, HV, K, V
        self.N = B if cu is None else max(int(cu.shape[0]) - 1, 0)
        self.state_shape = (self.N, HV, V, K) if state_v_first else (self.N, HV, K, V)
        self.like = self.arrays["q"]

    def output(self, dtype: str, *, zero: bool = False):
        return tn.empty_like_kind(self.like, (self.B, self.T, self.HV, self.V), dtype, zero=zero)

    def state(self):
        return tn.empty_like_kind(self.like, self.state_shape, "F32", zero=True)

    def descriptors(self, **outputs) -> Dict[str, Any]:
        d = {n: tn.describe(a) for n, a in self.arrays.items() if a is not None}
        d.update({n: tn.describe(a) for n, a in outputs.items() if a is not None})
        return d


def _resolve_threads(threads: Optional[int]) -> int:
    if threads is None:
        return _threads
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise ValueError(f"threads must be an int >= 0 (0: every CPU) or None, got {threads!r}")
    return threads


def _chunk(fn, kind, q, k, v, g, beta, initial_state, output_final_state, cu_seqlens, opts, extra,
           strategy, threads):
    call = _Call(fn, q, k, v, g, beta, initial_state, cu_seqlens, extra.get("A_log"), extra.get("dt_bias"),
                 opts["state_v_first"])
    o = call.output(tn.dtype_of(call.arrays["q"]))
    final_state = call.state() if output_final_state else None
    if not isinstance(strategy, str):
        raise TypeError(f"strategy must be a str, got {type(strategy).__name__}")
    _hanpu.chunk(kind, call.descriptors(o=o, final_state=final_state), opts, strategy, _resolve_threads(threads))
    return o, final_state


def _recurrent(fn, kind, q, k, v, g, beta, initial_state, output_final_state, cu_seqlens, opts, A_log, dt_bias,
               threads):
    call = _Call(fn, q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias, opts["state_v_first"])
    o = call.output(tn.dtype_of(call.arrays["v"]))
    threads = _resolve_threads(threads)
    init = call.arrays["initial_state"]
    if call.T == 1 and call.arrays["cu_seqlens"] is None and (init is None or tuple(init.shape) == call.state_shape):
        # One decode step per sequence: the engine's SIMD decode kernel updates state slots in place, so
        # the final state starts as a float32 copy of the initial one and slot n is sequence n.
        pool = call.state()
        if init is not None:
            tn.copy_into(pool, init)
        call.arrays["initial_state"] = None
        slots = np.arange(call.N, dtype=np.int64)
        _hanpu.recurrent(kind, call.descriptors(o=o, state_pool=pool, slot_indices=slots), opts, threads)
        return o, pool if output_final_state else None
    final_state = call.state() if output_final_state else None
    _hanpu.recurrent(kind, call.descriptors(o=o, final_state=final_state), opts, threads)
    return o, final_state


def chunk_gated_delta_rule(q, k, v, g, beta, scale: Optional[float] = None, initial_state=None,
                           output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
                           use_beta_sigmoid_in_kernel: bool = False, allow_neg_eigval: bool = False,
                           state_v_first: bool = False, cu_seqlens=None, *, strategy: str = "hanpu",
                           threads: Optional[int] = None, check_finite: bool = False, precision: str = "auto",
                           head_mapping: str = "grouped", **kwargs):
    """Gated DeltaNet prefill, chunkwise (FLA's ``chunk_gated_delta_rule``).

    FLA's keyword arguments in ``kwargs``: ``chunk_size`` (16, 32 or 64), ``use_gate_in_kernel`` with
    ``A_log`` [HV] and ``dt_bias`` [HV] (g is then the raw gate input ``a``), ``transpose_state_layout``
    (alias of ``state_v_first``). hanpu's own: ``strategy`` (hanpu, fla, fla-megakernel, flashqla,
    native: the engine's dataflows, identical in result up to rounding), ``threads`` (None: the
    set_num_threads setting), ``check_finite`` (reject NaN/Inf inputs, naming the tensor), ``precision``
    ("auto": bf16 GEMM operands for bf16 q where the CPU's bf16 unit beats its fp32 FMA, as
    ``hanpu.cpu_features()["auto_bf16_mode"]`` says, else "exact" fp32 operands; or either explicitly —
    README "Precision modes"), ``head_mapping`` ("grouped": value head hv reads q/k head hv // (HV // H), as
    FLA; "tiled": hv % H, as ggml).

    Returns ``(o, final_state)``: o [B, T, HV, V] in q's dtype; final_state float32 or None.
    """
    fn = "chunk_gated_delta_rule"
    extra = _take_kwargs(fn, kwargs, ("chunk_size", "use_gate_in_kernel", "A_log", "dt_bias",
                                      "transpose_state_layout"))
    state_v_first = state_v_first or bool(extra.get("transpose_state_layout", False))
    opts = _options(scale, use_qk_l2norm_in_kernel, extra.get("use_gate_in_kernel", False), use_beta_sigmoid_in_kernel,
                    allow_neg_eigval, state_v_first, chunk_size=extra.get("chunk_size", 64), check_finite=check_finite,
                    precision=precision, head_mapping=head_mapping)
    return _chunk(fn, "gdn", q, k, v, g, beta, initial_state, output_final_state, cu_seqlens, opts, extra,
                  strategy, threads)


def chunk_kda(q, k, v, g, beta, scale: Optional[float] = None, initial_state=None, output_final_state: bool = False,
              use_qk_l2norm_in_kernel: bool = False, use_gate_in_kernel: bool = False,
              use_beta_sigmoid_in_kernel: bool = False, allow_neg_eigval: bool = False, safe_gate: bool = False,
              lower_bound: Optional[float] = None, disable_recompute: bool = False,
              return_intermediate_states: bool = False, state_v_first: bool = False, cu_seqlens=None, *,
              strategy: str = "hanpu", threads: Optional[int] = None, check_finite: bool = False,
              precision: str = "auto", head_mapping: str = "grouped", **kwargs):
    """Kimi Delta Attention prefill, chunkwise (FLA's ``chunk_kda``).

    g is the per-channel log decay [B, T, HV, K], or the raw gate input with ``use_gate_in_kernel``
    (then ``A_log`` [HV] and ``dt_bias`` [HV * K] come in ``kwargs``; ``lower_bound`` selects FLA's
    lower-bound gate form). ``safe_gate`` and ``disable_recompute`` are accepted and change nothing on
    the CPU (every exponent here is already a difference G_i - G_j <= 0). hanpu's own keyword arguments
    as for chunk_gated_delta_rule.

    Returns ``(o, final_state)``: o [B, T, HV, V] in q's dtype; final_state float32 or None.
    """
    fn = "chunk_kda"
    if return_intermediate_states:
        raise ValueError(f"{fn}: return_intermediate_states=True is not supported (hanpu keeps no per-chunk states)")
    extra = _take_kwargs(fn, kwargs, ("chunk_size", "A_log", "dt_bias", "transpose_state_layout"))
    state_v_first = state_v_first or bool(extra.get("transpose_state_layout", False))
    opts = _options(scale, use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
                    state_v_first, lower_bound, chunk_size=extra.get("chunk_size", 64), check_finite=check_finite,
                    precision=precision, head_mapping=head_mapping)
    return _chunk(fn, "kda", q, k, v, g, beta, initial_state, output_final_state, cu_seqlens, opts, extra,
                  strategy, threads)


def fused_recurrent_gated_delta_rule(q, k, v, g=None, gk=None, gv=None, beta=None, scale: Optional[float] = None,
                                     initial_state=None, output_final_state: bool = False,
                                     use_qk_l2norm_in_kernel: bool = False, use_gate_in_kernel: bool = False,
                                     A_log=None, dt_bias=None, use_beta_sigmoid_in_kernel: bool = False,
                                     allow_neg_eigval: bool = False, state_v_first: bool = False, cu_seqlens=None,
                                     *, threads: Optional[int] = None, check_finite: bool = False,
                                     head_mapping: str = "grouped", **kwargs):
    """Gated DeltaNet token by token (FLA's ``fused_recurrent_gated_delta_rule``), meant for decode.

    ``g`` None means no decay (g = 0) and ``beta`` None means beta = 1, as in FLA; ``gk``/``gv``
    (FLA's other gating variants) are not supported. One token per sequence without cu_seqlens runs
    the engine's multi-threaded decode kernel. ``threads``, ``check_finite`` and ``head_mapping`` as for
    chunk_gated_delta_rule.

    Returns ``(o, final_state)``: o [B, T, HV, V] in v's dtype; final_state float32 or None.
    """
    fn = "fused_recurrent_gated_delta_rule"
    for name, value in (("gk", gk), ("gv", gv)):
        if value is not None:
            raise ValueError(f"{fn}: {name} (per-key/per-value gating) is not supported; pass g")
    extra = _take_kwargs(fn, kwargs, ("transpose_state_layout",))
    state_v_first = state_v_first or bool(extra.get("transpose_state_layout", False))
    opts = _options(scale, use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
                    state_v_first, check_finite=check_finite, head_mapping=head_mapping)
    if g is None or beta is None:
        vv = tn.as_array("v", v)
        _rank4("v", vv)
        if g is None:
            g = tn.empty_like_kind(vv, tuple(vv.shape[:3]), "F32", zero=True)
        if beta is None:
            beta = tn.empty_like_kind(vv, tuple(vv.shape[:3]), "F32", zero=True) + 1
    return _recurrent(fn, "gdn", q, k, v, g, beta, initial_state, output_final_state, cu_seqlens, opts, A_log,
                      dt_bias, threads)


def fused_recurrent_kda(q, k, v, g, beta, A_log=None, dt_bias=None, scale: Optional[float] = None, initial_state=None,
                        output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
                        use_gate_in_kernel: bool = False, use_beta_sigmoid_in_kernel: bool = False,
                        allow_neg_eigval: bool = False, lower_bound: Optional[float] = None,
                        state_v_first: bool = False, cu_seqlens=None, *, threads: Optional[int] = None,
                        check_finite: bool = False, head_mapping: str = "grouped", **kwargs):
    """Kimi Delta Attention token by token (FLA's ``fused_recurrent_kda``), meant for decode. ``threads``,
    ``check_finite`` and ``head_mapping`` as for chunk_gated_delta_rule.

    Returns ``(o, final_state)``: o [B, T, HV, V] in v's dtype; final_state float32 or None.
    """
    fn = "fused_recurrent_kda"
    extra = _take_kwargs(fn, kwargs, ("transpose_state_layout",))
    state_v_first = state_v_first or bool(extra.get("transpose_state_layout", False))
    opts = _options(scale, use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
                    state_v_first, lower_bound, check_finite=check_finite, head_mapping=head_mapping)
    return _recurrent(fn, "kda", q, k, v, g, beta, initial_state, output_final_state, cu_seqlens, opts, A_log,
                      dt_bias, threads)


def _pool_array(x: Any) -> Any:
    """The state pool as the array the engine writes: never a copy, so the caller sees the updates."""
    if isinstance(x, np.ndarray) and not x.flags.writeable:
        raise ValueError("state_pool is read-only; decode_slots updates it in place")
    if isinstance(x, np.ndarray) and any(s % x.itemsize for s in x.strides):
        raise ValueError("state_pool's strides must be whole elements; decode_slots updates it in place")
    pool = tn.as_array("state_pool", x)
    if tn.dtype_of(pool) != "F32":
        raise TypeError(f"state_pool must be float32 (the states are kept in fp32), got {tn.dtype_of(pool)}")
    return pool


def decode_slots(kind: str, q, k, v, g, beta, state_pool, slot_indices, scale: Optional[float] = None,
                 use_qk_l2norm_in_kernel: bool = False, use_gate_in_kernel: bool = False, A_log=None, dt_bias=None,
                 use_beta_sigmoid_in_kernel: bool = False, allow_neg_eigval: bool = False,
                 lower_bound: Optional[float] = None, state_v_first: bool = False, cu_seqlens=None, *,
                 threads: Optional[int] = None, check_finite: bool = False, head_mapping: str = "grouped"):
    """Continuous-batching decode over a pool of state slots, updated in place (what vLLM's fused_recurrent
    does with ``ssm_state_indices`` and ``inplace_final_state``): sequence n (batch row n, or the n-th of
    ``cu_seqlens``) starts from ``state_pool[slot_indices[n]]`` and leaves its final state there. A negative
    slot index marks a padding sequence: its output rows are zero and no slot is touched. Active slots must
    be distinct. Runs the engine's multi-threaded SIMD decode kernel (the C++ ``engine_decode_slots``).

    ``kind`` "gdn" or "kda"; inputs and options as for fused_recurrent_gated_delta_rule / fused_recurrent_kda
    (GDN's A_log and dt_bias [HV], KDA's dt_bias [HV * K]); ``state_pool`` [P, HV, K, V] float32 ([P, HV, V, K]
    with state_v_first), a CPU torch tensor or a writable NumPy array; ``slot_indices`` [N] integers.

    Returns ``o`` [B, T, HV, V] in v's dtype. Errors (a slot out of range or repeated, a pool of the wrong
    shape or dtype) are raised before anything is written.
    """
    if kind not in ("gdn", "kda"):
        raise ValueError(f"kind must be 'gdn' or 'kda', got {kind!r}")
    opts = _options(scale, use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
                    state_v_first, lower_bound, check_finite=check_finite, head_mapping=head_mapping)
    call = _Call("decode_slots", q, k, v, g, beta, None, cu_seqlens, A_log, dt_bias, state_v_first)
    pool = _pool_array(state_pool)
    _check_grad("decode_slots", {"state_pool": pool})
    slots = tn.as_array("slot_indices", slot_indices, index=True)
    o = call.output(tn.dtype_of(call.arrays["v"]), zero=True)
    _hanpu.recurrent(kind, call.descriptors(o=o, state_pool=pool, slot_indices=slots), opts,
                     _resolve_threads(threads))
    return o


def reference(kind: str, q, k, v, g, beta, scale: Optional[float] = None, initial_state=None,
              output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False,
              use_gate_in_kernel: bool = False, use_beta_sigmoid_in_kernel: bool = False,
              allow_neg_eigval: bool = False, lower_bound: Optional[float] = None, state_v_first: bool = False,
              cu_seqlens=None, A_log=None, dt_bias=None, head_mapping: str = "grouped"):
    """The fp64 per-token recurrence (the numeric ground truth hanpu is tested against), for
    ``kind`` "gdn" or "kda" with the options of the functions above. Slow: for checking, not serving.

    Returns ``(o, final_state)`` in float64, of the kind of q.
    """
    if kind not in ("gdn", "kda"):
        raise ValueError(f"kind must be 'gdn' or 'kda', got {kind!r}")
    opts = _options(scale, use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval,
                    state_v_first, lower_bound, head_mapping=head_mapping)
    call = _Call("reference", q, k, v, g, beta, initial_state, cu_seqlens, A_log, dt_bias, state_v_first)
    o = call.output("F64")
    final_state = tn.empty_like_kind(call.like, call.state_shape, "F64") if output_final_state else None
    _hanpu.reference(kind, call.descriptors(o=o, final_state=final_state), opts)
    return o, final_state
