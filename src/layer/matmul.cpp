#include "layer/matmul.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>
#include <tuple>

#include <oneapi/dnnl/dnnl.hpp>

#include "core/aligned.h"
#include "exec/thread_pool.h"
#include "kernels/simd.h"
#include "layer/bf16_weights_matmul.h"

namespace hanpu::layer {
namespace {

using dt = dnnl::memory::data_type;

dt to_dnnl(DType d) { return d == DType::kBF16 ? dt::bf16 : dt::f32; }

// Debian's oneDNN runs on GNU OpenMP, whose threads are not the engine's: after each parallel region they
// spin (GOMP_SPINCOUNT: 300,000 rounds unless OMP_WAIT_POLICY is set) on the cores where the engine's pool
// runs the conv, the core and the norm next, and the two sets of threads take turns. A decode step is five
// such parts of a few ms each: with OMP_WAIT_POLICY=passive, the batch-64 step of a qwen3.5-0.8b layer took
// 0.69x the time (fp32; 4 interleaved rounds of `hanpu layer --weights f32 --tokens 512 --decode 1,16,64
// --threads 2`, Intel Xeon @ 2.80GHz, AVX-512, no AVX512-BF16 or AMX). So oneDNN runs single-threaded here,
// on the engine's pool (onednn_matmul below), and no OpenMP thread is started. The symbols are looked up in
// the libgomp that libdnnl already loaded, so nothing here needs OpenMP compile flags.
struct OmpApi {
  void (*set)(int) = nullptr;
  int (*get)() = nullptr;
};
const OmpApi& omp_api() {
  static const OmpApi api = [] {
    OmpApi a;
    if (void* h = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
      a.set = reinterpret_cast<void (*)(int)>(dlsym(h, "omp_set_num_threads"));
      a.get = reinterpret_cast<int (*)()>(dlsym(h, "omp_get_max_threads"));
    }
    return a;
  }();
  return api;
}

// One OpenMP thread for oneDNN on this thread while in scope (the caller's own setting restored after).
class SingleOmpThread {
 public:
  SingleOmpThread() {
    const OmpApi& a = omp_api();
    if (!a.set || !a.get) return;
    saved_ = a.get();
    a.set(1);
  }
  ~SingleOmpThread() {
    if (saved_ > 0) omp_api().set(saved_);
  }
  SingleOmpThread(const SingleOmpThread&) = delete;
  SingleOmpThread& operator=(const SingleOmpThread&) = delete;

 private:
  int saved_ = 0;
};

// Primitives are cached per calling thread and shape: a oneDNN built without DNNL_ENABLE_CONCURRENT_EXEC (as
// Debian's is) shares one scratchpad between primitives and wants each primitive run on the thread that made
// it; so kept, concurrent calls from any threads are safe.
struct Key {
  std::thread::id thread;
  int64_t M, N, Kd, ldx, ldy;
  DType in, out;
  bool operator<(const Key& o) const {
    return std::tie(thread, M, N, Kd, ldx, ldy, in, out) < std::tie(o.thread, o.M, o.N, o.Kd, o.ldx, o.ldy, o.in, o.out);
  }
};

struct Cache {
  std::mutex mu;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::map<Key, dnnl::matmul> prims;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: oneDNN may still run at exit in other static destructors
  return *c;
}

// The product on one oneDNN matmul primitive (x and W of in_dtype), on the calling thread alone.
Status onednn_matmul_here(int64_t M, int64_t N, int64_t Kd, DType in_dtype, const void* x, int64_t ldx, const void* w,
                          DType out_dtype, void* y, int64_t ldy) {
  const SingleOmpThread one;  // before creation too: oneDNN sizes a primitive's blocking by the thread count
  Cache& c = cache();
  const Key key{std::this_thread::get_id(), M, N, Kd, ldx, ldy, in_dtype, out_dtype};
  dnnl::matmul prim;
  try {
    std::lock_guard<std::mutex> lock(c.mu);  // primitives execute concurrently; only the map is guarded
    auto it = c.prims.find(key);
    if (it == c.prims.end()) {
      if (c.prims.size() >= 256) c.prims.clear();  // bounded: shapes of old calls are dropped together
      using md = dnnl::memory::desc;
      const md a({M, Kd}, to_dnnl(in_dtype), {ldx, 1});
      const md b({Kd, N}, to_dnnl(in_dtype), {1, Kd});  // W [N, Kd] row-major read as W^T
      const md d({M, N}, to_dnnl(out_dtype), {ldy, 1});
      it = c.prims.emplace(key, dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, d), c.engine)))
               .first;
    }
    prim = it->second;
  } catch (const dnnl::error& e) {
    return Status(StatusCode::kUnimplemented, std::string("oneDNN matmul for [") + std::to_string(M) + ", " +
                                                  std::to_string(Kd) + "] x [" + std::to_string(Kd) + ", " +
                                                  std::to_string(N) + "] " + dtype_name(in_dtype) + ": " + e.what());
  }
  try {
    dnnl::stream s(c.engine);
    dnnl::memory A({{M, Kd}, to_dnnl(in_dtype), {ldx, 1}}, c.engine, const_cast<void*>(x));
    dnnl::memory B({{Kd, N}, to_dnnl(in_dtype), {1, Kd}}, c.engine, const_cast<void*>(w));
    dnnl::memory D({{M, N}, to_dnnl(out_dtype), {ldy, 1}}, c.engine, y);
    prim.execute(s, {{DNNL_ARG_SRC, A}, {DNNL_ARG_WEIGHTS, B}, {DNNL_ARG_DST, D}});
    s.wait();
  } catch (const dnnl::error& e) {
    return Status(StatusCode::kUnimplemented, std::string("oneDNN matmul failed: ") + e.what());
  }
  return Status::Ok();
}

// W's rows [0, N) in whole slices of `slice` rows (the last takes the rest) over the workers: how many take part
// (`threads` resolved, at most one a slice), and worker t's rows [n0, n1) of `parts`.
int slice_parts(int64_t N, int64_t slice, int threads) {
  return static_cast<int>(std::min<int64_t>(ThreadPool::resolve(threads), (N + slice - 1) / slice));
}
void slice_range(int64_t N, int64_t slice, int parts, int t, int64_t* n0, int64_t* n1) {
  const int64_t slices = (N + slice - 1) / slice;
  *n0 = std::min(N, slices * t / parts * slice);
  *n1 = std::min(N, slices * (t + 1) / parts * slice);
}

// The product over the engine's pool, oneDNN single-threaded on each worker. oneDNN 2.6's blocked kernels
// (brg:avx512_core) take only a dense y (row stride N); for a strided y it falls back to gemm:jit, 1.3-1.6x
// slower here (ONEDNN_VERBOSE=1). So:
// - many rows (M >= kRowSplit a worker) and a dense y: worker t takes x's and y's rows [m0, m1) and all of W
//   (W read once a worker; over that many rows it is a small part of the time);
// - few rows (decode's batches, short prompts), where the product is W's bytes: worker t takes W's rows
//   [n0, n1) (y's columns), whole multiples of kSlice, into a dense buffer of its own, then copied into y.
// Each element is the same dot product over Kd either way.
constexpr int64_t kRowSplit = 128, kSlice = 64;

Status onednn_matmul(int64_t M, int64_t N, int64_t Kd, DType in_dtype, const void* x, int64_t ldx, const void* w,
                     DType out_dtype, void* y, int64_t ldy, int threads) {
  const int T = ThreadPool::resolve(threads);
  const std::size_t in_size = dtype_size(in_dtype), out_size = dtype_size(out_dtype);
  const unsigned char* xb = static_cast<const unsigned char*>(x);
  const unsigned char* wb = static_cast<const unsigned char*>(w);
  unsigned char* yb = static_cast<unsigned char*>(y);
  if (T > 1 && ldy == N && M >= kRowSplit * T) {
    std::vector<Status> status(T);
    shared_pool(T).run([&](int t) {
      const int64_t m0 = M * t / T, m1 = M * (t + 1) / T;
      status[t] = onednn_matmul_here(m1 - m0, N, Kd, in_dtype, xb + m0 * ldx * in_size, ldx, w, out_dtype,
                                     yb + m0 * ldy * out_size, ldy);
    });
    for (const Status& s : status) HANPU_RETURN_IF_ERROR(s);
    return Status::Ok();
  }
  const int parts = slice_parts(N, kSlice, T);
  if (parts <= 1) return onednn_matmul_here(M, N, Kd, in_dtype, x, ldx, w, out_dtype, y, ldy);
  std::vector<Status> status(parts);
  shared_pool(parts).run([&](int t) {
    int64_t n0, n1;
    slice_range(N, kSlice, parts, t, &n0, &n1);
    const int64_t nb = n1 - n0;
    thread_local AlignedVector<unsigned char> part;  // this worker's dense [M, nb] block of y
    part.resize(static_cast<std::size_t>(M * nb) * out_size);
    status[t] = onednn_matmul_here(M, nb, Kd, in_dtype, x, ldx, wb + n0 * Kd * in_size, out_dtype, part.data(), nb);
    if (!status[t].ok()) return;
    for (int64_t m = 0; m < M; ++m) std::memcpy(yb + (m * ldy + n0) * out_size, part.data() + m * nb * out_size, nb * out_size);
  });
  for (const Status& s : status) HANPU_RETURN_IF_ERROR(s);
  return Status::Ok();
}

// Bf16Route::kPairs: worker t takes W's packed blocks [n0, n1) (y's columns) and, a block of rows at a time,
// widens x's rows into an fp32 copy of its own (exact; x[m, Kd] = 0 for an odd Kd), which then meets each of
// its W blocks (bf16_pairs_matmul). A row block's copy and one W block (kPairCols x Kd bf16) stay in the
// worker's L2: at most kRowsBytes of x (256 rows of Kd = 1024). Each worker widens every row of x: one
// conversion per element of x against one multiply-add per element of x for each of its columns (hundreds). Rows per block measured on the stacked input
// projection ([2048, 1024] x [1024, 4096], one thread, Intel Xeon @ 2.80GHz without AVX512-BF16): 64 / 128 /
// 256 rows at 104 / 113 / 125 GFLOP/s.
void pairs_matmul(int64_t M, const uint16_t* x, int64_t ldx, const ProjectionWeight& w, DType out_dtype, void* y,
                  int64_t ldy, int threads) {
  constexpr int64_t kRowsBytes = int64_t{1} << 20, kMaxRows = 256;
  const int64_t N = w.rows(), Kd = w.depth(), Kp = bf16_pairs_depth(Kd), ldp = 2 * Kp;
  const int64_t block_rows = std::clamp<int64_t>(kRowsBytes / (ldp * int64_t{sizeof(float)}), 1, kMaxRows);
  const std::size_t y_size = dtype_size(out_dtype);
  const auto* packed = static_cast<const uint32_t*>(w.data());
  const int parts = slice_parts(N, kPairCols, threads);
  shared_pool(parts).run([&](int t) {
    int64_t n0, n1;
    slice_range(N, kPairCols, parts, t, &n0, &n1);
    thread_local AlignedVector<float> xf;  // this worker's widened rows [rows, ldp]
    xf.resize(static_cast<std::size_t>(std::min(M, block_rows) * ldp));
    for (int64_t m0 = 0; m0 < M; m0 += block_rows) {
      const int64_t rows = std::min(block_rows, M - m0);
      simd::bf16_to_f32_rows(rows, Kd, x + m0 * ldx, ldx, xf.data(), ldp);
      if (Kd < ldp)
        for (int64_t r = 0; r < rows; ++r) xf[r * ldp + Kd] = 0.0f;
      bf16_pairs_matmul(rows, n0, n1, Kp, xf.data(), packed, out_dtype == DType::kBF16,
                        static_cast<unsigned char*>(y) + m0 * ldy * y_size, ldy);
    }
  });
}

}  // namespace

bool onednn_native_bf16() {
  static const bool native = [] {
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);  // a bit mask: AMX includes it
    return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & bf16) == bf16;
  }();
  return native;
}

Status ProjectionWeight::make(int64_t N, int64_t Kd, DType dtype, const void* w, Bf16Route route,
                              ProjectionWeight* out) {
  if (dtype != DType::kF32 && dtype != DType::kBF16) return InvalidArgument("projection weight: dtype must be F32 or BF16");
  if (N < 0 || Kd < 1) return InvalidArgument("projection weight: shape [" + std::to_string(N) + ", " +
                                              std::to_string(Kd) + "] must have N >= 0 and Kd >= 1");
  if (N > 0 && !w) return InvalidArgument("projection weight: data is null");
  ProjectionWeight p;
  p.N_ = N, p.Kd_ = Kd, p.dtype_ = dtype;
  if (dtype == DType::kBF16 && route == Bf16Route::kAuto)
    route = onednn_native_bf16() ? Bf16Route::kNative : Bf16Route::kPairs;
  p.route_ = dtype == DType::kF32 ? Bf16Route::kNative : route;
  if (p.route_ == Bf16Route::kPairs) {
    p.data_.resize(bf16_pairs_size(N, Kd) * sizeof(uint32_t));
    pack_bf16_pairs(N, Kd, static_cast<const uint16_t*>(w), reinterpret_cast<uint32_t*>(p.data_.data()));
  } else {
    const std::size_t bytes = static_cast<std::size_t>(N * Kd) * dtype_size(dtype);
    p.data_.resize(bytes);
    if (bytes) std::memcpy(p.data_.data(), w, bytes);
  }
  *out = std::move(p);
  return Status::Ok();
}

Status matmul_nt(int64_t M, const void* x, int64_t ldx, const ProjectionWeight& w, DType out_dtype, void* y,
                 int64_t ldy, int threads) {
  if (M == 0 || w.rows() == 0) return Status::Ok();
  if (out_dtype != DType::kF32 && out_dtype != DType::kBF16) return InvalidArgument("matmul: y's dtype must be F32 or BF16");
  if (ldx < w.depth() || ldy < w.rows())
    return InvalidArgument("matmul: row strides ldx " + std::to_string(ldx) + " < Kd " + std::to_string(w.depth()) +
                           " or ldy " + std::to_string(ldy) + " < N " + std::to_string(w.rows()));
  if (w.route() == Bf16Route::kPairs) {
    pairs_matmul(M, static_cast<const uint16_t*>(x), ldx, w, out_dtype, y, ldy, threads);
    return Status::Ok();
  }
  return onednn_matmul(M, w.rows(), w.depth(), w.dtype(), x, ldx, w.data(), out_dtype, y, ldy, threads);
}

}  // namespace hanpu::layer
