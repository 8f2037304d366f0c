#include "ops/named_inputs.h"

namespace hanpu {

Status bind_inputs(const TensorFile& file, Inputs* in) {
  *in = Inputs();
  struct Required {
    const char* name;
    TensorView* view;
  } required[] = {{"q", &in->q}, {"k", &in->k}, {"v", &in->v}, {"g", &in->g}, {"beta", &in->beta}};
  for (const Required& r : required) {
    const Tensor* t = file.find(r.name);
    if (!t) return NotFound(std::string("missing tensor '") + r.name + "' (required: q, k, v, g, beta)");
    *r.view = t->view();
  }
  struct Optional {
    const char* name;
    std::optional<TensorView>* view;
  } optional[] = {{"initial_state", &in->initial_state},
                  {"cu_seqlens", &in->cu_seqlens},
                  {"A_log", &in->A_log},
                  {"dt_bias", &in->dt_bias}};
  for (const Optional& o : optional) {
    if (const Tensor* t = file.find(o.name)) *o.view = t->view();
  }
  return Status::Ok();
}

}  // namespace hanpu
