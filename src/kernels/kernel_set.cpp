#include "kernels/kernel_set.h"

#include <cstdio>
#include <cstdlib>

namespace hanpu {

const std::vector<KernelSet>& kernel_sets() {
  static const std::vector<KernelSet> sets = [] {
    std::vector<KernelSet> s;
    // The providers, best instruction sets first. A new one is one line here.
    append_highway_kernel_sets(&s);
    append_avx512bf16_kernel_sets(&s);
    append_amx_kernel_sets(&s);
    s.push_back(make_reference_kernel_set());
    return s;
  }();
  return sets;
}

const KernelSet& reference_kernel_set() { return kernel_sets().back(); }

void gemm_scaled_acc_by_parts(const KernelSet& self, bool trans_a, int64_t M, int64_t N, int64_t Kd, const float* A,
                              int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, RowScale rs) {
  if (rs.s) self.scale_rows(M, N, C, ldc, rs.s, rs.stride, nullptr, C, ldc);
  (trans_a ? self.gemm_tn : self.gemm_nn)(M, N, Kd, A, lda, B, ldb, true, C, ldc);
}

const KernelSet& active_kernels() {
  static const KernelSet* chosen = [] {
    const std::vector<KernelSet>& sets = kernel_sets();
    const char* want = std::getenv("HANPU_KERNELS");
    if (!want || !*want) return &sets.front();
    for (const KernelSet& k : sets) {
      if (k.name == want) return &k;
    }
    std::string names;
    for (const KernelSet& k : sets) names += (names.empty() ? "" : ", ") + k.name;
    std::fprintf(stderr, "hanpu: HANPU_KERNELS=%s is not a kernel set of this build and CPU (%s); using %s\n", want,
                 names.c_str(), sets.front().name.c_str());
    return &sets.front();
  }();
  return *chosen;
}

}  // namespace hanpu
