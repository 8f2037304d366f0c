#include "plan/graph.h"

#include <algorithm>
#include <limits>
#include <map>

namespace hanpu::plan {

const char* engine_name(Engine e) { return e == Engine::kMatrix ? "matrix" : "vector"; }
const char* layout_name(Layout l) { return l == Layout::kDense ? "dense" : "blocked"; }

namespace {

constexpr const char* kValueNames[] = {"Q",  "K",   "V", "g",   "beta", "S",  "G",  "eG", "eGl", "eGlast", "Kp", "Kn",
                                       "Qp", "M",   "KKt", "A", "T",    "QKt", "P", "Qs", "QS",  "PV",     "O",  "V'",
                                       "Kd", "KtV", "S'",  "Ke", "KS",  "R",   "Kb", "W",  "Vb",  "U",      "WS"};
static_assert(sizeof(kValueNames) / sizeof(kValueNames[0]) == static_cast<std::size_t>(Value::kCount));

// An operator code's signature: its result, its operands for GDN and for KDA (KDA's scores read the
// reference-row scaled operands Kp, Kn, Qp instead of the mask M), and the engine work it is.
struct Signature {
  const char* name;
  Value out;
  std::vector<Value> gdn, kda;
  OpKind kind;
};

const std::vector<Signature>& signatures() {
  using V = Value;
  static const std::vector<Signature> s = {
      {"G", V::kG, {V::kGate}, {V::kGate}, OpKind::kVector},
      {"eG", V::kEG, {V::kG}, {V::kG}, OpKind::kVector},
      {"eGl", V::kEGl, {V::kG}, {V::kG}, OpKind::kVector},
      {"eGlast", V::kEGlast, {V::kG}, {V::kG}, OpKind::kVector},
      {"Kp", V::kKp, {}, {V::kK, V::kG}, OpKind::kVector},
      {"Kn", V::kKn, {}, {V::kK, V::kG}, OpKind::kVector},
      {"Qp", V::kQp, {}, {V::kQ, V::kG}, OpKind::kVector},
      {"M", V::kM, {V::kG}, {}, OpKind::kVector},
      {"KKt", V::kKKt, {V::kK, V::kK}, {V::kKp, V::kKn}, OpKind::kGemm},
      {"A", V::kA, {V::kKKt, V::kM, V::kBeta}, {V::kKKt, V::kBeta}, OpKind::kVector},
      {"T", V::kT, {V::kA}, {V::kA}, OpKind::kSolve},
      {"QKt", V::kQKt, {V::kQ, V::kK}, {V::kQp, V::kKn}, OpKind::kGemm},
      {"P", V::kP, {V::kQKt, V::kM}, {V::kQKt}, OpKind::kVector},
      {"Qs", V::kQs, {V::kQ, V::kEG}, {V::kQ, V::kEG}, OpKind::kVector},
      {"QS", V::kQS, {V::kQs, V::kS}, {V::kQs, V::kS}, OpKind::kGemm},
      {"PV", V::kPV, {V::kP, V::kVn}, {V::kP, V::kVn}, OpKind::kGemm},
      {"O", V::kO, {V::kQS, V::kPV}, {V::kQS, V::kPV}, OpKind::kVector},
      {"Kd", V::kKd, {V::kK, V::kEGl}, {V::kK, V::kEGl}, OpKind::kVector},
      {"KtV", V::kKtV, {V::kKd, V::kVn}, {V::kKd, V::kVn}, OpKind::kGemm},
      {"S'", V::kSnew, {V::kS, V::kEGlast, V::kKtV}, {V::kS, V::kEGlast, V::kKtV}, OpKind::kVector},
      {"Ke", V::kKe, {V::kK, V::kEG}, {V::kK, V::kEG}, OpKind::kVector},
      {"KS", V::kKS, {V::kKe, V::kS}, {V::kKe, V::kS}, OpKind::kGemm},
      {"R", V::kR, {V::kV, V::kKS, V::kBeta}, {V::kV, V::kKS, V::kBeta}, OpKind::kVector},
      {"V'=TR", V::kVn, {V::kT, V::kR}, {V::kT, V::kR}, OpKind::kGemm},
      {"Kb", V::kKb, {V::kK, V::kBeta, V::kEG}, {V::kK, V::kBeta, V::kEG}, OpKind::kVector},
      {"W", V::kW, {V::kT, V::kKb}, {V::kT, V::kKb}, OpKind::kGemm},
      {"Vb", V::kVb, {V::kV, V::kBeta}, {V::kV, V::kBeta}, OpKind::kVector},
      {"U", V::kU, {V::kT, V::kVb}, {V::kT, V::kVb}, OpKind::kGemm},
      {"WS", V::kWS, {V::kW, V::kS}, {V::kW, V::kS}, OpKind::kGemm},
      {"V'=U-WS", V::kVn, {V::kU, V::kWS}, {V::kU, V::kWS}, OpKind::kVector},
  };
  return s;
}

const Signature& signature(OpCode c) { return signatures()[static_cast<std::size_t>(c)]; }

}  // namespace

const char* value_name(Value v) { return kValueNames[static_cast<std::size_t>(v)]; }

bool parse_value(const std::string& name, Value* out) {
  for (std::size_t i = 0; i < static_cast<std::size_t>(Value::kCount); ++i) {
    if (name == kValueNames[i]) {
      *out = static_cast<Value>(i);
      return true;
    }
  }
  return false;
}

const char* op_code_name(OpCode c) { return signature(c).name; }

bool parse_op_code(const std::string& name, OpCode* out) {
  for (std::size_t i = 0; i < signatures().size(); ++i) {
    if (name == signatures()[i].name) {
      *out = static_cast<OpCode>(i);
      return true;
    }
  }
  return false;
}

Role role_of(Value v) {
  switch (v) {
    case Value::kQ: case Value::kK: case Value::kV: case Value::kGate: case Value::kBeta: return Role::kInput;
    case Value::kS: return Role::kStateIn;
    case Value::kSnew: return Role::kStateOut;
    case Value::kO: return Role::kOutput;
    default: return Role::kIntermediate;
  }
}

double OpNode::macs() const {
  if (kind == OpKind::kGemm) return static_cast<double>(m) * n * k;
  if (kind == OpKind::kSolve) return static_cast<double>(m) * (m - 1) * (m - 2) / 6.0;
  return 0;
}

double OpNode::executed_macs(int64_t br, int64_t bc) const {
  const auto pad = [](int64_t x, int64_t b) { return static_cast<double>((x + b - 1) / b * b); };
  if (kind == OpKind::kGemm) return pad(m, br) * pad(n, bc) * pad(k, bc);
  if (kind == OpKind::kSolve) {
    const double b = static_cast<double>((m + br - 1) / br);
    return b * (b + 1) * (b + 2) / 6.0 * static_cast<double>(br * br * br);
  }
  return 0;
}

int Graph::add_tensor(std::string name, int64_t rows, int64_t cols, Role role) {
  tensors.push_back({Value::kCount, std::move(name), rows, cols, 4, role});
  return static_cast<int>(tensors.size()) - 1;
}

int Graph::add_tensor(Value v, int64_t rows, int64_t cols) {
  tensors.push_back({v, value_name(v), rows, cols, 4, role_of(v)});
  return static_cast<int>(tensors.size()) - 1;
}

std::vector<int> Graph::consumers(int t) const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    if (std::find(ops[i].inputs.begin(), ops[i].inputs.end(), t) != ops[i].inputs.end()) out.push_back(i);
  }
  return out;
}

int Graph::producer(int t) const {
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    if (std::find(ops[i].outputs.begin(), ops[i].outputs.end(), t) != ops[i].outputs.end()) return i;
  }
  return -1;
}

double Graph::matrix_macs() const {
  double s = 0;
  for (const OpNode& o : ops) s += o.macs();
  return s;
}

double Graph::bytes_of(Role r) const {
  double s = 0;
  for (const TensorNode& t : tensors) s += t.role == r ? static_cast<double>(t.bytes()) : 0;
  return s;
}

namespace {

// Builds the operators of one chunk. Shapes: Q, K [C, K]; V [C, V]; g [C, w] (w = 1 for GDN, K for
// KDA); beta [C, 1]; S [K, V].
class Builder {
 public:
  Builder(Kind kind, int64_t C, int64_t K, int64_t V) {
    g_.kind = kind;
    g_.C = C;
    g_.K = K;
    g_.V = V;
    w_ = kind == Kind::kKda ? K : 1;
  }

  int t(Value v, int64_t r, int64_t c) { return g_.add_tensor(v, r, c); }

  OpNode op(OpCode code, int step, std::string name, std::vector<int> ins, int out) {
    OpNode o;
    o.code = code;
    o.name = std::move(name);
    o.kind = signature(code).kind;
    o.engine = o.kind == OpKind::kVector ? Engine::kVector : Engine::kMatrix;
    o.step = step;
    o.inputs = std::move(ins);
    o.outputs = {out};
    return o;
  }

  void vec(OpCode code, int step, std::string name, std::vector<int> ins, int out, double ops_per_elem, bool row_wise) {
    OpNode o = op(code, step, std::move(name), std::move(ins), out);
    o.vector_ops = ops_per_elem * static_cast<double>(g_.tensors[out].rows * g_.tensors[out].cols);
    o.row_wise = row_wise;
    g_.ops.push_back(o);
  }

  void gemm(OpCode code, int step, std::string name, int a, int b, int out, bool ta, bool tb) {
    OpNode o = op(code, step, std::move(name), {a, b}, out);
    o.m = g_.tensors[out].rows;
    o.n = g_.tensors[out].cols;
    o.k = ta ? g_.tensors[a].rows : g_.tensors[a].cols;
    o.trans_a = ta;
    o.trans_b = tb;
    g_.ops.push_back(o);
  }

  void solve(int step, std::string name, int a, int out) {
    OpNode o = op(OpCode::kSolve, step, std::move(name), {a}, out);
    o.m = o.n = o.k = g_.C;
    g_.ops.push_back(o);
  }

  Graph build(const GraphOptions& opt) {
    const int64_t C = g_.C, K = g_.K, V = g_.V, w = w_;
    const bool kda = g_.kind == Kind::kKda;
    using X = Value;
    using Op = OpCode;
    const int q = t(X::kQ, C, K), k = t(X::kK, C, K), v = t(X::kV, C, V), gate = t(X::kGate, C, w), beta = t(X::kBeta, C, 1);
    const int s = t(X::kS, K, V);
    g_.state_in = s;
    // #1 gates: chunk cumsum and the decay factors.
    const int G = t(X::kG, C, w), eG = t(X::kEG, C, w), eGl = t(X::kEGl, C, w), eGlast = t(X::kEGlast, 1, w);
    vec(Op::kCumsum, 1, "G = cumsum(g)", {gate}, G, 1, true);
    vec(Op::kExpG, 1, "eG = exp(G)", {G}, eG, 1, false);
    vec(Op::kExpGl, 1, "eGl = exp(G_last - G)", {G}, eGl, 2, true);
    vec(Op::kExpGlast, 1, "eGlast = exp(G_last)", {G}, eGlast, 1, false);
    // Score operands. GDN: one decay mask M_ij = exp(G_i - G_j). KDA: the decay moves inside the dot
    // products: K and Q scaled by exp(+-(G - G_ref)) per channel (the reference-row split).
    int kl = k, kr = k, ql = q, M = -1;
    if (kda) {
      kl = t(X::kKp, C, K);
      kr = t(X::kKn, C, K);
      ql = t(X::kQp, C, K);
      vec(Op::kKp, 1, "Kp = K o exp(G - G_ref)", {k, G}, kl, 3, false);
      vec(Op::kKn, 1, "Kn = K o exp(G_ref - G)", {k, G}, kr, 3, false);
      vec(Op::kQp, 1, "Qp = Q o exp(G - G_ref)", {q, G}, ql, 3, false);
    } else {
      M = t(X::kM, C, C);
      vec(Op::kMask, 1, "M = exp(G_i - G_j), i >= j", {G}, M, 2, true);
    }
    const int KKt = t(X::kKKt, C, C), A = t(X::kA, C, C), T = t(X::kT, C, C);
    const int QKt = t(X::kQKt, C, C), P = t(X::kP, C, C), PV = t(X::kPV, C, V), O = t(X::kO, C, V);
    const int Qs = t(X::kQs, C, K), QS = t(X::kQS, C, V), Vn = t(X::kVn, C, V);
    const int Kd = t(X::kKd, C, K), KtV = t(X::kKtV, K, V), Snew = t(X::kSnew, K, V);
    g_.state_out = Snew;
    const std::vector<int> mask_in = kda ? std::vector<int>{KKt, beta} : std::vector<int>{KKt, M, beta};
    const std::vector<int> p_in = kda ? std::vector<int>{QKt} : std::vector<int>{QKt, M};
    auto scores_A = [&] {
      gemm(Op::kKKt, 2, kda ? "KKt = Kp Kn^T" : "KKt = K K^T", kl, kr, KKt, false, true);
      vec(Op::kA, 2, kda ? "A = tril(beta o KKt)" : "A = tril(beta o M o KKt)", mask_in, A, kda ? 2 : 3, true);
    };
    auto scores_P = [&] {
      gemm(Op::kQKt, 6, kda ? "QKt = Qp Kn^T" : "QKt = Q K^T", ql, kr, QKt, false, true);
      vec(Op::kP, 6, kda ? "P = scale tril(QKt)" : "P = scale tril(M o QKt)", p_in, P, kda ? 1 : 2, true);
    };
    auto output = [&] {
      vec(Op::kQs, 6, "Qs = scale diag(eG) Q", {q, eG}, Qs, 2, !kda);
      gemm(Op::kQS, 6, "QS = Qs S", Qs, s, QS, false, false);
    };
    auto finish_output = [&] {
      gemm(Op::kPV, 6, "PV = P V'", P, Vn, PV, false, false);
      vec(Op::kO, 6, "O = QS + PV", {QS, PV}, O, 1, false);
    };
    auto update = [&] {
      vec(Op::kKd, 5, "Kd = diag(eGl) K", {k, eGl}, Kd, 1, !kda);
      gemm(Op::kKtV, 5, "KtV = Kd^T V'", Kd, Vn, KtV, true, false);
      vec(Op::kUpdate, 5, "S' = diag(eGlast) S + KtV", {s, eGlast, KtV}, Snew, 2, !kda);
    };
    if (opt.gemm_first) {
      // Shared-input GEMMs first (K S, Q S, K K^T, Q K^T), then the inverse, then
      // V' = T diag(beta) (V - diag(exp G) K S): T factored out of W, so W is never formed.
      const int Ke = t(X::kKe, C, K), KS = t(X::kKS, C, V), R = t(X::kR, C, V);
      vec(Op::kKe, 4, "Ke = diag(eG) K", {k, eG}, Ke, 1, !kda);
      gemm(Op::kKS, 5, "KS = Ke S", Ke, s, KS, false, false);
      output();
      gemm(Op::kKKt, 2, kda ? "KKt = Kp Kn^T" : "KKt = K K^T", kl, kr, KKt, false, true);
      scores_P();
      vec(Op::kA, 2, kda ? "A = tril(beta o KKt)" : "A = tril(beta o M o KKt)", mask_in, A, kda ? 2 : 3, true);
      solve(3, "T = (I + A)^-1", A, T);
      vec(Op::kR, 4, "R = diag(beta) (V - KS)", {v, KS, beta}, R, 2, true);
      gemm(Op::kVnFromTR, 4, "V' = T R", T, R, Vn, false, false);
      if (opt.chunk_first) {
        finish_output();
        update();
      } else {
        update();
        finish_output();
      }
    } else {
      // FLA's order: #2 A, #3 T, #4 W = T diag(beta eG) K and U = T diag(beta) V, #5 V' = U - W S
      // (then the update unless chunk-first), #6 O.
      const int Kb = t(X::kKb, C, K), W = t(X::kW, C, K), Vb = t(X::kVb, C, V), U = t(X::kU, C, V), WS = t(X::kWS, C, V);
      scores_A();
      solve(3, "T = (I + A)^-1", A, T);
      vec(Op::kKb, 4, "Kb = diag(beta eG) K", {k, beta, eG}, Kb, 2, !kda);
      gemm(Op::kW, 4, "W = T Kb", T, Kb, W, false, false);
      vec(Op::kVb, 4, "Vb = diag(beta) V", {v, beta}, Vb, 1, true);
      gemm(Op::kU, 4, "U = T Vb", T, Vb, U, false, false);
      gemm(Op::kWS, 5, "WS = W S", W, s, WS, false, false);
      vec(Op::kVnFromUWS, 5, "V' = U - WS", {U, WS}, Vn, 1, false);
      if (!opt.chunk_first) update();
      output();
      scores_P();
      finish_output();
      if (opt.chunk_first) update();
    }
    if (opt.kernels == KernelSplit::kFla || opt.kernels == KernelSplit::kFlashQla) {
      // FLA's kernels (fla/ops/gated_delta_rule/chunk.py): chunk_local_cumsum (G), chunk_scaled_dot_kkt +
      // solve_tril (A, T), recompute_w_u (W, U), chunk_gated_delta_rule_fwd_h (#5), chunk_fwd_o (#6);
      // FlashQLA's keeps the cumsum and kkt + solve kernels and fuses the rest by segment, its warm-ups
      // running W, U and the state only (#4, #5 | #6). The decay factors and KDA's scaled operands of #1 are
      // computed where they are first read, as those kernels recompute them from G.
      const bool fla = opt.kernels == KernelSplit::kFla;
      auto by_step = [&](int step) {
        if (step <= 3) return 1;
        if (step == 4) return 2;
        if (step == 5) return fla ? 3 : 2;
        return fla ? 4 : 3;
      };
      for (OpNode& o : g_.ops) o.kernel = o.code == OpCode::kCumsum ? 0 : by_step(o.step);
      for (OpNode& o : g_.ops) {
        if (o.step != 1 || o.code == OpCode::kCumsum) continue;
        int first = std::numeric_limits<int>::max();
        for (int c : g_.consumers(o.outputs[0])) first = std::min(first, g_.ops[c].kernel);
        if (first != std::numeric_limits<int>::max()) o.kernel = first;
      }
    } else if (opt.kernels == KernelSplit::kNative) {
      // One launch per DESIGN step: #1 .. #6.
      for (OpNode& o : g_.ops) o.kernel = o.step - 1;
    }
    return std::move(g_);
  }

 private:
  Graph g_;
  int64_t w_ = 1;
};

}  // namespace

Graph build_chunk_graph(Kind kind, int64_t C, int64_t K, int64_t V, const GraphOptions& opt) {
  return Builder(kind, C, K, V).build(opt);
}

namespace {

// The operator's operands and result against its code's signature for the graph's kind.
Status check_signature(const Graph& g, const OpNode& o) {
  const Signature& sig = signature(o.code);
  const std::vector<Value>& want = g.kind == Kind::kKda ? sig.kda : sig.gdn;
  const std::string at = "op '" + o.name + "' (" + sig.name + ")";
  if (want.empty()) return InvalidArgument(at + " is not an operator of " + kind_name(g.kind));
  if (o.kind != sig.kind) return InvalidArgument(at + ": wrong kind of operator for its code");
  if (o.outputs.size() != 1 || g.tensors[o.outputs[0]].value != sig.out) {
    return InvalidArgument(at + ": must produce exactly '" + value_name(sig.out) + "'");
  }
  std::string expect;
  for (Value v : want) expect += std::string(expect.empty() ? "" : ", ") + value_name(v);
  if (o.inputs.size() != want.size()) {
    return InvalidArgument(at + ": reads " + std::to_string(o.inputs.size()) + " operands, its signature is (" + expect + ")");
  }
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (g.tensors[o.inputs[i]].value != want[i]) {
      return InvalidArgument(at + ": operand " + std::to_string(i) + " is '" + g.tensors[o.inputs[i]].name +
                             "', its signature is (" + expect + ")");
    }
  }
  return Status::Ok();
}

}  // namespace

Status check_chunk_graph(const Graph& g) {
  const int nt = static_cast<int>(g.tensors.size());
  for (const OpNode& o : g.ops) {
    for (const std::vector<int>* list : {&o.inputs, &o.outputs}) {
      for (int t : *list) {
        if (t < 0 || t >= nt) return InvalidArgument("op '" + o.name + "' names tensor id " + std::to_string(t));
      }
    }
  }
  std::vector<bool> seen(static_cast<std::size_t>(Value::kCount), false);
  for (const TensorNode& t : g.tensors) {
    if (t.value == Value::kCount) return InvalidArgument("tensor '" + t.name + "' is not a value of the chunk algebra");
    if (seen[static_cast<std::size_t>(t.value)]) return InvalidArgument("tensor '" + t.name + "' appears twice");
    seen[static_cast<std::size_t>(t.value)] = true;
    if (t.role != role_of(t.value)) return InvalidArgument("tensor '" + t.name + "' has the wrong role");
  }
  // Signatures first: a swapped operand is named as such, not as the unread tensor it leaves behind.
  for (const OpNode& o : g.ops) HANPU_RETURN_IF_ERROR(check_signature(g, o));
  return check_graph(g);
}

Status check_graph(const Graph& g) {
  const int nt = static_cast<int>(g.tensors.size());
  std::vector<int> produced(nt, -1);
  for (int i = 0; i < static_cast<int>(g.ops.size()); ++i) {
    const OpNode& o = g.ops[i];
    for (int t : o.inputs) {
      if (t < 0 || t >= nt) return InvalidArgument("op '" + o.name + "' reads tensor id " + std::to_string(t));
      const Role r = g.tensors[t].role;
      if (r != Role::kInput && r != Role::kStateIn && produced[t] < 0) {
        return InvalidArgument("op '" + o.name + "' reads '" + g.tensors[t].name + "' before it is produced");
      }
    }
    for (int t : o.outputs) {
      if (t < 0 || t >= nt) return InvalidArgument("op '" + o.name + "' writes tensor id " + std::to_string(t));
      const Role r = g.tensors[t].role;
      if (r == Role::kInput || r == Role::kStateIn) {
        return InvalidArgument("op '" + o.name + "' overwrites the input '" + g.tensors[t].name + "'");
      }
      if (produced[t] >= 0) {
        return InvalidArgument("'" + g.tensors[t].name + "' is produced twice (ops '" + g.ops[produced[t]].name +
                               "' and '" + o.name + "')");
      }
      produced[t] = i;
    }
  }
  for (int t = 0; t < nt; ++t) {
    const Role r = g.tensors[t].role;
    if ((r == Role::kOutput || r == Role::kStateOut || r == Role::kIntermediate) && produced[t] < 0) {
      return InvalidArgument("'" + g.tensors[t].name + "' is never produced");
    }
    if (r == Role::kIntermediate && g.consumers(t).empty()) {
      return InvalidArgument("intermediate '" + g.tensors[t].name + "' is never read");
    }
  }
  if (g.state_in < 0 || g.state_out < 0 || g.tensors[g.state_in].rows != g.tensors[g.state_out].rows ||
      g.tensors[g.state_in].cols != g.tensors[g.state_out].cols) {
    return InvalidArgument("the state edge S -> S' is missing or changes shape");
  }
  return Status::Ok();
}

}  // namespace hanpu::plan
