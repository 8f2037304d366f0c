#include "fuse/task.h"

#include <algorithm>
#include <sstream>

namespace hanpu::fuse {

const char* engine_class_name(EngineClass e) {
  return e == EngineClass::kDma ? "dma" : e == EngineClass::kVector ? "vector" : "matrix";
}

int64_t on_chip_capacity(const plan::Device& d) {
  const plan::Memory* m = d.memory(d.vector_mem);
  return m ? m->bytes : 0;
}

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream ss(s);
  std::string p;
  while (std::getline(ss, p, sep)) parts.push_back(p);
  return parts;
}

bool parse_dims(const std::string& s, std::vector<int64_t>* dims) {
  dims->clear();
  for (const std::string& p : split(s, 'x')) {
    if (p.empty() || p.size() > 9 || p.find_first_not_of("0123456789") != std::string::npos) return false;
    dims->push_back(std::stoll(p));
    if (dims->back() < 1) return false;
  }
  return true;
}

// Appends stages, tracking the resource vector.
class Builder {
 public:
  Builder(const plan::Device& d, Task* t) : d_(d), t_(t) {}

  int dma(std::string name, double bytes, bool store, std::vector<int> deps) {
    t_->dma_bytes += bytes;
    return add({std::move(name), EngineClass::kDma, store, 0, bytes, std::move(deps)});
  }
  int vector(std::string name, double bytes_touched, std::vector<int> deps) {
    const double c = bytes_touched / d_.vector_bytes_per_cycle;
    t_->vector_cycles += c;
    return add({std::move(name), EngineClass::kVector, false, c, 0, std::move(deps)});
  }
  int matrix(std::string name, double macs, std::vector<int> deps) {
    const double c = macs / d_.matrix_macs_per_cycle;
    t_->matrix_cycles += c;
    return add({std::move(name), EngineClass::kMatrix, false, c, 0, std::move(deps)});
  }

 private:
  int add(Stage s) {
    s.deps.erase(std::remove(s.deps.begin(), s.deps.end(), -1), s.deps.end());
    t_->stages.push_back(std::move(s));
    return static_cast<int>(t_->stages.size()) - 1;
  }
  const plan::Device& d_;
  Task* t_;
};

// GEMM tiles: t x t output tiles, K panels of t; region = A and B panels double-buffered (4 t^2 e) plus
// the fp32 accumulator (4 t^2).
Status build_gemm(const std::vector<int64_t>& dim, double e, const plan::Device& d, int64_t region, Task* t) {
  const int64_t M = dim[0], N = dim[1], K = dim[2];
  int64_t tile = 0;
  for (int64_t c : {256, 128, 64, 32, 16}) {
    if (static_cast<double>(4 * c * c) * e + static_cast<double>(4 * c * c) <= static_cast<double>(region)) {
      tile = c;
      break;
    }
  }
  if (tile == 0) return InvalidArgument("gemm: no tile fits an on-chip region of " + std::to_string(region) + " bytes");
  t->on_chip_bytes = static_cast<int64_t>(4.0 * static_cast<double>(tile * tile) * e) + 4 * tile * tile;
  Builder b(d, t);
  std::vector<int> ring = {-1, -1};  // the matrix stage that last read each panel buffer
  int64_t panel = 0;
  for (int64_t i = 0; i < M; i += tile) {
    for (int64_t j = 0; j < N; j += tile) {
      const double tm = static_cast<double>(std::min(tile, M - i)), tn = static_cast<double>(std::min(tile, N - j));
      int acc = -1;
      for (int64_t k = 0; k < K; k += tile, ++panel) {
        const double tk = static_cast<double>(std::min(tile, K - k));
        const int slot = static_cast<int>(panel % 2);
        const int la = b.dma("load A", tm * tk * e, false, {ring[slot]});
        const int lb = b.dma("load B", tk * tn * e, false, {ring[slot]});
        const int prep = b.vector("prepare", (tm + tn) * tk * e, {la, lb});
        acc = b.matrix("multiply", tm * tn * tk, {prep, acc});
        ring[slot] = acc;
      }
      const int out = b.vector("convert", tm * tn * 4, {acc});
      b.dma("store C", tm * tn * e, true, {out});
    }
  }
  return Status::Ok();
}

// Row-block vector tasks: blocks of rb rows, input and output double-buffered (4 rb C e).
Status build_rows(const std::string& kind, const std::vector<int64_t>& dim, double e, double in_e, int passes,
                  const plan::Device& d, int64_t region, Task* t) {
  const int64_t R = dim[0], C = dim[1];
  const double row_bytes = static_cast<double>(C) * (2 * in_e + 2 * e);
  if (row_bytes > static_cast<double>(region)) {
    return InvalidArgument(kind + ": one row of " + std::to_string(C) + " columns does not fit an on-chip region of " +
                           std::to_string(region) + " bytes");
  }
  int64_t rb = 1;
  while (rb * 2 <= R && static_cast<double>(rb * 2) * row_bytes <= static_cast<double>(region)) rb *= 2;
  t->on_chip_bytes = static_cast<int64_t>(static_cast<double>(rb) * row_bytes);
  Builder b(d, t);
  std::vector<int> ring = {-1, -1};  // the store that last freed each buffer
  for (int64_t r = 0, blk = 0; r < R; r += rb, ++blk) {
    const double rows = static_cast<double>(std::min(rb, R - r));
    const int slot = static_cast<int>(blk % 2);
    int s = b.dma("load", rows * static_cast<double>(C) * in_e, false, {ring[slot]});
    for (int p = 0; p < passes; ++p) s = b.vector(kind + " pass", rows * static_cast<double>(C) * e, {s});
    ring[slot] = b.dma("store", rows * static_cast<double>(C) * e, true, {s});
  }
  return Status::Ok();
}

}  // namespace

Status build_task(const std::string& spec, const plan::Device& d, int64_t region, Task* out) {
  const std::vector<std::string> parts = split(spec, ':');
  auto bad = [&](const std::string& why) {
    return InvalidArgument("task '" + spec + "': " + why +
                           " (e.g. gemm:1024x1024x1024:f16, softmax:4096x4096:f32, eltwise:4096x4096:f16:3)");
  };
  if (parts.size() < 2) return bad("expected KIND:DIMS[:DTYPE]");
  const std::string& kind = parts[0];
  std::vector<int64_t> dims;
  if (!parse_dims(parts[1], &dims)) return bad("dimensions '" + parts[1] + "' are not positive integers joined by x");
  double e = 2;
  if (parts.size() >= 3) {
    if (parts[2] == "f32") e = 4;
    else if (parts[2] != "f16" && parts[2] != "bf16") return bad("dtype '" + parts[2] + "' is not f16, bf16 or f32");
  }
  Task t;
  t.spec = spec;
  Status st;
  if (kind == "gemm") {
    if (dims.size() != 3 || parts.size() > 3) return bad("gemm takes MxNxK[:dtype]");
    st = build_gemm(dims, e, d, region, &t);
  } else {
    static const std::vector<std::pair<std::string, int>> kPasses = {
        {"softmax", 4}, {"rmsnorm", 2}, {"dequant", 1}, {"transform", 1}, {"eltwise", 2}};
    const auto it = std::find_if(kPasses.begin(), kPasses.end(), [&](const auto& k) { return k.first == kind; });
    if (it == kPasses.end()) return bad("unknown kind '" + kind + "' (gemm, softmax, rmsnorm, dequant, transform, eltwise)");
    if (dims.size() != 2) return bad(kind + " takes RxC");
    int passes = it->second;
    if (parts.size() == 4 && kind == "eltwise") {
      std::vector<int64_t> n;
      if (!parse_dims(parts[3], &n) || n.size() != 1 || n[0] > 64) return bad("the chain length must be 1..64");
      passes = static_cast<int>(n[0]);
    } else if (parts.size() > 3) {
      return bad("too many fields");
    }
    st = build_rows(kind, dims, e, kind == "dequant" ? 1.0 : e, passes, d, region, &t);
  }
  if (!st.ok()) return bad(st.message());
  *out = std::move(t);
  return Status::Ok();
}

}  // namespace hanpu::fuse
