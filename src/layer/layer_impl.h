// A built layer: the weights in the packed form the forward reads (layer/weights.cpp builds it,
// layer/forward.cpp runs it).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "hanpu/layer.h"
#include "layer/matmul.h"

namespace hanpu {

// Workspace buffers kept between calls: a prefill's buffers are 100s of MB (the projections' outputs), and
// fresh ones cost a page fault and a zeroed page per 4 KiB on first touch. A call takes the smallest free
// buffer that fits (or allocates one) and hands it back when it ends; concurrent calls get their own. At
// most kRetainedBytes stay with the pool (the oldest go first), so one long prompt does not pin gigabytes.
class BufferPool {
 public:
  static constexpr std::size_t kRetainedBytes = std::size_t{1} << 30;

  class Lease {
   public:
    Lease() = default;
    Lease(BufferPool* pool, std::size_t bytes, std::unique_ptr<unsigned char[]> p)
        : pool_(pool), bytes_(bytes), p_(std::move(p)) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&& o) {
      release();
      pool_ = o.pool_, bytes_ = o.bytes_, p_ = std::move(o.p_);
      return *this;
    }
    ~Lease() { release(); }
    unsigned char* get() const { return p_.get(); }

   private:
    void release() {
      if (pool_ && p_) pool_->give(bytes_, std::move(p_));
    }
    BufferPool* pool_ = nullptr;
    std::size_t bytes_ = 0;
    std::unique_ptr<unsigned char[]> p_;
  };

  Lease take(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    std::size_t best = free_.size();
    for (std::size_t i = 0; i < free_.size(); ++i)
      if (free_[i].first >= bytes && (best == free_.size() || free_[i].first < free_[best].first)) best = i;
    if (best == free_.size()) return Lease(this, bytes, std::unique_ptr<unsigned char[]>(new unsigned char[bytes]));
    auto [size, p] = std::move(free_[best]);
    free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
    retained_ -= size;
    return Lease(this, size, std::move(p));
  }

  std::size_t retained_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return retained_;
  }

 private:
  void give(std::size_t bytes, std::unique_ptr<unsigned char[]> p) {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes > kRetainedBytes) return;  // freed here
    free_.emplace_back(bytes, std::move(p));
    retained_ += bytes;
    while (retained_ > kRetainedBytes || free_.size() > 8) {  // the oldest go
      retained_ -= free_.front().first;
      free_.erase(free_.begin());
    }
  }

  std::mutex mu_;
  std::vector<std::pair<std::size_t, std::unique_ptr<unsigned char[]>>> free_;  // (bytes, buffer), oldest first
  std::size_t retained_ = 0;
};

struct Layer::Impl {
  mutable BufferPool buffers;  // workspaces of prefill and decode calls

  LayerSpec spec;
  Precision precision = Precision::kExact;  // kExact or kBf16 (resolved)
  DType act = DType::kF32;                  // activation and weight dtype: F32 or BF16

  // The first-stage projection: every weight that reads x, stacked into one [N1, D] matrix so one GEMM
  // reads x once. Rows (= columns of its output P):
  //   GDN: [q (H K) | k (H K) | v (HV V) | z (HV V) | b (HV) | a (HV)]
  //   KDA: [q (H K) | k (H K) | v (H K)  | b (H) | f_a (K) | g_a (K)]
  layer::ProjectionWeight w_in;
  int64_t n1 = 0;
  int64_t col_z = 0, col_b = 0, col_a = 0;    // GDN
  int64_t col_fa = 0, col_ga = 0;             // KDA (col_b too)
  layer::ProjectionWeight w_fb, w_gb;         // KDA second stage, [H K, K]
  layer::ProjectionWeight w_out;              // [D, HV V]
  std::vector<float> conv_w;                  // [Kc, conv_dim], tap-major (values of the act dtype)
  std::vector<float> conv_b;                  // [conv_dim] or empty
  Tensor a_log, dt_bias;                      // F32: [HV]; dt_bias [HV] (GDN) or [HV K] (KDA)
  std::vector<float> norm_w;                  // [V] (values of the weight's dtype)
};

}  // namespace hanpu
