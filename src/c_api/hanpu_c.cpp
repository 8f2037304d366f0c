// The C ABI (include/hanpu/hanpu_c.h) over the C++ API: views and options converted field by field, the
// Status turned into a code plus a per-thread message, and no exception crossing into C.
#include "hanpu/hanpu_c.h"

#include <exception>
#include <string>

#include "hanpu/hanpu.h"

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

const char* hanpu_last_error(void) { return last_error.c_str(); }

const char* hanpu_version(void) { return HANPU_VERSION; }

}  // extern "C"
