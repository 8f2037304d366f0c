#include "exec/chunk_program.h"

#include <map>
#include <set>

namespace hanpu {

namespace {

using plan::OpCode;

// Produced by the fused state-independent routine (prepare_chunk).
bool prepared(OpCode c) {
  switch (c) {
    case OpCode::kCumsum: case OpCode::kExpG: case OpCode::kExpGl: case OpCode::kExpGlast: case OpCode::kMask:
    case OpCode::kKp: case OpCode::kKn: case OpCode::kQp: case OpCode::kKKt: case OpCode::kQKt: case OpCode::kP:
    case OpCode::kA: case OpCode::kSolve:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string ChunkProgram::describe() const {
  std::string s;
  for (OpCode op : ops) {
    if (!s.empty()) s += ' ';
    s += plan::op_code_name(op);
  }
  s += std::string(packed_update ? " (packed" : " (row-major") + (in_place ? ", in place)" : ", old and new state)");
  if (!bf16) return s;
  std::string kept;
  for (auto [on, name] : {std::pair{keep_state, "S"}, {keep_keys, "K^T"}, {keep_vn, "V'"}}) {
    if (on) kept += std::string(kept.empty() ? "" : " ") + name;
  }
  return s + " bf16: " + (repack_row_blocks ? "every GEMM call packs" : kept.empty() ? "nothing kept packed"
                                                                                     : "kept packed " + kept);
}

Status compile_chunk_program(const plan::Graph& g, const std::vector<plan::Layout>& op_layout,
                             const plan::PlanOptions& opt, ChunkProgram* out) {
  HANPU_RETURN_IF_ERROR(plan::check_chunk_graph(g));
  if (op_layout.size() != g.ops.size()) return InvalidArgument("plan has a layout for " + std::to_string(op_layout.size()) +
                                                               " of its " + std::to_string(g.ops.size()) + " steps");
  ChunkProgram p;
  std::set<OpCode> seen;
  int ktv_at = -1, last_s_read = -1;
  for (int i = 0; i < static_cast<int>(g.ops.size()); ++i) {
    const plan::OpNode& o = g.ops[i];
    seen.insert(o.code);
    if (o.engine == plan::Engine::kVector && op_layout[i] == plan::Layout::kBlocked) {
      return InvalidArgument("plan step '" + o.name + "' is a vector step on blocked tiles; the CPU engine's vector "
                             "kernels work on row-major rows (plan for --device host)");
    }
    for (int t : o.inputs) {
      if (t == g.state_in && o.code != OpCode::kUpdate) last_s_read = static_cast<int>(p.ops.size());
    }
    if (prepared(o.code)) continue;
    if (o.code == OpCode::kKtV) {
      ktv_at = static_cast<int>(p.ops.size());
      p.packed_update = op_layout[i] == plan::Layout::kBlocked;
    }
    p.ops.push_back(o.code);
  }
  for (OpCode need : {OpCode::kCumsum, OpCode::kExpG, OpCode::kExpGl, OpCode::kExpGlast, OpCode::kKKt, OpCode::kQKt,
                      OpCode::kP, OpCode::kA, OpCode::kSolve, OpCode::kPV, OpCode::kO, OpCode::kKd, OpCode::kKtV,
                      OpCode::kUpdate}) {
    if (!seen.count(need)) return InvalidArgument(std::string("plan has no step '") + plan::op_code_name(need) + "'");
  }
  if (!seen.count(OpCode::kVnFromTR) && !seen.count(OpCode::kVnFromUWS)) return InvalidArgument("plan has no step producing V'");
  // The update overwrites S at the KtV step unless S is read after it.
  p.in_place = last_s_read < ktv_at;
  if (opt.bf16) {
    p.bf16 = true;
    p.repack_row_blocks = opt.packing == plan::Packing::kPackAlways;
    std::map<plan::Value, int> blocked_readers;  // of each right operand
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
      const plan::OpNode& o = g.ops[i];
      if (op_layout[i] == plan::Layout::kBlocked && plan::shares_right_operand(g.kind, o)) {
        ++blocked_readers[g.tensors[o.inputs[1]].value];
      }
    }
    p.keep_state = blocked_readers[plan::Value::kS] >= 2;
    p.keep_keys = blocked_readers[plan::Value::kK] >= 2;
    p.keep_vn = blocked_readers[plan::Value::kVn] >= 2;
  }
  *out = std::move(p);
  return Status::Ok();
}

}  // namespace hanpu
