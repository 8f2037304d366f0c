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

// Bf16Route::kWidened: blocks of kRows rows of x and kCols rows of W widened into fp32 copies, each block
// product on oneDNN's fp32 matmul, straight into y (F32) or through a block copy rounded into y (BF16). W is
// widened once per row block of x (twice for a 4096-token prompt), x once. The copies (x's block [kRows, Kd],
// two of W's [kCols, Kd], y's [kRows, kCols]) take 24 MiB for Kd = 1024 (40 for 2048), whatever M, for the
// call. The conversions run on the thread pool between oneDNN's calls, the rounding of one block's product
// beside the widening of the next block of W (one thread converting took about 15% of a 4096-token layer's
// projections). Block sizes measured on the stacked input projection ([4096, 1024] x [1024, 8224], 2 threads,
// Intel Xeon without AVX512-BF16, `hanpu layer --compare-gemm`, two rounds): 2048 x 1024 at 234 / 193
// GFLOP/s, beside 4096 x 1024 220 / 138, 2048 x 256 178 / 146, 1024 x 512 193 / 163, and the fp32 layer's
// unblocked fp32 product 189 / 152 in the same rounds.
Status widened_matmul(int64_t M, int64_t N, int64_t Kd, const uint16_t* x, int64_t ldx, const uint16_t* w,
                      DType out_dtype, void* y, int64_t ldy, int threads) {
  constexpr int64_t kRows = 2048, kCols = 1024;
  const int64_t mb_max = std::min(M, kRows), nb_max = std::min(N, kCols);
  const int64_t x_size = mb_max * Kd, w_size = nb_max * Kd, y_size = out_dtype == DType::kBF16 ? mb_max * nb_max : 0;
  AlignedVector<float> scratch(static_cast<size_t>(x_size + 2 * w_size + y_size));
  float* const xf = scratch.data();
  float* const wf[2] = {xf + x_size, xf + x_size + w_size};
  float* const yf = xf + x_size + 2 * w_size;
  ThreadPool& pool = shared_pool(ThreadPool::resolve(threads));
  const int T = pool.size();
  const auto part = [T](int64_t n, int t, int64_t* b, int64_t* e) {
    *b = n * t / T;
    *e = n * (t + 1) / T;
  };
  // W's rows [n0, n0 + nb), worker t's share, into wf[slot].
  const auto widen_w = [&](int64_t n0, int64_t nb, int slot, int t) {
    int64_t b, e;
    part(nb, t, &b, &e);
    simd::bf16_to_f32((e - b) * Kd, w + (n0 + b) * Kd, wf[slot] + b * Kd);
  };
  for (int64_t m0 = 0; m0 < M; m0 += kRows) {
    const int64_t mb = std::min(kRows, M - m0);
    pool.run([&](int t) {
      int64_t b, e;
      part(mb, t, &b, &e);
      simd::bf16_to_f32_rows(e - b, Kd, x + (m0 + b) * ldx, ldx, xf + b * Kd, Kd);
      widen_w(0, nb_max, 0, t);
    });
    for (int64_t n0 = 0, slot = 0; n0 < N; n0 += kCols, slot ^= 1) {
      const int64_t nb = std::min(kCols, N - n0), next = n0 + kCols, nb_next = std::min(kCols, N - next);
      float* dst = out_dtype == DType::kF32 ? static_cast<float*>(y) + m0 * ldy + n0 : yf;
      HANPU_RETURN_IF_ERROR(onednn_matmul(mb, nb, Kd, DType::kF32, xf, Kd, wf[slot], DType::kF32, dst,
                                          out_dtype == DType::kF32 ? ldy : nb, threads));
      if (out_dtype == DType::kF32 && next >= N) continue;
      pool.run([&](int t) {
        if (next < N) widen_w(next, nb_next, static_cast<int>(slot ^ 1), t);
        if (out_dtype == DType::kF32) return;
        int64_t b, e;
        part(mb, t, &b, &e);
        simd::f32_to_bf16_rows(e - b, nb, yf + b * nb, nb, static_cast<uint16_t*>(y) + (m0 + b) * ldy + n0, ldy);
      });
    }
  }
  return Status::Ok();
}

// Bf16Route::kInRegisters: x widened once (few rows), then each worker W's rows [n0, n1) in 16-row slices,
// widened in registers (layer/bf16_weights_matmul.h).
void in_registers_matmul(int64_t M, int64_t N, int64_t Kd, const uint16_t* x, int64_t ldx, const uint16_t* w,
                         DType out_dtype, void* y, int64_t ldy, int threads) {
  constexpr int64_t kRowsSlice = 16;
  AlignedVector<float> xf(static_cast<std::size_t>(M * Kd));
  simd::bf16_to_f32_rows(M, Kd, x, ldx, xf.data(), Kd);
  const int parts = slice_parts(N, kRowsSlice, threads);
  shared_pool(parts).run([&](int t) {
    int64_t n0, n1;
    slice_range(N, kRowsSlice, parts, t, &n0, &n1);
    bf16_weights_matmul(M, n0, n1, Kd, xf.data(), w, out_dtype == DType::kBF16, y, ldy);
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

Status matmul_nt(int64_t M, int64_t N, int64_t Kd, DType in_dtype, const void* x, int64_t ldx, const void* w,
                 DType out_dtype, void* y, int64_t ldy, int threads, Bf16Route route) {
  if (M == 0 || N == 0) return Status::Ok();
  if ((in_dtype != DType::kF32 && in_dtype != DType::kBF16) || (out_dtype != DType::kF32 && out_dtype != DType::kBF16))
    return InvalidArgument("matmul: dtypes must be F32 or BF16");
  if (route == Bf16Route::kAuto && in_dtype == DType::kBF16)
    route = onednn_native_bf16() ? Bf16Route::kNative : M >= kWidenMinRows ? Bf16Route::kWidened : Bf16Route::kInRegisters;
  if (in_dtype == DType::kF32 || route == Bf16Route::kNative)
    return onednn_matmul(M, N, Kd, in_dtype, x, ldx, w, out_dtype, y, ldy, threads);
  const auto* xb = static_cast<const uint16_t*>(x);
  const auto* wb = static_cast<const uint16_t*>(w);
  if (route == Bf16Route::kWidened) return widened_matmul(M, N, Kd, xb, ldx, wb, out_dtype, y, ldy, threads);
  in_registers_matmul(M, N, Kd, xb, ldx, wb, out_dtype, y, ldy, threads);
  return Status::Ok();
}

}  // namespace hanpu::layer
