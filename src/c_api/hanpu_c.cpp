// The C ABI (include/hanpu/hanpu_c.h) over the C++ API: views and options converted field by field, the
// Status turned into a code plus a per-thread message, and no exception crossing into C.
#include "hanpu/hanpu_c.h"

#include <exception>
#include <map>
#include <memory>
#include <string>

#include "hanpu/hanpu.h"
#include "hanpu/layer.h"

struct hanpu_layer {
  std::unique_ptr<hanpu::Layer> layer;
};

namespace hanpu {
namespace {

thread_local std::string last_error;

hanpu_status to_c(const Status& s) {
  last_error = s.ok() ? std::string() : s.message();
  switch (s.code()) {
    case StatusCode::kOk: return HANPU_OK;
    case StatusCode::kInvalidArgument: return HANPU_INVALID_ARGUMENT;
    case StatusCode::kNotFound: return HANPU_NOT_FOUND;
    case StatusCode::kDataLoss: return HANPU_DATA_LOSS;
    case StatusCode::kIoError: return HANPU_IO_ERROR;
    case StatusCode::kUnimplemented: return HANPU_UNIMPLEMENTED;
  }
  return HANPU_INTERNAL;
}

hanpu_status fail(const std::string& message) {
  last_error = message;
  return HANPU_INVALID_ARGUMENT;
}

// A C view as a C++ one; false (with a message naming `name`) for an unknown dtype or a bad rank.
bool to_view(const hanpu_tensor& t, const char* name, TensorView* out, std::string* err) {
  static const DType dtypes[] = {DType::kF64, DType::kF32, DType::kF16, DType::kBF16, DType::kI64};
  if (t.dtype < HANPU_F64 || t.dtype > HANPU_I64) {
    *err = std::string(name) + ".dtype " + std::to_string(t.dtype) + " is not a hanpu_dtype";
    return false;
  }
  if (t.rank < 1 || t.rank > HANPU_MAX_RANK) {
    *err = std::string(name) + ".rank must be 1.." + std::to_string(HANPU_MAX_RANK) + ", got " + std::to_string(t.rank);
    return false;
  }
  *out = TensorView(t.data, dtypes[t.dtype], std::vector<int64_t>(t.shape, t.shape + t.rank),
                    std::vector<int64_t>(t.strides, t.strides + t.rank));
  return true;
}

// An optional argument: absent when the pointer is null or its rank is 0.
bool to_optional(const hanpu_tensor* t, const char* name, std::optional<TensorView>* out, std::string* err) {
  out->reset();
  if (!t || t->rank == 0) return true;
  TensorView v;
  if (!to_view(*t, name, &v, err)) return false;
  *out = v;
  return true;
}

bool to_inputs(const hanpu_inputs* in, Inputs* out, std::string* err) {
  if (!in) {
    *err = "in is null";
    return false;
  }
  return to_view(in->q, "q", &out->q, err) && to_view(in->k, "k", &out->k, err) && to_view(in->v, "v", &out->v, err) &&
         to_view(in->g, "g", &out->g, err) && to_view(in->beta, "beta", &out->beta, err) &&
         to_optional(&in->initial_state, "initial_state", &out->initial_state, err) &&
         to_optional(&in->cu_seqlens, "cu_seqlens", &out->cu_seqlens, err) &&
         to_optional(&in->A_log, "A_log", &out->A_log, err) && to_optional(&in->dt_bias, "dt_bias", &out->dt_bias, err);
}

bool to_options(const hanpu_options* o, Options* out, std::string* err) {
  if (!o) {
    *err = "opt is null";
    return false;
  }
  if (o->kind != HANPU_GDN && o->kind != HANPU_KDA) {
    *err = "opt.kind " + std::to_string(o->kind) + " is not a hanpu_kind";
    return false;
  }
  if (o->precision < HANPU_PRECISION_AUTO || o->precision > HANPU_PRECISION_BF16) {
    *err = "opt.precision " + std::to_string(o->precision) + " is not a hanpu_precision";
    return false;
  }
  if (o->head_mapping != HANPU_HEADS_GROUPED && o->head_mapping != HANPU_HEADS_TILED) {
    *err = "opt.head_mapping " + std::to_string(o->head_mapping) + " is not a hanpu_head_mapping";
    return false;
  }
  Options r;
  r.kind = o->kind == HANPU_KDA ? Kind::kKda : Kind::kGdn;
  if (o->has_scale) r.scale = o->scale;
  r.chunk_size = o->chunk_size;
  r.use_qk_l2norm_in_kernel = o->use_qk_l2norm_in_kernel != 0;
  r.use_gate_in_kernel = o->use_gate_in_kernel != 0;
  r.use_beta_sigmoid_in_kernel = o->use_beta_sigmoid_in_kernel != 0;
  r.allow_neg_eigval = o->allow_neg_eigval != 0;
  if (o->has_lower_bound) r.lower_bound = o->lower_bound;
  r.state_v_first = o->state_v_first != 0;
  r.check_finite = o->check_finite != 0;
  static const Precision precisions[] = {Precision::kAuto, Precision::kExact, Precision::kBf16};
  r.precision = precisions[o->precision];
  r.head_mapping = o->head_mapping == HANPU_HEADS_TILED ? HeadMapping::kTiled : HeadMapping::kGrouped;
  *out = r;
  return true;
}

bool to_engine_config(const hanpu_engine_config* c, EngineConfig* out, std::string* err) {
  *out = EngineConfig();
  if (!c) return true;
  static const Strategy strategies[] = {Strategy::kHanpu, Strategy::kFla, Strategy::kFlaMegakernel, Strategy::kFlashQla,
                                        Strategy::kNative};
  if (c->strategy < HANPU_STRATEGY_HANPU || c->strategy > HANPU_STRATEGY_NATIVE) {
    *err = "cfg.strategy " + std::to_string(c->strategy) + " is not a hanpu_strategy";
    return false;
  }
  if (c->threads < 0) {
    *err = "cfg.threads must be >= 0 (0: every CPU), got " + std::to_string(c->threads);
    return false;
  }
  out->strategy = strategies[c->strategy];
  out->threads = c->threads;
  return true;
}

bool to_outputs(const hanpu_tensor* o, const hanpu_tensor* final_state, Outputs* out, std::string* err) {
  if (!o) {
    *err = "o is null";
    return false;
  }
  return to_view(*o, "o", &out->o, err) && to_optional(final_state, "final_state", &out->final_state, err);
}

// Runs `body` (which returns a Status) with C++ exceptions turned into HANPU_INTERNAL.
template <typename F>
hanpu_status guarded(F&& body) {
  try {
    return to_c(body());
  } catch (const std::exception& e) {
    last_error = std::string("internal error: ") + e.what();
  } catch (...) {
    last_error = "internal error";
  }
  return HANPU_INTERNAL;
}

using OpFn = Status (*)(const Inputs&, const Options&, const Outputs&);

hanpu_status run_op(OpFn fn, const hanpu_inputs* in, const hanpu_options* opt, const hanpu_tensor* o,
                    const hanpu_tensor* final_state) {
  Inputs i;
  Options op;
  Outputs out;
  std::string err;
  if (!to_inputs(in, &i, &err) || !to_options(opt, &op, &err) || !to_outputs(o, final_state, &out, &err)) return fail(err);
  return guarded([&] { return fn(i, op, out); });
}

}  // namespace
}  // namespace hanpu

using namespace hanpu;

extern "C" {

hanpu_tensor hanpu_tensor_contiguous(void* data, int32_t dtype, int32_t rank, const int64_t* shape) {
  hanpu_tensor t = {};
  t.data = data;
  t.dtype = dtype;
  t.rank = rank;
  int64_t stride = 1;
  for (int32_t d = (rank > HANPU_MAX_RANK ? HANPU_MAX_RANK : rank) - 1; d >= 0; --d) {
    t.shape[d] = shape[d];
    t.strides[d] = stride;
    stride *= shape[d];
  }
  return t;
}

void hanpu_options_init(hanpu_options* opt) {
  *opt = hanpu_options{};
  opt->kind = HANPU_GDN;
  opt->chunk_size = 64;
  opt->precision = HANPU_PRECISION_AUTO;
  opt->head_mapping = HANPU_HEADS_GROUPED;
}

void hanpu_engine_config_init(hanpu_engine_config* cfg) {
  cfg->strategy = HANPU_STRATEGY_HANPU;
  cfg->threads = 0;
}

hanpu_status hanpu_chunk_forward(const hanpu_inputs* in, const hanpu_options* opt, const hanpu_engine_config* cfg,
                                 const hanpu_tensor* o, const hanpu_tensor* final_state) {
  Inputs i;
  Options op;
  EngineConfig ec;
  Outputs out;
  std::string err;
  if (!to_inputs(in, &i, &err) || !to_options(opt, &op, &err) || !to_engine_config(cfg, &ec, &err) ||
      !to_outputs(o, final_state, &out, &err)) {
    return fail(err);
  }
  return guarded([&] { return engine_forward(i, op, ec, out); });
}

hanpu_status hanpu_recurrent_forward(const hanpu_inputs* in, const hanpu_options* opt, const hanpu_tensor* o,
                                     const hanpu_tensor* final_state) {
  return run_op(recurrent_forward, in, opt, o, final_state);
}

hanpu_status hanpu_reference_forward(const hanpu_inputs* in, const hanpu_options* opt, const hanpu_tensor* o,
                                     const hanpu_tensor* final_state) {
  return run_op(reference_forward, in, opt, o, final_state);
}

hanpu_status hanpu_decode_slots(const hanpu_inputs* in, const hanpu_options* opt, const hanpu_engine_config* cfg,
                                const hanpu_tensor* state_pool, const hanpu_tensor* slot_indices, const hanpu_tensor* o) {
  Inputs i;
  Options op;
  EngineConfig ec;
  TensorView pool, slots, ov;
  std::string err;
  if (!state_pool || !slot_indices || !o) return fail("state_pool, slot_indices and o are required");
  if (!to_inputs(in, &i, &err) || !to_options(opt, &op, &err) || !to_engine_config(cfg, &ec, &err) ||
      !to_view(*state_pool, "state_pool", &pool, &err) || !to_view(*slot_indices, "slot_indices", &slots, &err) ||
      !to_view(*o, "o", &ov, &err)) {
    return fail(err);
  }
  return guarded([&] { return engine_decode_slots(i, op, ec, pool, slots, ov); });
}

hanpu_status hanpu_layer_load(const char* model_dir, int64_t layer_index, int32_t precision, hanpu_layer** out) {
  if (!model_dir || !out) return fail("model_dir and out are required");
  if (precision < HANPU_PRECISION_AUTO || precision > HANPU_PRECISION_BF16)
    return fail("precision " + std::to_string(precision) + " is not a hanpu_precision");
  static const Precision precisions[] = {Precision::kAuto, Precision::kExact, Precision::kBf16};
  *out = nullptr;
  return guarded([&] {
    auto h = std::make_unique<hanpu_layer>();
    HANPU_RETURN_IF_ERROR(load_layer(model_dir, layer_index, precisions[precision], &h->layer));
    *out = h.release();
    return Status::Ok();
  });
}

hanpu_status hanpu_layer_create(const hanpu_layer_spec* spec, const char* const* names, const hanpu_tensor* weights,
                                int32_t count, int32_t precision, hanpu_layer** out) {
  if (!spec || !out || count < 0 || (count > 0 && (!names || !weights)))
    return fail("spec, out, and names and weights for count > 0, are required");
  if (spec->arch < HANPU_QWEN3_NEXT || spec->arch > HANPU_KIMI_LINEAR)
    return fail("spec.arch " + std::to_string(spec->arch) + " is not a hanpu_layer_arch");
  if (precision < HANPU_PRECISION_AUTO || precision > HANPU_PRECISION_BF16)
    return fail("precision " + std::to_string(precision) + " is not a hanpu_precision");
  static const LayerArch archs[] = {LayerArch::kQwen3Next, LayerArch::kQwen3_5, LayerArch::kKimiLinear};
  static const Precision precisions[] = {Precision::kAuto, Precision::kExact, Precision::kBf16};
  const LayerSpec s{archs[spec->arch], spec->hidden_size, spec->num_k_heads, spec->num_v_heads, spec->head_k_dim,
                    spec->head_v_dim, spec->conv_kernel, spec->rms_norm_eps};
  std::map<std::string, TensorView> views;
  std::string err;
  for (int32_t i = 0; i < count; ++i) {
    if (!names[i]) return fail("names[" + std::to_string(i) + "] is null");
    TensorView v;
    if (!to_view(weights[i], names[i], &v, &err)) return fail(err);
    views[names[i]] = v;
  }
  *out = nullptr;
  return guarded([&] {
    const WeightLookup lookup = [&](const std::string& name, std::string* where) -> const TensorView* {
      *where = "weights '" + name + "'";
      auto it = views.find(name);
      return it == views.end() ? nullptr : &it->second;
    };
    auto h = std::make_unique<hanpu_layer>();
    HANPU_RETURN_IF_ERROR(Layer::create(s, lookup, precisions[precision], &h->layer));
    *out = h.release();
    return Status::Ok();
  });
}

void hanpu_layer_free(hanpu_layer* layer) { delete layer; }

hanpu_status hanpu_layer_describe(const hanpu_layer* layer, hanpu_layer_spec* spec, int64_t* conv_dim,
                                  int32_t* activation_dtype) {
  if (!layer) return fail("layer is null");
  const LayerSpec& s = layer->layer->spec();
  if (spec) {
    *spec = hanpu_layer_spec{static_cast<int32_t>(s.arch == LayerArch::kQwen3Next ? HANPU_QWEN3_NEXT
                                                  : s.arch == LayerArch::kQwen3_5  ? HANPU_QWEN3_5
                                                                                   : HANPU_KIMI_LINEAR),
                             s.hidden_size, s.num_k_heads, s.num_v_heads, s.head_k_dim, s.head_v_dim, s.conv_kernel,
                             s.rms_norm_eps};
  }
  if (conv_dim) *conv_dim = s.conv_dim();
  if (activation_dtype) *activation_dtype = layer->layer->activation_dtype() == DType::kBF16 ? HANPU_BF16 : HANPU_F32;
  return to_c(Status::Ok());
}

hanpu_status hanpu_layer_prefill(const hanpu_layer* layer, const hanpu_tensor* x, const hanpu_tensor* y,
                                 const hanpu_tensor* conv_state, const hanpu_tensor* recurrent_state, int32_t continuing,
                                 const hanpu_engine_config* cfg) {
  if (!layer || !x || !y) return fail("layer, x and y are required");
  TensorView xv, yv;
  std::optional<TensorView> conv, rec;
  EngineConfig ec;
  std::string err;
  if (!to_view(*x, "x", &xv, &err) || !to_view(*y, "y", &yv, &err) || !to_optional(conv_state, "conv_state", &conv, &err) ||
      !to_optional(recurrent_state, "recurrent_state", &rec, &err) || !to_engine_config(cfg, &ec, &err))
    return fail(err);
  if (conv.has_value() != rec.has_value()) return fail("conv_state and recurrent_state go together: give both or neither");
  LayerRunConfig run;
  run.threads = ec.threads;
  run.strategy = ec.strategy;
  return guarded([&] {
    if (!conv) return layer->layer->prefill(xv, yv, nullptr, run);
    const LayerState st{*conv, *rec, continuing != 0};
    return layer->layer->prefill(xv, yv, &st, run);
  });
}

hanpu_status hanpu_layer_decode(const hanpu_layer* layer, const hanpu_tensor* x, const hanpu_tensor* y,
                                const hanpu_tensor* conv_pool, const hanpu_tensor* state_pool, const hanpu_tensor* slots,
                                const hanpu_engine_config* cfg) {
  if (!layer || !x || !y || !conv_pool || !state_pool || !slots)
    return fail("layer, x, y, conv_pool, state_pool and slots are required");
  TensorView xv, yv, cp, sp, sl;
  EngineConfig ec;
  std::string err;
  if (!to_view(*x, "x", &xv, &err) || !to_view(*y, "y", &yv, &err) || !to_view(*conv_pool, "conv_pool", &cp, &err) ||
      !to_view(*state_pool, "state_pool", &sp, &err) || !to_view(*slots, "slots", &sl, &err) ||
      !to_engine_config(cfg, &ec, &err))
    return fail(err);
  LayerRunConfig run;
  run.threads = ec.threads;
  run.strategy = ec.strategy;
  return guarded([&] { return layer->layer->decode(xv, yv, cp, sp, sl, run); });
}

const char* hanpu_last_error(void) { return last_error.c_str(); }

const char* hanpu_version(void) { return HANPU_VERSION; }

}  // extern "C"
