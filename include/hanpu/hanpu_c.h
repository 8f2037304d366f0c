/* hanpu's C ABI: the GDN and KDA operators (chunkwise prefill on the engine, the token-by-token recurrence,
 * the fp64 reference), continuous-batching decode over state slots, and whole linear-attention layers
 * (hanpu/layer.h: from a checkpoint or from weights in memory), for C runtimes that embed kernels
 * the way ggml does: plain pointers with shapes and element strides, dtype enums, and a status code per
 * call with a message for the calling thread (hanpu_last_error).
 *
 * Semantics, shapes and the error contract are those of the C++ API (hanpu/ops.h, hanpu/engine.h, and
 * the README's "Semantics" and "Bad input" sections): every argument is validated before anything is
 * written, so a failing call leaves outputs and state slots untouched.
 *
 * Structs are initialised by their *_init function; fields are only ever appended. Link with the hanpu
 * library, a static C++ library: `cc x.c $(pkg-config --cflags --libs hanpu)` adds what it links, as does the
 * CMake target hanpu::hanpu (README "Embedding hanpu in an engine"). */
#ifndef HANPU_HANPU_C_H_
#define HANPU_HANPU_C_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HANPU_OK = 0,
  HANPU_INVALID_ARGUMENT = 1, /* a shape, dtype, stride or option is wrong */
  HANPU_NOT_FOUND = 2,
  HANPU_DATA_LOSS = 3,
  HANPU_IO_ERROR = 4,
  HANPU_UNIMPLEMENTED = 5,
  HANPU_INTERNAL = 6 /* an exception inside the library (out of memory, say) */
} hanpu_status;

typedef enum { HANPU_F64 = 0, HANPU_F32 = 1, HANPU_F16 = 2, HANPU_BF16 = 3, HANPU_I64 = 4 } hanpu_dtype;
typedef enum { HANPU_GDN = 0, HANPU_KDA = 1 } hanpu_kind;
typedef enum { HANPU_PRECISION_AUTO = 0, HANPU_PRECISION_EXACT = 1, HANPU_PRECISION_BF16 = 2 } hanpu_precision;
/* The q/k head of value head hv when HV = G H: hv / G (FLA, transformers) or hv % H (ggml's GGML_OP_GATED_DELTA_NET,
 * so that a ggml backend passes llama.cpp's tensors as they are). */
typedef enum { HANPU_HEADS_GROUPED = 0, HANPU_HEADS_TILED = 1 } hanpu_head_mapping;
typedef enum {
  HANPU_STRATEGY_HANPU = 0,
  HANPU_STRATEGY_FLA = 1,
  HANPU_STRATEGY_FLA_MEGAKERNEL = 2,
  HANPU_STRATEGY_FLASHQLA = 3,
  HANPU_STRATEGY_NATIVE = 4
} hanpu_strategy;

#define HANPU_MAX_RANK 4

/* A tensor view: data, dtype, rank (0: absent, for optional arguments), shape and strides in elements
 * (negative strides allowed; a tensor the call writes must give each element its own memory). Enum-valued
 * fields are int32_t so that the layout is fixed whatever size a compiler gives an enum; values outside
 * the enum are refused with HANPU_INVALID_ARGUMENT. */
typedef struct {
  void* data;
  int32_t dtype; /* hanpu_dtype */
  int32_t rank;
  int64_t shape[HANPU_MAX_RANK];
  int64_t strides[HANPU_MAX_RANK];
} hanpu_tensor;

/* A contiguous row-major view of `rank` dims (strides computed from the shape); dtype is a hanpu_dtype. */
hanpu_tensor hanpu_tensor_contiguous(void* data, int32_t dtype, int32_t rank, const int64_t* shape);

/* The inputs, named and shaped as FLA's arguments (hanpu/ops.h):
 *   q, k [B, T, H, K]; v [B, T, HV, V]; g [B, T, HV] (GDN) or [B, T, HV, K] (KDA); beta [B, T, HV];
 *   optional: initial_state [N, HV, K, V] ([N, HV, V, K] with state_v_first), cu_seqlens [N + 1] I64,
 *   A_log [HV], dt_bias [HV] (GDN) or [HV * K] (KDA). */
typedef struct {
  hanpu_tensor q, k, v, g, beta;
  hanpu_tensor initial_state, cu_seqlens, A_log, dt_bias;
} hanpu_inputs;

typedef struct {
  int32_t kind; /* hanpu_kind */
  int32_t has_scale; /* 0: scale = K^-1/2 */
  double scale;
  int32_t chunk_size; /* 16, 32 or 64 */
  int32_t use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval;
  int32_t has_lower_bound; /* KDA with use_gate_in_kernel: g = lower_bound * sigmoid(exp(A_log) (g + dt_bias)) */
  double lower_bound;
  int32_t state_v_first, check_finite;
  int32_t precision; /* hanpu_precision */
  int32_t head_mapping; /* hanpu_head_mapping */
} hanpu_options;

/* FLA's defaults: GDN, scale K^-1/2, chunk size 64, every flag off, precision auto, grouped heads. */
void hanpu_options_init(hanpu_options* opt);

typedef struct {
  int32_t strategy; /* hanpu_strategy */
  int32_t threads; /* 0: every CPU this process may use */
} hanpu_engine_config;

/* The hanpu strategy on every CPU. */
void hanpu_engine_config_init(hanpu_engine_config* cfg);

/* Chunkwise prefill on the engine (engine_forward). o [B, T, HV, V] in any float dtype; final_state (may be
 * NULL or rank 0: not written) [N, HV, K, V] F32. cfg may be NULL (defaults). */
hanpu_status hanpu_chunk_forward(const hanpu_inputs* in, const hanpu_options* opt, const hanpu_engine_config* cfg,
                                 const hanpu_tensor* o, const hanpu_tensor* final_state);

/* Token-by-token recurrence (FLA's fused_recurrent semantics); outputs as for hanpu_chunk_forward. */
hanpu_status hanpu_recurrent_forward(const hanpu_inputs* in, const hanpu_options* opt, const hanpu_tensor* o,
                                     const hanpu_tensor* final_state);

/* The fp64 ground truth; o and final_state may be F64. */
hanpu_status hanpu_reference_forward(const hanpu_inputs* in, const hanpu_options* opt, const hanpu_tensor* o,
                                     const hanpu_tensor* final_state);

/* Continuous-batching decode on the engine: sequence n reads and updates state_pool[slot_indices[n]]
 * ([P, HV, K, V] F32) in place; a negative slot index is padding (zero output, no slot touched). The
 * inputs' initial_state must be absent. cfg may be NULL. */
hanpu_status hanpu_decode_slots(const hanpu_inputs* in, const hanpu_options* opt, const hanpu_engine_config* cfg,
                                const hanpu_tensor* state_pool, const hanpu_tensor* slot_indices, const hanpu_tensor* o);

/* ---- Whole layers (hanpu/layer.h): projections, conv, gates, core, gated norm, output projection ---- */

typedef struct hanpu_layer hanpu_layer; /* opaque; free with hanpu_layer_free */
typedef enum { HANPU_QWEN3_NEXT = 0, HANPU_QWEN3_5 = 1, HANPU_KIMI_LINEAR = 2 } hanpu_layer_arch;

typedef struct {
  int32_t arch; /* hanpu_layer_arch */
  int64_t hidden_size, num_k_heads, num_v_heads, head_k_dim, head_v_dim, conv_kernel;
  double rms_norm_eps;
} hanpu_layer_spec;

/* Layer `layer_index` of a Hugging Face checkpoint directory (config.json + safetensors). precision is a
 * hanpu_precision (auto: bf16 for a bf16 checkpoint). */
hanpu_status hanpu_layer_load(const char* model_dir, int64_t layer_index, int32_t precision, hanpu_layer** out);

/* A layer from weights in memory, named as transformers names them relative to the layer module
 * ("in_proj_qkv.weight", "conv1d.weight", "A_log", ...; hanpu/layer.h). The weights are copied. */
hanpu_status hanpu_layer_create(const hanpu_layer_spec* spec, const char* const* names, const hanpu_tensor* weights,
                                int32_t count, int32_t precision, hanpu_layer** out);

void hanpu_layer_free(hanpu_layer* layer);

/* The layer's spec, its conv state's channels (2 H K + HV V) and the dtype of its activations and conv state
 * (HANPU_F32 or HANPU_BF16); any pointer may be NULL. */
hanpu_status hanpu_layer_describe(const hanpu_layer* layer, hanpu_layer_spec* spec, int64_t* conv_dim,
                                  int32_t* activation_dtype);

/* Prefill: x, y [B, T, hidden] (any float dtype). conv_state [B, conv_dim, conv_kernel] (the activation
 * dtype) and recurrent_state [B, HV, K, V] F32 are written with the final states (both NULL or rank 0:
 * none); with `continuing` the prefill starts from them. cfg may be NULL. */
hanpu_status hanpu_layer_prefill(const hanpu_layer* layer, const hanpu_tensor* x, const hanpu_tensor* y,
                                 const hanpu_tensor* conv_state, const hanpu_tensor* recurrent_state, int32_t continuing,
                                 const hanpu_engine_config* cfg);

/* Decode one token per sequence: x, y [N, hidden]; sequence n updates conv_pool[slots[n]]
 * ([P, conv_dim, conv_kernel]) and state_pool[slots[n]] ([P, HV, K, V] F32) in place; a negative slot is
 * padding (zero y row, nothing touched). cfg may be NULL. */
hanpu_status hanpu_layer_decode(const hanpu_layer* layer, const hanpu_tensor* x, const hanpu_tensor* y,
                                const hanpu_tensor* conv_pool, const hanpu_tensor* state_pool, const hanpu_tensor* slots,
                                const hanpu_engine_config* cfg);

/* The message of the calling thread's last failed call ("" after a success); valid until its next call. */
const char* hanpu_last_error(void);

/* The library's version, e.g. "0.1.0". */
const char* hanpu_version(void);

#ifdef __cplusplus
}
#endif

#endif /* HANPU_HANPU_C_H_ */
