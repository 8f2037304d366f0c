#include "plan/graph.h"

#include <algorithm>
#include <map>

namespace hanpu::plan {

const char* engine_name(Engine e) { return e == Engine::kMatrix ? "matrix" : "vector"; }
const char* layout_name(Layout l) { return l == Layout::kDense ? "dense" : "blocked"; }

double OpNode::macs() const {
  if (kind == OpKind::kGemm) return static_cast<double>(m) * n * k;
  if (kind == OpKind::kSolve) return static_cast<double>(m) * (m - 1) * (m - 2) / 6.0;
  return 0;
}

int Graph::add_tensor(std::string name, int64_t rows, int64_t cols, Role role) {
  tensors.push_back({std::move(name), rows, cols, 4, role});
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

  int in(const char* name, int64_t r, int64_t c) { return g_.add_tensor(name, r, c, Role::kInput); }
  int t(const char* name, int64_t r, int64_t c) { return g_.add_tensor(name, r, c); }

  void vec(int step, std::string name, std::vector<int> ins, int out, double ops_per_elem, bool row_wise) {
    OpNode o;
    o.name = std::move(name);
    o.kind = OpKind::kVector;
    o.engine = Engine::kVector;
    o.step = step;
    o.inputs = std::move(ins);
    o.outputs = {out};
    o.vector_ops = ops_per_elem * static_cast<double>(g_.tensors[out].rows * g_.tensors[out].cols);
    o.row_wise = row_wise;
    g_.ops.push_back(o);
  }

  void gemm(int step, std::string name, int a, int b, int out, bool ta, bool tb) {
    OpNode o;
    o.name = std::move(name);
    o.kind = OpKind::kGemm;
    o.engine = Engine::kMatrix;
    o.step = step;
    o.inputs = {a, b};
    o.outputs = {out};
    o.m = g_.tensors[out].rows;
    o.n = g_.tensors[out].cols;
    o.k = ta ? g_.tensors[a].rows : g_.tensors[a].cols;
    o.trans_a = ta;
    o.trans_b = tb;
    g_.ops.push_back(o);
  }

  void solve(int step, std::string name, int a, int out) {
    OpNode o;
    o.name = std::move(name);
    o.kind = OpKind::kSolve;
    o.engine = Engine::kMatrix;
    o.step = step;
    o.inputs = {a};
    o.outputs = {out};
    o.m = o.n = o.k = g_.C;
    g_.ops.push_back(o);
  }

  Graph build(const GraphOptions& opt) {
    const int64_t C = g_.C, K = g_.K, V = g_.V, w = w_;
    const bool kda = g_.kind == Kind::kKda;
    const int q = in("Q", C, K), k = in("K", C, K), v = in("V", C, V), gate = in("g", C, w), beta = in("beta", C, 1);
    const int s = g_.add_tensor("S", K, V, Role::kStateIn);
    g_.state_in = s;
    // #1 gates: chunk cumsum and the decay factors.
    const int G = t("G", C, w), eG = t("eG", C, w), eGl = t("eGl", C, w), eGlast = t("eGlast", 1, w);
    vec(1, "G = cumsum(g)", {gate}, G, 1, true);
    vec(1, "eG = exp(G)", {G}, eG, 1, false);
    vec(1, "eGl = exp(G_last - G)", {G}, eGl, 2, true);
    vec(1, "eGlast = exp(G_last)", {G}, eGlast, 1, false);
    // Score operands. GDN: one decay mask M_ij = exp(G_i - G_j). KDA: the decay moves inside the dot
    // products: K and Q scaled by exp(+-(G - G_ref)) per channel (the reference-row split).
    int kl = k, kr = k, ql = q, M = -1;
    if (kda) {
      kl = t("Kp", C, K);
      kr = t("Kn", C, K);
      ql = t("Qp", C, K);
      vec(1, "Kp = K o exp(G - G_ref)", {k, G}, kl, 3, false);
      vec(1, "Kn = K o exp(G_ref - G)", {k, G}, kr, 3, false);
      vec(1, "Qp = Q o exp(G - G_ref)", {q, G}, ql, 3, false);
    } else {
      M = t("M", C, C);
      vec(1, "M = exp(G_i - G_j), i >= j", {G}, M, 2, true);
    }
    const int KKt = t("KKt", C, C), A = t("A", C, C), T = t("T", C, C);
    const int QKt = t("QKt", C, C), P = t("P", C, C), PV = t("PV", C, V), O = g_.add_tensor("O", C, V, Role::kOutput);
    const int Qs = t("Qs", C, K), QS = t("QS", C, V), Vn = t("V'", C, V);
    const int Kd = t("Kd", C, K), KtV = t("KtV", K, V), Snew = g_.add_tensor("S'", K, V, Role::kStateOut);
    g_.state_out = Snew;
    const std::vector<int> mask_in = kda ? std::vector<int>{KKt, beta} : std::vector<int>{KKt, M, beta};
    const std::vector<int> p_in = kda ? std::vector<int>{QKt} : std::vector<int>{QKt, M};
    auto scores_A = [&] {
      gemm(2, kda ? "KKt = Kp Kn^T" : "KKt = K K^T", kl, kr, KKt, false, true);
      vec(2, kda ? "A = -tril(beta o KKt)" : "A = -tril(beta o M o KKt)", mask_in, A, kda ? 2 : 3, true);
    };
    auto scores_P = [&] {
      gemm(6, kda ? "QKt = Qp Kn^T" : "QKt = Q K^T", ql, kr, QKt, false, true);
      vec(6, kda ? "P = scale tril(QKt)" : "P = scale tril(M o QKt)", p_in, P, kda ? 1 : 2, true);
    };
    auto output = [&] {
      vec(6, "Qs = scale diag(eG) Q", {q, eG}, Qs, 2, !kda);
      gemm(6, "QS = Qs S", Qs, s, QS, false, false);
    };
    auto finish_output = [&] {
      gemm(6, "PV = P V'", P, Vn, PV, false, false);
      vec(6, "O = QS + PV", {QS, PV}, O, 1, false);
    };
    auto update = [&] {
      vec(5, "Kd = diag(eGl) K", {k, eGl}, Kd, 1, !kda);
      gemm(5, "KtV = Kd^T V'", Kd, Vn, KtV, true, false);
      vec(5, "S' = diag(eGlast) S + KtV", {s, eGlast, KtV}, Snew, 2, !kda);
    };
    if (opt.gemm_first) {
      // Shared-input GEMMs first (K S, Q S, K K^T, Q K^T), then the inverse, then
      // V' = T diag(beta) (V - diag(exp G) K S): T factored out of W, so W is never formed.
      const int Ke = t("Ke", C, K), KS = t("KS", C, V), R = t("R", C, V);
      vec(4, "Ke = diag(eG) K", {k, eG}, Ke, 1, !kda);
      gemm(5, "KS = Ke S", Ke, s, KS, false, false);
      output();
      gemm(2, kda ? "KKt = Kp Kn^T" : "KKt = K K^T", kl, kr, KKt, false, true);
      scores_P();
      vec(2, kda ? "A = -tril(beta o KKt)" : "A = -tril(beta o M o KKt)", mask_in, A, kda ? 2 : 3, true);
      solve(3, "T = (I - A)^-1", A, T);
      vec(4, "R = diag(beta) (V - KS)", {v, KS, beta}, R, 2, true);
      gemm(4, "V' = T R", T, R, Vn, false, false);
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
      const int Kb = t("Kb", C, K), W = t("W", C, K), Vb = t("Vb", C, V), U = t("U", C, V), WS = t("WS", C, V);
      scores_A();
      solve(3, "T = (I - A)^-1", A, T);
      vec(4, "Kb = diag(beta eG) K", {k, beta, eG}, Kb, 2, !kda);
      gemm(4, "W = T Kb", T, Kb, W, false, false);
      vec(4, "Vb = diag(beta) V", {v, beta}, Vb, 1, true);
      gemm(4, "U = T Vb", T, Vb, U, false, false);
      gemm(5, "WS = W S", W, s, WS, false, false);
      vec(5, "V' = U - WS", {U, WS}, Vn, 1, false);
      if (!opt.chunk_first) update();
      output();
      scores_P();
      finish_output();
      if (opt.chunk_first) update();
    }
    if (opt.kernels == "fla") {
      // FLA's launches: #1-#4 (and the score GEMMs), #5 (state), #6 (output).
      for (OpNode& o : g_.ops) o.kernel = o.step <= 4 ? 0 : o.step == 5 ? 1 : 2;
    } else if (opt.kernels == "native") {
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
