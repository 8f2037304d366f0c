#include "sim/native_ops.h"

namespace hanpu::sim {

namespace {

FrameworkOp vec(std::string name, double in, double out) { return {std::move(name), false, 0, 0, 0, in, out}; }

FrameworkOp mm(std::string name, int64_t m, int64_t n, int64_t k) {
  return {std::move(name), true, m, n, k, static_cast<double>(m * k + k * n), static_cast<double>(m * n)};
}

}  // namespace

int64_t NativeProgram::launches(int64_t chunks) const {
  return static_cast<int64_t>(before.size() + after.size()) + chunks * static_cast<int64_t>(per_chunk.size());
}

NativeProgram native_program(Kind kind, int64_t C, int64_t K, int64_t V) {
  const double c = static_cast<double>(C), k = static_cast<double>(K), v = static_cast<double>(V);
  const double gk = kind == Kind::kKda ? k : 1;  // gate elements per row
  NativeProgram p;
  auto& b = p.before;
  for (const char* x : {"q", "k"}) {  // F.normalize: norm, clamp_min, div
    b.push_back(vec(std::string(x) + " norm", c * k, c));
    b.push_back(vec(std::string(x) + " clamp", c, c));
    b.push_back(vec(std::string(x) + " div", c * k + c, c * k));
  }
  const std::pair<const char*, double> inputs[] = {{"q", c * k}, {"k", c * k}, {"v", c * v}, {"beta", c}, {"g", c * gk}};
  for (const auto& [x, n] : inputs) {  // .transpose(1, 2).contiguous().to(torch.float32)
    b.push_back(vec(std::string(x) + " copy", n, n));
    b.push_back(vec(std::string(x) + " cast", n, n));
  }
  for (const auto& [x, n] : inputs) b.push_back(vec(std::string(x) + " pad", n, n));
  b.push_back(vec("q scale", c * k, c * k));
  b.push_back(vec("v beta", c * v + c, c * v));
  b.push_back(vec("k beta", c * k + c, c * k));
  b.push_back(vec("g cumsum", c * gk, c * gk));
  b.push_back(vec("decay diff", c * gk, c * c));
  b.push_back(vec("decay tril", c * c, c * c));
  b.push_back(vec("decay exp", c * c, c * c));
  b.push_back(vec("decay tril", c * c, c * c));
  b.push_back(mm("A = k_beta k^T", C, C, K));
  b.push_back(vec("A decay", 2 * c * c, c * c));
  b.push_back(vec("A mask", c * c, c * c));
  b.push_back(vec("A neg", c * c, c * c));
  for (int64_t i = 1; i < C; ++i) {  // the solve, row by row
    const double r = static_cast<double>(i);
    b.push_back(vec("solve clone row", r, r));
    b.push_back(vec("solve clone block", r * r, r * r));
    b.push_back(vec("solve mul", r + r * r, r * r));
    b.push_back(vec("solve sum", r * r, r));
    b.push_back(vec("solve add", 2 * r, r));
    b.push_back(vec("solve copy back", r, r));
  }
  b.push_back(vec("eye", 0, c * c));
  b.push_back(vec("A + I", 2 * c * c, c * c));
  b.push_back(mm("V~ = A v_beta", C, V, C));
  b.push_back(vec("e^g", c * gk, c * gk));
  b.push_back(vec("k_beta e^g", c * k + c * gk, c * k));
  b.push_back(mm("k_cumdecay = A (k_beta e^g)", C, K, C));
  b.push_back(vec("zero state", 0, 0));  // K V per head: negligible beside the per-unit work
  b.push_back(vec("zero output", 0, c * v));
  auto& l = p.per_chunk;
  l.push_back(mm("q k^T", C, C, K));
  l.push_back(vec("scores decay", 2 * c * c, c * c));
  l.push_back(vec("scores mask", c * c, c * c));
  l.push_back(mm("V'' = k_cumdecay S", C, V, K));
  l.push_back(vec("V' = V~ - V''", 2 * c * v, c * v));
  l.push_back(vec("e^g", c * gk, c * gk));
  l.push_back(vec("q e^g", c * k + c * gk, c * k));
  l.push_back(mm("(q e^g) S", C, V, K));
  l.push_back(mm("P V'", C, V, C));
  l.push_back(vec("O add", 2 * c * v, c * v));
  l.push_back(vec("O copy", c * v, c * v));
  l.push_back(vec("e^g_last", gk, gk));
  l.push_back(vec("S decay", k * v + gk, k * v));
  l.push_back(vec("g_last - g", c * gk + gk, c * gk));
  l.push_back(vec("exp", c * gk, c * gk));
  l.push_back(vec("k decay", c * k + c * gk, c * k));
  l.push_back(mm("(k decay)^T V'", K, V, C));
  l.push_back(vec("S add", 2 * k * v, k * v));
  p.after.push_back(vec("O copy", c * v, c * v));
  p.after.push_back(vec("O cast", c * v, c * v));
  return p;
}

}  // namespace hanpu::sim
