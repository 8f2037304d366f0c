// Recurrent decode (FLA's fused_recurrent_* semantics) in fp32, plus the continuous-batching form with
// a pool of state slots.
#include <set>

#include "ops/problem.h"
#include "ops/recurrence.h"

namespace hanpu {

Status recurrent_forward(const Inputs& in, const Options& opt, const Outputs& out) {
  Problem p;
  HANPU_RETURN_IF_ERROR(validate_problem(in, opt, Mode::kRecurrent, &p));
  HANPU_RETURN_IF_ERROR(validate_outputs(p, out, Mode::kRecurrent));
  recur_all<float>(p, out);
  return Status::Ok();
}

Status validate_slot_pool(const Problem& p, const TensorView& state_pool, const TensorView& slot_indices,
                          const TensorView& o, std::vector<int64_t>* slots_out) {
  HANPU_RETURN_IF_ERROR(validate_state(p, state_pool, "state_pool", 0, false));
  if (state_pool.dtype != DType::kF32) {
    return InvalidArgument(std::string("state_pool.dtype must be F32, got ") + dtype_name(state_pool.dtype));
  }
  if (slot_indices.rank() != 1 || slot_indices.dtype != DType::kI64 || slot_indices.shape[0] != p.N) {
    return InvalidArgument("slot_indices must be I64 of shape [N] = [" + std::to_string(p.N) + "], got " +
                           slot_indices.describe());
  }
  if (slot_indices.data == nullptr) return InvalidArgument("slot_indices.data is null");
  HANPU_RETURN_IF_ERROR(check_written_pool(p, state_pool, o, slot_indices));
  const int64_t pool = state_pool.shape[0];
  std::vector<int64_t>& slots = *slots_out;
  slots.assign(p.N, -1);
  std::set<int64_t> used;
  for (int64_t n = 0; n < p.N; ++n) {
    slots[n] = load_i64(slot_indices, n * slot_indices.stride(0));
    if (slots[n] < 0) continue;
    if (slots[n] >= pool) {
      return InvalidArgument("slot_indices[" + std::to_string(n) + "] = " + std::to_string(slots[n]) +
                             " is out of range for a pool of " + std::to_string(pool) + " slots");
    }
    if (!used.insert(slots[n]).second) {
      return InvalidArgument("slot_indices[" + std::to_string(n) + "] = " + std::to_string(slots[n]) +
                             " is used by an earlier sequence; active slots must be distinct");
    }
  }
  return Status::Ok();
}

Status recurrent_decode_slots(const Inputs& in, const Options& opt, const TensorView& state_pool,
                              const TensorView& slot_indices, const TensorView& o) {
  Problem p;
  HANPU_RETURN_IF_ERROR(validate_problem(in, opt, Mode::kSlots, &p));
  HANPU_RETURN_IF_ERROR(validate_outputs(p, Outputs{o, std::nullopt}, Mode::kSlots));
  std::vector<int64_t> slots;
  HANPU_RETURN_IF_ERROR(validate_slot_pool(p, state_pool, slot_indices, o, &slots));
  RowLoader<float> rows(p);
  std::vector<float> S(p.K * p.V), zeros(p.V, 0.0f);
  for (int64_t n = 0; n < p.N; ++n) {
    const Sequence& s = p.seqs[n];
    for (int64_t hv = 0; hv < p.HV; ++hv) {
      if (slots[n] < 0) {
        for (int64_t t = s.begin; t < s.begin + s.len; ++t) store_o_row(o, s.batch, t, hv, p.V, zeros.data());
        continue;
      }
      load_state(p, state_pool, slots[n], hv, S.data());
      recur_sequence(p, rows, s, hv, S.data(), o);
      store_state(p, state_pool, slots[n], hv, S.data());
    }
  }
  return Status::Ok();
}

}  // namespace hanpu
