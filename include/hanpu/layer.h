// The whole linear-attention layer of a hybrid model (paper §6, "Full-Layer Implementation"), computed as
// transformers 5.24 computes it (models/qwen3_next, qwen3_5, kimi_linear: modeling_*.py), in one call:
//
//   GDN (Qwen3-Next, Qwen3.5), x [T, D]:
//     [qkv | z | b | a] = x W_in^T            Qwen3.5: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a;
//                                             Qwen3-Next: in_proj_qkvz, in_proj_ba (grouped per key head,
//                                             reordered into this layout when the layer is built)
//     qkv <- silu(causal depthwise conv1d(qkv))          kernel Kc over time, per channel
//     beta = sigmoid(b);  g = -exp(A_log) softplus(a + dt_bias)
//     o = GDN core(l2norm(q), l2norm(k), v, g, beta)      scale K^-1/2, state [HV, K, V] in fp32
//     n = rmsnorm(o) * w  * silu(z)                       per (token, value head), eps = rms_norm_eps
//     y = n W_out^T
//   KDA (Kimi Linear): q, k, v from q_proj, k_proj, v_proj; the same conv; beta = sigmoid(b_proj x);
//     g = -exp(A_log) softplus(f_b(f_a(x)) + dt_bias) per channel; n = rmsnorm(o) * w * sigmoid(g_b(g_a(x))).
//
// Precision: kExact computes every step in fp32 (bf16 weights are widened once, when the layer is built).
// kBf16 keeps weights and activations in bf16 and rounds exactly where transformers' bf16 model rounds
// (projection outputs, the conv output, beta, the core output, the norm's intermediate and output); the
// core runs in the bf16 precision mode (ops.h); gates, norms and accumulation stay fp32. kAuto: kBf16 for
// a bf16 checkpoint, kExact otherwise. The projections run on oneDNN's matmul (README "Whole layers" says why).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hanpu/engine.h"
#include "hanpu/ops.h"
#include "hanpu/safetensors.h"
#include "hanpu/tensor.h"

namespace hanpu {

enum class LayerArch { kQwen3Next, kQwen3_5, kKimiLinear };
const char* layer_arch_name(LayerArch a);  // "qwen3_next" / "qwen3_5" / "kimi_linear"

// The dimensions of one layer, from the model's config.json (layer_spec_from_config) or from a module.
struct LayerSpec {
  LayerArch arch = LayerArch::kQwen3_5;
  int64_t hidden_size = 0;    // D
  int64_t num_k_heads = 0;    // H (KDA: H == HV)
  int64_t num_v_heads = 0;    // HV, a multiple of H
  int64_t head_k_dim = 0;     // K
  int64_t head_v_dim = 0;     // V (KDA: V == K)
  int64_t conv_kernel = 4;    // Kc
  double rms_norm_eps = 1e-6;

  Kind kind() const { return arch == LayerArch::kKimiLinear ? Kind::kKda : Kind::kGdn; }
  int64_t key_dim() const { return num_k_heads * head_k_dim; }
  int64_t value_dim() const { return num_v_heads * head_v_dim; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }  // the conv's channels: q, k, v
};

// Reads config.json (text; `origin` names it in errors) for layer `layer_index`: model_type qwen3_next,
// qwen3_5 / qwen3_5_text (a text_config inside is read), kimi_linear (its linear_attn_config form too).
// Errors name the file and the field: a missing linear-attention field, an unknown model type, a layer that
// is not a linear-attention layer, an activation other than silu.
Status layer_spec_from_config(const std::string& json_text, const std::string& origin, int64_t layer_index,
                              LayerSpec* out);

// A layer's weights by their transformers names relative to the layer module ("in_proj_qkv.weight",
// "conv1d.weight", "A_log", ...); any float dtype and strides. Returns null when absent, and sets `where`
// (found or not) to what an error message should call the tensor, e.g.
// "model.safetensors: model.layers.0.linear_attn.in_proj_qkv.weight".
using WeightLookup = std::function<const TensorView*(const std::string& name, std::string* where)>;

struct LayerRunConfig {
  int threads = 0;                      // 0: every CPU this process may use
  Strategy strategy = Strategy::kHanpu;  // the core's dataflow
  bool breakdown = false;               // time the parts (LayerStats::parts_ms)
};

struct LayerStats {
  // With LayerRunConfig::breakdown: wall milliseconds of "projections" (every GEMM), "conv", "gates" (beta),
  // "core", "norm", in that order.
  std::vector<std::pair<std::string, double>> parts_ms;
};

// The conv and recurrent state of a batch of sequences (one per row of x), updated in place by prefill:
//   conv       [B, conv_dim, Kc]  the last Kc projected q/k/v inputs, oldest first (zero-padded on the left
//                                 when fewer came), in the layer's activation dtype: transformers' conv_state
//   recurrent  [B, HV, K, V] F32  the core's state
// With `continuing` the prefill starts from them (a prompt continued); otherwise from zeros.
struct LayerState {
  TensorView conv, recurrent;
  bool continuing = false;
};

class Layer {
 public:
  // Builds a layer from its weights (checked by name, shape and dtype; errors name the tensor where the
  // lookup says it is, and the expected vs actual shape). Weights are copied into the layer's own packed
  // form. kAuto resolves by the dtype of the first projection's weight (BF16 -> kBf16).
  static Status create(const LayerSpec& spec, const WeightLookup& weights, Precision precision,
                       std::unique_ptr<Layer>* out);
  ~Layer();
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const LayerSpec& spec() const;
  // F32 (kExact) or BF16 (kBf16): the dtype of the weights, of the conv state and of rounded activations.
  DType activation_dtype() const;
  Precision precision() const;

  // Prefill: x and y [B, T, D] (any float dtype; y may not overlap x). `state` may be null.
  Status prefill(const TensorView& x, const TensorView& y, const LayerState* state, const LayerRunConfig& run,
                 LayerStats* stats = nullptr) const;
  // Decode one token per sequence (continuous batching): x, y [N, D]; sequence n reads and updates, in
  // place, conv_pool[slots[n]] ([P, conv_dim, Kc], activation dtype) and state_pool[slots[n]]
  // ([P, HV, K, V] F32). A negative slot marks padding: its y row is zero and no slot is touched.
  Status decode(const TensorView& x, const TensorView& y, const TensorView& conv_pool, const TensorView& state_pool,
                const TensorView& slots, const LayerRunConfig& run, LayerStats* stats = nullptr) const;

  struct Impl;

 private:
  explicit Layer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A checkpoint directory as transformers saves it: config.json and model.safetensors, or sharded files
// listed by model.safetensors.index.json. Reads layer `layer_index` (names "model.layers.N.linear_attn.*"
// or "model.layers.N.self_attn.*", under "model.language_model." for multimodal Qwen3.5 checkpoints).
Status load_layer(const std::string& model_dir, int64_t layer_index, Precision precision, std::unique_ptr<Layer>* out);

// What load_layer reads: the layer's spec and its tensors under names relative to the layer module, and
// the origin errors name them by ("DIR/model.safetensors: model.layers.3.linear_attn.").
Status read_layer_checkpoint(const std::string& model_dir, int64_t layer_index, LayerSpec* spec, TensorFile* weights,
                             std::string* origin);

}  // namespace hanpu
