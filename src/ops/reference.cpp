// The fp64 reference: the ground truth every other path is measured against.
#include "kernels/kernel_set.h"
#include "ops/problem.h"
#include "ops/recurrence.h"

namespace hanpu {

Status reference_forward(const Inputs& in, const Options& opt, const Outputs& out) {
  Problem p;
  HANPU_RETURN_IF_ERROR(validate_problem(in, opt, Mode::kReference, &p));
  HANPU_RETURN_IF_ERROR(validate_outputs(p, out, Mode::kReference));
  recur_all<double>(p, out);
  return Status::Ok();
}

const char* kind_name(Kind k) { return k == Kind::kGdn ? "gdn" : "kda"; }

const char* precision_name(Precision p) {
  return p == Precision::kAuto ? "auto" : p == Precision::kExact ? "exact" : "bf16";
}

bool parse_precision(const std::string& name, Precision* out) {
  for (Precision p : {Precision::kAuto, Precision::kExact, Precision::kBf16}) {
    if (name == precision_name(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

const char* head_mapping_name(HeadMapping m) { return m == HeadMapping::kGrouped ? "grouped" : "tiled"; }

bool parse_head_mapping(const std::string& name, HeadMapping* out) {
  for (HeadMapping m : {HeadMapping::kGrouped, HeadMapping::kTiled}) {
    if (name == head_mapping_name(m)) {
      *out = m;
      return true;
    }
  }
  return false;
}

Precision resolve_precision(Precision p, DType q_dtype) {
  if (p != Precision::kAuto) return p;
  return q_dtype == DType::kBF16 && active_kernels().bf16_gemms_beat_fp32() ? Precision::kBf16 : Precision::kExact;
}

}  // namespace hanpu
