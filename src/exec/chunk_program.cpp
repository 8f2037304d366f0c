#include "exec/chunk_program.h"

#include <map>
#include <set>

namespace hanpu {

namespace {

// The engine's operation for a state-dependent step, keyed by the name of the tensor it produces (names
// are unique in a chunk graph); V' has two producers depending on the order.
const std::map<std::string, StateOp>& state_ops() {
  static const std::map<std::string, StateOp> m = {
      {"Ke", StateOp::kKe}, {"KS", StateOp::kKS}, {"Qs", StateOp::kQs}, {"QS", StateOp::kQS}, {"R", StateOp::kR},
      {"Kb", StateOp::kKb}, {"W", StateOp::kW},   {"Vb", StateOp::kVb}, {"U", StateOp::kU},   {"WS", StateOp::kWS},
      {"PV", StateOp::kPV}, {"O", StateOp::kO},   {"Kd", StateOp::kKd}, {"KtV", StateOp::kKtV}, {"S'", StateOp::kUpdate}};
  return m;
}

// Produced by the fused state-independent routine (prepare_chunk).
const std::set<std::string>& prepared() {
  static const std::set<std::string> s = {"G", "eG", "eGl", "eGlast", "M", "Kp", "Kn", "Qp", "KKt", "QKt", "P", "A", "T"};
  return s;
}

const char* op_name(StateOp op) {
  switch (op) {
    case StateOp::kKe: return "Ke";
    case StateOp::kKS: return "KS";
    case StateOp::kQs: return "Qs";
    case StateOp::kQS: return "QS";
    case StateOp::kR: return "R";
    case StateOp::kVnFromTR: return "V'=TR";
    case StateOp::kKb: return "Kb";
    case StateOp::kW: return "W";
    case StateOp::kVb: return "Vb";
    case StateOp::kU: return "U";
    case StateOp::kWS: return "WS";
    case StateOp::kVnFromUWS: return "V'=U-WS";
    case StateOp::kPV: return "PV";
    case StateOp::kO: return "O";
    case StateOp::kKd: return "Kd";
    case StateOp::kKtV: return "KtV";
    case StateOp::kUpdate: return "S'";
  }
  return "?";
}

}  // namespace

std::string ChunkProgram::describe() const {
  std::string s;
  for (StateOp op : ops) {
    if (!s.empty()) s += ' ';
    s += op_name(op);
  }
  return s + (packed_update ? " (packed" : " (row-major") + (in_place ? ", in place)" : ", old and new state)");
}

Status compile_chunk_program(const plan::Graph& g, const std::vector<plan::Layout>& op_layout, ChunkProgram* out) {
  HANPU_RETURN_IF_ERROR(plan::check_graph(g));
  if (op_layout.size() != g.ops.size()) return InvalidArgument("plan has a layout for " + std::to_string(op_layout.size()) +
                                                               " of its " + std::to_string(g.ops.size()) + " steps");
  ChunkProgram p;
  std::set<std::string> seen;
  int ktv_at = -1, last_s_read = -1;
  for (int i = 0; i < static_cast<int>(g.ops.size()); ++i) {
    const plan::OpNode& o = g.ops[i];
    if (o.outputs.size() != 1) return InvalidArgument("plan step '" + o.name + "' has several outputs");
    const std::string& name = g.tensors[o.outputs[0]].name;
    seen.insert(name);
    if (o.engine == plan::Engine::kVector && op_layout[i] == plan::Layout::kBlocked) {
      return InvalidArgument("plan step '" + o.name + "' is a vector step on blocked tiles; the CPU engine's vector "
                             "kernels work on row-major rows (plan for --device host)");
    }
    for (int t : o.inputs) {
      if (t == g.state_in && name != "S'") last_s_read = static_cast<int>(p.ops.size());
    }
    if (prepared().count(name)) continue;
    StateOp op;
    if (name == "V'") {
      const bool from_tr = o.inputs.size() == 2 && g.tensors[o.inputs[1]].name == "R";
      op = from_tr ? StateOp::kVnFromTR : StateOp::kVnFromUWS;
    } else {
      const auto it = state_ops().find(name);
      if (it == state_ops().end()) {
        return InvalidArgument("plan step '" + o.name + "' (producing '" + name + "') has no engine implementation");
      }
      op = it->second;
    }
    if (op == StateOp::kKtV) {
      ktv_at = static_cast<int>(p.ops.size());
      p.packed_update = op_layout[i] == plan::Layout::kBlocked;
    }
    p.ops.push_back(op);
  }
  for (const char* need : {"G", "eG", "eGl", "eGlast", "KKt", "QKt", "P", "A", "T", "V'", "PV", "O", "Kd", "KtV", "S'"}) {
    if (!seen.count(need)) return InvalidArgument(std::string("plan has no step producing '") + need + "'");
  }
  // The update overwrites S at the KtV step unless S is read after it.
  p.in_place = last_s_read < ktv_at;
  *out = std::move(p);
  return Status::Ok();
}

}  // namespace hanpu
