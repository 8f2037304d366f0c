// Problem: a validated operator call. Every entry point (reference, chunk, recurrent, slots) validates its
// arguments here first, so all of them reject the same bad inputs with the same messages.
#pragma once

#include <cstdint>
#include <vector>

#include "hanpu/ops.h"

namespace hanpu {

enum class Mode { kReference, kChunk, kRecurrent, kSlots };

// One sequence: tokens [begin, begin + len) of batch row `batch`.
struct Sequence {
  int64_t batch = 0, begin = 0, len = 0;
};

struct Problem {
  Kind kind = Kind::kGdn;
  int64_t B = 0, T = 0, H = 0, HV = 0, K = 0, V = 0, N = 0;
  int64_t group = 1;  // HV / H: value head hv reads q/k head hv / group (grouped) or hv % H (tiled)
  double scale = 1.0;
  bool bf16_gemm = false;  // Options::precision resolved to kBf16: GEMM operands rounded to bf16
  std::vector<Sequence> seqs;
  Inputs in;
  Options opt;

  int64_t qk_head(int64_t hv) const { return opt.head_mapping == HeadMapping::kTiled ? hv % H : hv / group; }
  // Number of gate values per (token, value head): 1 for GDN, K for KDA.
  int64_t gate_width() const { return kind == Kind::kKda ? K : 1; }
};

// Checks the inputs and options for `mode` and fills `p`. Messages name the argument and give the
// expected and actual values, e.g. "v.shape[2] (HV) = 3 must be a multiple of q.shape[2] (H) = 2".
Status validate_problem(const Inputs& in, const Options& opt, Mode mode, Problem* p);

// Checks o (and final_state when present) against a validated problem: shapes, dtypes, and that each
// element has its own memory and no output aliases another tensor of the call.
Status validate_outputs(const Problem& p, const Outputs& out, Mode mode);

// Checks a state tensor (initial_state, final_state or a slot pool) of `rows` leading entries.
Status validate_state(const Problem& p, const TensorView& s, const char* name, int64_t rows, bool rows_fixed);

// The view with its strides written out (row-major ones when it had none), so that stride(d) is a lookup
// in hot loops.
TensorView with_strides(TensorView v);
Outputs with_strides(const Outputs& out);

// Checks a state-slot pool ([P, HV, K, V] F32, or [P, HV, V, K] with state_v_first) and the slot index of
// each sequence (I64 [N]; negative = padding; active slots distinct and < P), and that the pool and o
// have memory of their own (check_written_pool); fills `slots`.
Status validate_slot_pool(const Problem& p, const TensorView& state_pool, const TensorView& slot_indices,
                          const TensorView& o, std::vector<int64_t>* slots);

// The slot pool of a decode call is written in place: each of its elements needs its own memory, and
// neither it nor o may share memory with another tensor of the call (inputs, o, slot_indices).
Status check_written_pool(const Problem& p, const TensorView& pool, const TensorView& o, const TensorView& slots);

// Rank, strides, data pointer and dtype class (float, or I64 when !want_float) of one view.
Status check_view(const TensorView& t, const char* name, int rank, bool want_float);

// Byte range [lo, hi) that a view's elements span (strides may be negative: a reversed view starts at its
// data pointer and runs downwards). Empty views span nothing.
struct Span {
  uintptr_t lo = 0, hi = 0;
};
Span span_of(const TensorView& t);
bool views_overlap(const TensorView& a, const TensorView& b);

// A tensor the call writes must give every element its own memory: with the dimensions ordered by |stride|,
// each |stride| must exceed the reach of the smaller ones (sum |stride_j| (shape_j - 1)). That is exact for
// the layouts views produce (row-major, permuted, sliced, reversed) and refuses broadcast (stride 0) ones.
Status check_distinct_elements(const TensorView& t, const char* name);

// Shape string "[a, b, c]".
std::string shape_str(const std::vector<int64_t>& s);

}  // namespace hanpu
