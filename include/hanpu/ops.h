// The GDN and KDA operators (DESIGN.md §1): fp64 reference, chunkwise prefill, recurrent decode.
//
// Conventions follow FLA. Shapes (B batch, T tokens, H q/k heads, HV value heads, N sequences):
//   q, k          [B, T, H, K]
//   v             [B, T, HV, V]           HV % H == 0; value head hv reads q/k head hv / (HV / H), or hv % H
//                                         with HeadMapping::kTiled
//   g             [B, T, HV]    (GDN)     natural-log decay, or the raw gate input a with use_gate_in_kernel
//                 [B, T, HV, K] (KDA)
//   beta          [B, T, HV]              or the raw logit b with use_beta_sigmoid_in_kernel
//   initial_state [N, HV, K, V]           ([N, HV, V, K] with state_v_first)
//   cu_seqlens    [N + 1] I64             varlen: B == 1, starts at 0, non-decreasing, ends at T
//   A_log         [HV]                    in-kernel gate (optional in the KDA lower-bound form)
//   dt_bias       [HV] (GDN), [HV * K] (KDA); optional, zero when absent
//   o             [B, T, HV, V]           any float dtype (FLA: the dtype of q)
//   final_state   like initial_state      F32 (F32 or F64 for the reference)
// Without cu_seqlens N == B and sequence n is batch row n.
#pragma once

#include <optional>
#include <string>

#include "hanpu/status.h"
#include "hanpu/tensor.h"

namespace hanpu {

enum class Kind { kGdn, kKda };
const char* kind_name(Kind k);  // "gdn" / "kda"

// The numeric contract of the chunkwise paths (chunk_forward, engine_forward; README "Precision modes").
//   kExact: fp32 GEMM operands and accumulation throughout.
//   kBf16:  every GEMM operand rounded to bf16 (as FLA's half-precision kernels and tensor cores do), fp32
//           accumulation; the state stays fp32 in memory (rounded only as a GEMM operand); gates, cumsums,
//           the triangular inverse and all vector work in fp32.
//   kAuto:  kBf16 for bf16 q where this process's kernel set runs bf16 GEMMs faster than fp32 ones (AMX
//           tiles, AMD's AVX512-BF16 dot products), kExact otherwise: f16's rounding floor is 8x finer than
//           bf16 operands hold, and elsewhere the bf16 GEMMs are the fp32 FMA on rounded copies of the
//           operands, slower than kExact (the rounding passes) and less exact (README "Precision modes").
// The recurrent, decode and reference paths have no GEMMs and are exact in every mode.
enum class Precision { kAuto, kExact, kBf16 };
const char* precision_name(Precision p);                    // "auto" / "exact" / "bf16"
bool parse_precision(const std::string& name, Precision* out);
// The mode a call runs at: `p` itself, or for kAuto the one q's dtype and the active kernel set select.
Precision resolve_precision(Precision p, DType q_dtype);

// Which q/k head a value head reads when HV = G H (grouped value heads).
//   kGrouped: hv / G — FLA's kernels and transformers (q, k repeat_interleave'd to HV heads);
//   kTiled:   hv % H — ggml's GGML_OP_GATED_DELTA_NET (llama.cpp: q, k tiled to HV heads, as ggml_repeat does),
//             so that an engine on ggml passes its tensors as they are.
// The same for G = 1.
enum class HeadMapping { kGrouped, kTiled };
const char* head_mapping_name(HeadMapping m);  // "grouped" / "tiled"
bool parse_head_mapping(const std::string& name, HeadMapping* out);

struct Options {
  Kind kind = Kind::kGdn;
  std::optional<double> scale;  // default K^-1/2
  int chunk_size = 64;          // 16, 32 or 64 (chunk mode only)
  bool use_qk_l2norm_in_kernel = false;  // q, k <- x * rsqrt(sum x^2 + 1e-6)
  bool use_gate_in_kernel = false;       // g <- -exp(A_log) * softplus(g + dt_bias)
  std::optional<double> lower_bound;     // KDA, with use_gate_in_kernel: g <- lb * sigmoid(exp(A_log) (g + dt_bias))
  bool use_beta_sigmoid_in_kernel = false;  // beta <- sigmoid(beta)
  bool allow_neg_eigval = false;            // beta <- 2 sigmoid(beta); needs use_beta_sigmoid_in_kernel
  bool state_v_first = false;               // state layout [.., V, K] instead of [.., K, V]
  HeadMapping head_mapping = HeadMapping::kGrouped;  // the q/k head of value head hv (above)
  // Reject NaN/Inf in any input with an error naming the tensor and the element. When off, non-finite
  // inputs propagate through IEEE arithmetic into the outputs of their own (sequence, value head) only.
  bool check_finite = false;
  Precision precision = Precision::kAuto;
};

struct Inputs {
  TensorView q, k, v, g, beta;
  std::optional<TensorView> initial_state, cu_seqlens, A_log, dt_bias;
};

struct Outputs {
  TensorView o;
  std::optional<TensorView> final_state;
};

// The per-token recurrence of DESIGN.md §1 in fp64: the numeric ground truth.
Status reference_forward(const Inputs& in, const Options& opt, const Outputs& out);

// Chunkwise prefill (the six steps of DESIGN.md §1): fp32 accumulation and fp32 state.
Status chunk_forward(const Inputs& in, const Options& opt, const Outputs& out);

// FLA's fused_recurrent_* semantics: token by token, fp32 state. Meant for decode and short inputs.
Status recurrent_forward(const Inputs& in, const Options& opt, const Outputs& out);

// Continuous batching (vLLM style): sequence n reads and updates, in place, the state slot
// state_pool[slot_indices[n]] ([P, HV, K, V] F32, or [P, HV, V, K] with state_v_first). A negative slot
// index marks a padding sequence: its outputs are zero and no slot is touched. Active slots must be
// distinct. `in.initial_state` must be empty (the pool is the state).
Status recurrent_decode_slots(const Inputs& in, const Options& opt, const TensorView& state_pool,
                              const TensorView& slot_indices, const TensorView& o);

}  // namespace hanpu
