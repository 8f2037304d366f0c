#include "fuse/task.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <cstring>
#include <sstream>

#include "exec/chunk_program.h"
#include "exec/strategies.h"
#include "kernels/kernel_set.h"
#include "kernels/simd.h"
#include "ops/problem.h"
#include "plan/plan.h"
#include "sim/chunk_lowering.h"

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

// Bounds on what one task may hold: its stages (each a few hundred bytes of plan and trace) and, on the
// host, its data.
constexpr double kMaxStages = 2e6;
constexpr double kMaxHostFloats = 268435456;  // 1 GiB of fp32

Status check_size(double stages, double host_floats, bool host) {
  // Printed from the doubles: the sizes of absurd dimensions are past int64's range.
  char msg[160];
  if (stages > kMaxStages) {
    std::snprintf(msg, sizeof msg, "too many tiles: %.0f stages (at most %.0f)", stages, kMaxStages);
    return InvalidArgument(msg);
  }
  if (host && host_floats > kMaxHostFloats) {
    std::snprintf(msg, sizeof msg, "the host data would need %.0f MiB (at most %.0f)", host_floats * 4 / 1048576,
                  kMaxHostFloats * 4 / 1048576);
    return InvalidArgument(msg);
  }
  return Status::Ok();
}

// Appends stages, tracking the resource vector.
class Builder {
 public:
  Builder(const plan::Device& d, Task* t) : d_(d), t_(t) {}

  // Each stage takes its host work (no run unless the task is built with host data).
  using Run = HostStage;
  int dma(std::string name, double bytes, bool store, std::vector<int> deps, Run run) {
    t_->dma_bytes += bytes;
    return add({std::move(name), EngineClass::kDma, store, 0, bytes, std::move(deps)}, std::move(run));
  }
  // Compute stages in device cycles, or from the bytes a vector pass touches / the MACs of a product.
  int compute(EngineClass e, std::string name, double cycles, std::vector<int> deps, Run run) {
    (e == EngineClass::kVector ? t_->vector_cycles : t_->matrix_cycles) += cycles;
    return add({std::move(name), e, false, cycles, 0, std::move(deps)}, std::move(run));
  }
  int vector(std::string name, double bytes_touched, std::vector<int> deps, Run run) {
    return compute(EngineClass::kVector, std::move(name), bytes_touched / d_.vector_bytes_per_cycle, std::move(deps),
                   std::move(run));
  }
  int matrix(std::string name, double macs, std::vector<int> deps, Run run) {
    return compute(EngineClass::kMatrix, std::move(name), macs / d_.matrix_macs_per_cycle, std::move(deps),
                   std::move(run));
  }

 private:
  int add(Stage s, Run run) {
    s.deps.erase(std::remove(s.deps.begin(), s.deps.end(), -1), s.deps.end());
    t_->stages.push_back(std::move(s));
    if (run.run) t_->host.push_back(std::move(run));
    return static_cast<int>(t_->stages.size()) - 1;
  }
  const plan::Device& d_;
  Task* t_;
};

}  // namespace

AlignedVector<float> task_inputs(int64_t n, uint32_t seed) {
  AlignedVector<float> x(static_cast<size_t>(n));
  for (float& v : x) {
    seed = seed * 1664525u + 1013904223u;
    v = static_cast<float>(seed >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  return x;
}

namespace {

// Copies a rows x cols block between row-major matrices.
void copy_block(int64_t rows, int64_t cols, const float* src, int64_t lds, float* dst, int64_t ldd) {
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * ldd, src + r * lds, static_cast<size_t>(cols) * sizeof(float));
}

// A stage's host work over `rows` rows in slices of `per` rows: fn(r0, r1) does rows [r0, r1).
HostStage by_rows(int64_t rows, int64_t per, std::function<void(int64_t, int64_t)> fn) {
  HostStage h;
  h.slices = (rows + per - 1) / per;
  h.run = [rows, per, fn = std::move(fn)](int64_t s0, int64_t s1) { fn(s0 * per, std::min(s1 * per, rows)); };
  return h;
}

// Rows per host slice of a GEMM stage: the AMX kernel's 32-row tile blocks (16-row slices ran its one-tile
// blocks, at half their reuse: group 4's A 0.73-0.85x against 0.79-0.90x at 32 rows over the five GEMM pairs
// of examples/fuse-pairs-host.txt), four of the AVX512-BF16 kernel's 8-row register blocks. Every output
// element is one chain over the shared dimension whatever row block it falls in, so any cut gives the
// same bits.
constexpr int64_t kGemmSliceRows = 32;

// GEMM tiles: t x t output tiles, K panels of t; region = A and B panels double-buffered (4 t^2 e) plus
// the fp32 accumulator (4 t^2). Host buffers: per slot the A panel, the B panel and the B panel packed
// in the matrix unit's layout; the accumulator and the output staging tile.
struct GemmData {
  AlignedVector<float> A, B, C;
  AlignedVector<float> a[2], b[2], acc, out;
  Bf16Operand bp[2];  // each slot's B panel in the matrix unit's layout (the kernel registry's pack_bf16)
};

Status build_gemm(const std::vector<int64_t>& dim, double e, const plan::Device& d, int64_t region, bool host,
                  Task* t) {
  const int64_t M = dim[0], N = dim[1], K = dim[2];
  int64_t tile = 0;
  for (int64_t c : {512, 256, 128, 64, 32, 16}) {
    if (static_cast<double>(4 * c * c) * e + static_cast<double>(4 * c * c) <= static_cast<double>(region)) {
      tile = c;
      break;
    }
  }
  if (tile == 0) return InvalidArgument("gemm: no tile fits an on-chip region of " + std::to_string(region) + " bytes");
  t->on_chip_bytes = static_cast<int64_t>(4.0 * static_cast<double>(tile * tile) * e) + 4 * tile * tile;
  auto tiles = [&](int64_t n) { return static_cast<double>((n + tile - 1) / tile); };
  HANPU_RETURN_IF_ERROR(check_size(tiles(M) * tiles(N) * (3 * tiles(K) + 2),
                                   static_cast<double>(M) * static_cast<double>(K) +
                                       static_cast<double>(K) * static_cast<double>(N) +
                                       static_cast<double>(M) * static_cast<double>(N),
                                   host));
  std::shared_ptr<GemmData> g;
  if (host) {
    g = std::make_shared<GemmData>();
    g->A = task_inputs(M * K, 1);
    g->B = task_inputs(K * N, 2);
    g->C.assign(static_cast<size_t>(M * N), 0.0f);
    for (int s = 0; s < 2; ++s) {
      g->a[s].resize(static_cast<size_t>(tile * tile));
      g->b[s].resize(static_cast<size_t>(tile * tile));
    }
    g->acc.resize(static_cast<size_t>(tile * tile));
    g->out.resize(static_cast<size_t>(tile * tile));
    t->host_output = std::shared_ptr<const AlignedVector<float>>(g, &g->C);
  }
  // Host work of `rows` rows, sliced as GEMM stages are; none without host data.
  auto run = [&](int64_t rows, std::function<void(int64_t, int64_t)> fn) {
    return host ? by_rows(rows, kGemmSliceRows, std::move(fn)) : Builder::Run();
  };
  Builder b(d, t);
  std::vector<int> ring = {-1, -1};  // the matrix stage that last read each panel buffer
  int64_t panel = 0;
  for (int64_t i = 0; i < M; i += tile) {
    for (int64_t j = 0; j < N; j += tile) {
      const int64_t tm = std::min(tile, M - i), tn = std::min(tile, N - j);
      int acc = -1;
      for (int64_t k = 0; k < K; k += tile, ++panel) {
        const int64_t tk = std::min(tile, K - k);
        const int s = static_cast<int>(panel % 2);
        const double dm = static_cast<double>(tm), dn = static_cast<double>(tn), dk = static_cast<double>(tk);
        const int la = b.dma("load A", dm * dk * e, false, {ring[s]}, run(tm, [=](int64_t r0, int64_t r1) {
          copy_block(r1 - r0, tk, g->A.data() + (i + r0) * K + k, K, g->a[s].data() + r0 * tk, tk);
        }));
        const int lb = b.dma("load B", dk * dn * e, false, {ring[s]}, run(tk, [=](int64_t r0, int64_t r1) {
          copy_block(r1 - r0, tn, g->B.data() + (k + r0) * N + j, N, g->b[s].data() + r0 * tn, tn);
        }));
        // The B panel into the matrix unit's layout, whole (a packing is one operand): one slice.
        const int prep = b.vector("prepare", (dm + dn) * dk * e, {la, lb}, run(1, [=](int64_t, int64_t) {
          simd::pack_bf16(tk, tn, g->b[s].data(), tn, &g->bp[s]);
        }));
        acc = b.matrix("multiply", dm * dn * dk, {prep, acc}, run(tm, [=](int64_t r0, int64_t r1) {
          simd::gemm_packed_bf16(r1 - r0, tn, tk, g->a[s].data() + r0 * tk, tk, g->bp[s], k > 0,
                                 g->acc.data() + r0 * tn, tn);
        }));
        ring[s] = acc;
      }
      const int out = b.vector("convert", static_cast<double>(tm * tn) * 4, {acc}, run(tm, [=](int64_t r0, int64_t r1) {
        copy_block(r1 - r0, tn, g->acc.data() + r0 * tn, tn, g->out.data() + r0 * tn, tn);
      }));
      b.dma("store C", static_cast<double>(tm * tn) * e, true, {out}, run(tm, [=](int64_t r0, int64_t r1) {
        copy_block(r1 - r0, tn, g->out.data() + r0 * tn, tn, g->C.data() + (i + r0) * N + j, N);
      }));
    }
  }
  return Status::Ok();
}

// Row-block vector tasks: blocks of rb rows, input and output double-buffered (2 rb C (in_e + e)).
// Host buffers: per slot the block in fp32 (dequant: its int8 input too) and per-row scratch; the
// transform writes its blocked layout to a second buffer.
struct RowData {
  AlignedVector<float> in, out;
  AlignedVector<int8_t> in8;
  AlignedVector<float> x[2], y[2], row[2];
  AlignedVector<int8_t> x8[2];
};

// One vector pass of `kind` over rows [r0, r1) of a block of `rows` x C on the host (every pass works row
// by row, so a block's rows may be cut anywhere).
void host_pass(const std::string& kind, int pass, int64_t r0, int64_t r1, int64_t rows, int64_t C, float* x, float* y,
               float* row, const int8_t* x8) {
  const int64_t n = (r1 - r0) * C;
  float* xs = x + r0 * C;
  if (kind == "softmax") {
    if (pass == 0) {
      for (int64_t r = r0; r < r1; ++r) row[r] = *std::max_element(x + r * C, x + (r + 1) * C);
    } else if (pass == 1) {
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = 0; c < C; ++c) x[r * C + c] -= row[r];
      }
      simd::exp_f32(n, xs, xs);
    } else if (pass == 2) {
      for (int64_t r = r0; r < r1; ++r) {
        double sum = 0;
        for (int64_t c = 0; c < C; ++c) sum += x[r * C + c];
        row[r] = static_cast<float>(1.0 / sum);
      }
    } else {
      simd::scale_rows(r1 - r0, C, xs, C, row + r0, 1, nullptr, xs, C);
    }
  } else if (kind == "rmsnorm") {
    if (pass == 0) {
      for (int64_t r = r0; r < r1; ++r) {
        row[r] = static_cast<float>(1.0 / std::sqrt(simd::sum_squares(C, x + r * C) / static_cast<double>(C) + 1e-6));
      }
    } else {
      simd::scale_rows(r1 - r0, C, xs, C, row + r0, 1, nullptr, xs, C);
    }
  } else if (kind == "dequant") {
    for (int64_t i = r0 * C; i < r1 * C; ++i) x[i] = static_cast<float>(x8[i]) * (1.0f / 64);
  } else if (kind == "transform") {
    // Row-major rows x C to 16 x 16 blocks, block-columns outermost (ND -> NZ).
    const int64_t rb = (rows + 15) / 16 * 16;
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = 0; c < C; ++c) y[(c / 16) * rb * 16 + r * 16 + c % 16] = x[r * C + c];
    }
  } else {  // eltwise: one fused multiply-add per element and pass
    for (int64_t i = 0; i < n; ++i) xs[i] = xs[i] * 0.999f + 0.001f;
  }
}

Status build_rows(const std::string& kind, const std::vector<int64_t>& dim, double e, double in_e, int passes,
                  const plan::Device& d, int64_t region, bool host, Task* t) {
  const int64_t R = dim[0], C = dim[1];
  const double row_bytes = static_cast<double>(C) * (2 * in_e + 2 * e);
  if (row_bytes > static_cast<double>(region)) {
    return InvalidArgument(kind + ": one row of " + std::to_string(C) + " columns does not fit an on-chip region of " +
                           std::to_string(region) + " bytes");
  }
  int64_t rb = 1;
  while (rb * 2 <= R && static_cast<double>(rb * 2) * row_bytes <= static_cast<double>(region)) rb *= 2;
  t->on_chip_bytes = static_cast<int64_t>(static_cast<double>(rb) * row_bytes);
  HANPU_RETURN_IF_ERROR(check_size(static_cast<double>((R + rb - 1) / rb) * (passes + 2),
                                   2.0 * static_cast<double>(R) * static_cast<double>(C), host));
  const bool dequant = kind == "dequant", transform = kind == "transform";
  std::shared_ptr<RowData> g;
  if (host) {
    g = std::make_shared<RowData>();
    if (dequant) {
      const AlignedVector<float> v = task_inputs(R * C, 3);
      g->in8.resize(v.size());
      for (size_t i = 0; i < v.size(); ++i) g->in8[i] = static_cast<int8_t>(std::lround(v[i] * 127));
    } else {
      g->in = task_inputs(R * C, 3);
    }
    const int64_t padded = (rb + 15) / 16 * 16;
    g->out.assign(static_cast<size_t>(transform ? (R + rb - 1) / rb * padded * ((C + 15) / 16 * 16) : R * C), 0.0f);
    for (int s = 0; s < 2; ++s) {
      g->x[s].resize(static_cast<size_t>(rb * C));
      g->row[s].resize(static_cast<size_t>(rb));
      if (transform) g->y[s].assign(static_cast<size_t>(padded * ((C + 15) / 16 * 16)), 0.0f);
      if (dequant) g->x8[s].resize(static_cast<size_t>(rb * C));
    }
    t->host_output = std::shared_ptr<const AlignedVector<float>>(g, &g->out);
  }
  // Host work over a block's rows, in slices of about 16 KiB of fp32 (at least one row); none without
  // host data.
  const int64_t per = std::max<int64_t>(1, 4096 / C);
  auto run = [&](int64_t rows, std::function<void(int64_t, int64_t)> fn) {
    return host ? by_rows(rows, per, std::move(fn)) : Builder::Run();
  };
  Builder b(d, t);
  std::vector<int> ring = {-1, -1};  // the store that last freed each buffer
  for (int64_t r = 0, blk = 0; r < R; r += rb, ++blk) {
    const int64_t rows = std::min(rb, R - r);
    const int sl = static_cast<int>(blk % 2);
    const double n = static_cast<double>(rows * C);
    int s = b.dma("load", n * in_e, false, {ring[sl]}, run(rows, [=](int64_t r0, int64_t r1) {
      const size_t count = static_cast<size_t>((r1 - r0) * C);
      if (dequant) std::memcpy(g->x8[sl].data() + r0 * C, g->in8.data() + (r + r0) * C, count);
      else std::memcpy(g->x[sl].data() + r0 * C, g->in.data() + (r + r0) * C, count * sizeof(float));
    }));
    for (int p = 0; p < passes; ++p) {
      s = b.vector(kind + " pass", n * e, {s}, run(rows, [=](int64_t r0, int64_t r1) {
        host_pass(kind, p, r0, r1, rows, C, g->x[sl].data(), transform ? g->y[sl].data() : nullptr, g->row[sl].data(),
                  dequant ? g->x8[sl].data() : nullptr);
      }));
    }
    // The transform's store writes its whole blocked tile (padding included): one slice.
    ring[sl] = b.dma("store", n * e, true, {s}, run(transform ? 1 : rows, [=](int64_t r0, int64_t r1) {
      if (transform) {
        std::memcpy(g->out.data() + blk * static_cast<int64_t>(g->y[sl].size()), g->y[sl].data(),
                    g->y[sl].size() * sizeof(float));
      } else {
        std::memcpy(g->out.data() + (r + r0) * C, g->x[sl].data() + r0 * C,
                    static_cast<size_t>((r1 - r0) * C) * sizeof(float));
      }
    }));
  }
  return Status::Ok();
}

// A chunk lowering's work as a task's stages: global loads and stores are DMA stages; compute on its
// engine class; the matrix unit's operand loads (L1 -> L0) on the matrix engine and its result moves
// (L0C -> UB) on the matrix engine, or on the vector engine where the device relays results through it
// (310P), each at its path's rate.
class StageSink : public sim::ChunkSink {
 public:
  StageSink(const plan::Device& d, Builder& b, const Task& t) : d_(d), b_(b), t_(t) {}
  int next_id() const override { return static_cast<int>(t_.stages.size()); }
  int compute(int, Queue q, double cycles, std::vector<int> deps, std::string label) override {
    return b_.compute(q == Queue::kMatrix ? EngineClass::kMatrix : EngineClass::kVector, std::move(label), cycles,
                      std::move(deps), {});
  }
  int move(int, Queue q, double bytes, std::vector<int> deps, std::string label) override {
    switch (q) {
      case Queue::kLoad: return b_.dma("load " + label, bytes, false, std::move(deps), {});
      case Queue::kStore: return b_.dma("store " + label, bytes, true, std::move(deps), {});
      case Queue::kMatrixLoad:
        return b_.compute(EngineClass::kMatrix, std::move(label), bytes / d_.sim.l1_to_l0_bytes_per_cycle,
                          std::move(deps), {});
      case Queue::kForward:  // into the matrix unit's operand memory: counted on the matrix side, as its loads
        return b_.compute(EngineClass::kMatrix, std::move(label), bytes / d_.sim.ub_to_l1_bytes_per_cycle,
                          std::move(deps), {});
      default:
        return b_.compute(d_.sim.l0c_to_ub_via_vector ? EngineClass::kVector : EngineClass::kMatrix, std::move(label),
                          bytes / d_.sim.l0c_to_ub_bytes_per_cycle, std::move(deps), {});
    }
  }

 private:
  const plan::Device& d_;
  Builder& b_;
  const Task& t_;
};

// The planner's plan of a chunk for the device (default passes, C = 64, K = V = 128; with bf16, the packing
// plan of the bf16 precision mode) and the task's region: the plan's peak in the vector memory, refused
// beyond `region`.
Status chunk_plan(Kind kind, const plan::Device& d, int64_t region, bool bf16, plan::Plan* pl, Task* t) {
  plan::PlanOptions po;
  po.bf16 = bf16;
  HANPU_RETURN_IF_ERROR(plan::make_plan(kind, d, po, pl));
  const auto peak = pl->lifetimes.peak_bytes.find(d.vector_mem);
  t->on_chip_bytes = peak == pl->lifetimes.peak_bytes.end() ? 0 : peak->second;
  if (t->on_chip_bytes > region) {
    return InvalidArgument("a chunk needs " + std::to_string(t->on_chip_bytes) + " bytes of " + d.vector_mem +
                           ", more than the region of " + std::to_string(region));
  }
  return Status::Ok();
}

// GDN / KDA chunks of one head from the planner's plan for the device (default passes, C = 64,
// K = V = 128), lowered by the NPU model's chunk lowering (sim/chunk_lowering.h): the state carries from
// chunk to chunk on chip. Region: the plan's peak in the vector memory; chunk c waits for chunk c - 2
// (two input buffers).
Status build_chunks(Kind kind, int64_t chunks, const plan::Device& d, int64_t region, Task* t) {
  if (!d.has_sim) return InvalidArgument("gdn and kda tasks need the device's \"sim\" section");
  plan::Plan pl;
  HANPU_RETURN_IF_ERROR(chunk_plan(kind, d, region, false, &pl, t));
  HANPU_RETURN_IF_ERROR(check_size(static_cast<double>(chunks) * 4 * static_cast<double>(pl.graph.ops.size()), 0, false));
  std::unique_ptr<sim::ChunkLowering> low;
  HANPU_RETURN_IF_ERROR(sim::make_lowering(pl, d, &low));
  Builder b(d, t);
  StageSink sink(d, b, *t);
  std::vector<int> chunk_end;  // the last stage of each chunk
  int state = -1;
  for (int64_t c = 0; c < chunks; ++c) {
    std::map<int, int> have;
    have[low->graph().state_in] = state;
    low->chunk(sink, 0, sim::kAllKernels, have, c >= 2 ? chunk_end[c - 2] : -1);
    state = have[low->graph().state_out];
    chunk_end.push_back(sink.next_id() - 1);
  }
  return Status::Ok();
}

// GDN / KDA chunks of one head on the host: the engine's hanpu strategy's own chunk steps (HeadSteps,
// exec/strategies.h) running the chunk program of the planner's plan for the host device, in the bf16
// precision mode (the matrix unit in use), over deterministic fp32 inputs: one sequence of 64 x CHUNKS
// tokens, one head, K = V = 128, q and k l2-normalised in the kernel, gates in (-0.1, 0], beta in [0, 1).
// Per chunk two stages on the matrix class (both are GEMM-bound): "prepare" (rows, scores, inverse) and
// "state" (the state-dependent steps and the update), chained (one chunk's prepared buffers at a time);
// their cycles are the flops of a warm-up run of chunk 0 (every chunk is a full 64 rows, and the steps'
// flops do not depend on the data) over twice the device's MACs per cycle. Region: the plan's peak in the
// vector memory. The output is o [T, 128].
struct ChunkData {
  AlignedVector<float> q, k, v, g, beta, o;
  Problem p;
  ChunkProgram prog;
  std::unique_ptr<HeadSteps> steps;
};

Status build_host_chunks(Kind kind, int64_t chunks, const plan::Device& d, int64_t region, Task* t) {
  constexpr int64_t kC = 64, kDim = 128;
  const int64_t T = chunks * kC, w = kind == Kind::kKda ? kDim : 1;
  HANPU_RETURN_IF_ERROR(check_size(2.0 * static_cast<double>(chunks), 4.0 * static_cast<double>(T * kDim), true));
  plan::Plan pl;
  HANPU_RETURN_IF_ERROR(chunk_plan(kind, d, region, true, &pl, t));  // the steps run in bf16 precision
  auto g = std::make_shared<ChunkData>();
  HANPU_RETURN_IF_ERROR(compile_chunk_program(pl.graph, pl.layouts.op_layout, pl.opt, &g->prog));
  g->q = task_inputs(T * kDim, 4);
  g->k = task_inputs(T * kDim, 5);
  g->v = task_inputs(T * kDim, 6);
  g->g = task_inputs(T * w, 7);
  for (float& x : g->g) x = -0.05f * (1.0f + x);
  g->beta = task_inputs(T, 8);
  for (float& x : g->beta) x = 0.5f * (1.0f + x);
  g->o.assign(static_cast<size_t>(T * kDim), 0.0f);
  Inputs in;
  in.q = TensorView(g->q.data(), DType::kF32, {1, T, 1, kDim});
  in.k = TensorView(g->k.data(), DType::kF32, {1, T, 1, kDim});
  in.v = TensorView(g->v.data(), DType::kF32, {1, T, 1, kDim});
  in.g = kind == Kind::kKda ? TensorView(g->g.data(), DType::kF32, {1, T, 1, kDim})
                            : TensorView(g->g.data(), DType::kF32, {1, T, 1});
  in.beta = TensorView(g->beta.data(), DType::kF32, {1, T, 1});
  Options opt;
  opt.kind = kind;
  opt.use_qk_l2norm_in_kernel = true;
  opt.precision = Precision::kBf16;
  HANPU_RETURN_IF_ERROR(validate_problem(in, opt, Mode::kChunk, &g->p));
  Outputs out;
  out.o = TensorView(g->o.data(), DType::kF32, {1, T, 1, kDim});
  HANPU_RETURN_IF_ERROR(validate_outputs(g->p, out, Mode::kChunk));
  g->steps = std::make_unique<HeadSteps>(g->p, g->prog, 0, 0, out);
  const double prepare_flops = g->steps->prepare(0), state_flops = g->steps->state(0);
  t->host_output = std::shared_ptr<const AlignedVector<float>>(g, &g->o);
  Builder b(d, t);
  auto step = [&](bool state, int64_t c) {
    HostStage h;
    h.run = [g, state, c](int64_t, int64_t) {
      if (state) g->steps->state(c);
      else g->steps->prepare(c);
    };
    return h;
  };
  int last = -1;
  for (int64_t c = 0; c < chunks; ++c) {
    const int prep = b.matrix("prepare", prepare_flops / 2, {last}, step(false, c));
    last = b.matrix("state", state_flops / 2, {prep}, step(true, c));
  }
  return Status::Ok();
}

}  // namespace

Status build_task(const std::string& spec, const plan::Device& d, int64_t region, Task* out, bool host_data) {
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
  if (host_data) e = 4;  // the host computes in fp32
  Task t;
  t.spec = spec;
  Status st;
  if (kind == "gemm") {
    if (dims.size() != 3 || parts.size() > 3) return bad("gemm takes MxNxK[:dtype]");
    st = build_gemm(dims, e, d, region, host_data, &t);
  } else if (kind == "gdn" || kind == "kda") {
    if (dims.size() != 1 || parts.size() > 2) return bad(kind + " takes CHUNKS (one head, C = 64, K = V = 128)");
    const Kind k = kind == "gdn" ? Kind::kGdn : Kind::kKda;
    st = host_data ? build_host_chunks(k, dims[0], d, region, &t) : build_chunks(k, dims[0], d, region, &t);
  } else {
    static const std::vector<std::pair<std::string, int>> kPasses = {
        {"softmax", 4}, {"rmsnorm", 2}, {"dequant", 1}, {"transform", 1}, {"eltwise", 2}};
    const auto it = std::find_if(kPasses.begin(), kPasses.end(), [&](const auto& k) { return k.first == kind; });
    if (it == kPasses.end()) {
      return bad("unknown kind '" + kind + "' (gemm, softmax, rmsnorm, dequant, transform, eltwise, gdn, kda)");
    }
    if (dims.size() != 2) return bad(kind + " takes RxC");
    int passes = it->second;
    if (parts.size() == 4 && kind == "eltwise") {
      std::vector<int64_t> n;
      if (!parse_dims(parts[3], &n) || n.size() != 1 || n[0] > 64) return bad("the chain length must be 1..64");
      passes = static_cast<int>(n[0]);
    } else if (parts.size() > 3) {
      return bad("too many fields");
    }
    st = build_rows(kind, dims, e, kind == "dequant" ? 1.0 : e, passes, d, region, host_data, &t);
  }
  if (!st.ok()) return bad(st.message());
  *out = std::move(t);
  return Status::Ok();
}

}  // namespace hanpu::fuse
