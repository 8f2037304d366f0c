#include "layer/matmul.h"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <tuple>

#include <oneapi/dnnl/dnnl.hpp>

namespace hanpu::layer {
namespace {

using dt = dnnl::memory::data_type;

dt to_dnnl(DType d) { return d == DType::kBF16 ? dt::bf16 : dt::f32; }

// Debian's oneDNN runs on GNU OpenMP; its thread count is the calling thread's OpenMP setting. The symbol
// is looked up in the libgomp that libdnnl already loaded, so nothing here needs OpenMP compile flags.
void set_omp_threads(int threads) {
  using Fn = void (*)(int);
  static Fn fn = [] {
    void* h = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
    return h ? reinterpret_cast<Fn>(dlsym(h, "omp_set_num_threads")) : nullptr;
  }();
  if (fn) fn(threads);
}

struct Key {
  int64_t M, N, Kd, ldx, ldy;
  DType in, out;
  bool operator<(const Key& o) const {
    return std::tie(M, N, Kd, ldx, ldy, in, out) < std::tie(o.M, o.N, o.Kd, o.ldx, o.ldy, o.in, o.out);
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

}  // namespace

Status matmul_nt(int64_t M, int64_t N, int64_t Kd, DType in_dtype, const void* x, int64_t ldx, const void* w,
                 DType out_dtype, void* y, int64_t ldy, int threads) {
  if (M == 0 || N == 0) return Status::Ok();
  if ((in_dtype != DType::kF32 && in_dtype != DType::kBF16) || (out_dtype != DType::kF32 && out_dtype != DType::kBF16))
    return InvalidArgument("matmul: dtypes must be F32 or BF16");
  Cache& c = cache();
  const Key key{M, N, Kd, ldx, ldy, in_dtype, out_dtype};
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
    set_omp_threads(threads);
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

}  // namespace hanpu::layer
