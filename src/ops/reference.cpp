// The fp64 reference: the ground truth every other path is measured against.
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

}  // namespace hanpu
