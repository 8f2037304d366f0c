#include "plan/plan.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

namespace hanpu::plan {

using nlohmann::json;

namespace {

const char* kSchema = "hanpu-plan/1";

const char* role_name(Role r) {
  switch (r) {
    case Role::kInput: return "input";
    case Role::kIntermediate: return "intermediate";
    case Role::kStateIn: return "state_in";
    case Role::kStateOut: return "state_out";
    case Role::kOutput: return "output";
  }
  return "?";
}

const char* op_kind_name(OpKind k) {
  return k == OpKind::kGemm ? "gemm" : k == OpKind::kSolve ? "solve" : "vector";
}

}  // namespace

Status make_plan(Kind kind, const Device& d, const PlanOptions& opt, Plan* out) {
  if (opt.C != 16 && opt.C != 32 && opt.C != 64) {
    return InvalidArgument("chunk size must be 16, 32 or 64, got " + std::to_string(opt.C));
  }
  if (opt.K < 1 || opt.K > 256) return InvalidArgument("k must be in 1..256, got " + std::to_string(opt.K));
  if (opt.V < 1 || opt.V > 256) return InvalidArgument("v must be in 1..256, got " + std::to_string(opt.V));
  Plan p;
  p.kind = kind;
  p.device = d.name;
  p.device_file = d.origin;
  p.opt = opt;
  p.clock_ghz = d.clock_ghz;
  GraphOptions go;
  go.chunk_first = opt.reorder;
  go.gemm_first = opt.gemm_first;
  p.graph = build_chunk_graph(kind, opt.C, opt.K, opt.V, go);
  HANPU_RETURN_IF_ERROR(check_graph(p.graph));
  GraphOptions fla;
  fla.chunk_first = false;
  fla.gemm_first = false;
  p.fla_order_macs = build_chunk_graph(kind, opt.C, opt.K, opt.V, fla).matrix_macs();
  const DeviceCostModel cm(d);
  p.layouts = opt.layout_plan ? plan_layouts(p.graph, cm) : fixed_layouts(p.graph, cm);
  p.lifetimes = analyse_lifetimes(p.graph, d);
  *out = std::move(p);
  return Status::Ok();
}

json plan_to_json(const Plan& p) {
  const Graph& g = p.graph;
  json j;
  j["schema"] = kSchema;
  j["kind"] = kind_name(p.kind);
  j["device"] = p.device;
  j["device_file"] = p.device_file;
  j["clock_ghz"] = p.clock_ghz;
  j["chunk_size"] = p.opt.C;
  j["k"] = p.opt.K;
  j["v"] = p.opt.V;
  j["passes"] = {{"reorder", p.opt.reorder}, {"gemm_first", p.opt.gemm_first}, {"layout_plan", p.opt.layout_plan}};
  json tensors = json::array();
  for (const TensorNode& t : g.tensors) {
    tensors.push_back({{"name", t.name}, {"rows", t.rows}, {"cols", t.cols}, {"role", role_name(t.role)}});
  }
  j["tensors"] = tensors;
  json steps = json::array();
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const OpNode& o = g.ops[i];
    json s = {{"op", o.name}, {"kind", op_kind_name(o.kind)}, {"engine", engine_name(o.engine)}, {"paper_step", o.step},
              {"layout", layout_name(p.layouts.op_layout[i])}, {"kernel", o.kernel}};
    json ins = json::array(), outs = json::array();
    for (int t : o.inputs) ins.push_back(g.tensors[t].name);
    for (int t : o.outputs) outs.push_back(g.tensors[t].name);
    s["inputs"] = ins;
    s["outputs"] = outs;
    if (o.kind == OpKind::kVector) {
      s["vector_ops"] = o.vector_ops;
      s["row_wise"] = o.row_wise;
    } else {
      s["m"] = o.m;
      s["n"] = o.n;
      s["k"] = o.k;
      s["trans_a"] = o.trans_a;
      s["trans_b"] = o.trans_b;
      s["macs"] = o.macs();
    }
    steps.push_back(s);
  }
  j["steps"] = steps;
  j["state_layout"] = layout_name(p.layouts.state_layout);
  json tr = json::array();
  for (const Transform& t : p.layouts.transforms) {
    tr.push_back({{"tensor", g.tensors[t.tensor].name}, {"from", layout_name(t.from)}, {"to", layout_name(t.to)},
                  {"before_step", t.before_op < 0 ? json(nullptr) : json(t.before_op)}, {"cycles", t.cost}});
  }
  j["transforms"] = tr;
  const double macs = g.matrix_macs();
  j["macs_per_chunk"] = {{"matrix", macs}, {"fla_order", p.fla_order_macs},
                         {"reduction", p.fla_order_macs > 0 ? 1 - macs / p.fla_order_macs : 0.0},
                         {"rule", "GEMM m*n*k; unit lower-triangular inverse C(C-1)(C-2)/6; vector work not counted"}};
  json peaks = json::object();
  for (const auto& [m, b] : p.lifetimes.peak_bytes) peaks[m] = b;
  j["peak_bytes"] = peaks;
  j["state_in_place"] = p.lifetimes.state_in_place;
  j["materialised_traffic_bytes"] = p.lifetimes.materialised_traffic_bytes;
  j["estimated_cost"] = {{"cycles_per_chunk", p.layouts.cost},
                         {"us_per_chunk", p.layouts.cost / (p.clock_ghz * 1e3)},
                         {"dp_states", p.layouts.dp_states}};
  return j;
}

namespace {

// Field access with paths for error messages; the first error sticks.
struct Checker {
  Status st;
  bool ok() const { return st.ok(); }
  void fail(const std::string& path, const std::string& what) {
    if (st.ok()) st = InvalidArgument(path + ": " + what);
  }
  const json* get(const json& j, const std::string& path, const char* key) {
    if (!ok()) return nullptr;
    if (!j.is_object() || !j.contains(key)) {
      fail(path.empty() ? key : path + "." + key, "missing");
      return nullptr;
    }
    return &j.at(key);
  }
  // An array field (empty when missing or not an array, after recording the error).
  const json& array(const json& j, const std::string& path, const char* key, bool non_empty = false) {
    static const json kEmpty = json::array();
    const json* v = get(j, path, key);
    if (!v) return kEmpty;
    if (!v->is_array() || (non_empty && v->empty())) {
      fail(path.empty() ? key : path + "." + key, non_empty ? "expected a non-empty array" : "expected an array");
      return kEmpty;
    }
    return *v;
  }
  std::string str(const json& j, const std::string& path, const char* key) {
    const json* v = get(j, path, key);
    if (!v) return "";
    if (!v->is_string()) fail(path.empty() ? key : path + "." + key, "expected a string");
    return ok() ? v->get<std::string>() : "";
  }
  double num(const json& j, const std::string& path, const char* key) {
    const json* v = get(j, path, key);
    if (!v) return 0;
    if (!v->is_number()) fail(path.empty() ? key : path + "." + key, "expected a number");
    return ok() ? v->get<double>() : 0;
  }
  int64_t integer(const json& j, const std::string& path, const char* key, int64_t lo, int64_t hi) {
    const json* v = get(j, path, key);
    if (!v) return 0;
    const std::string p = path.empty() ? key : path + "." + key;
    if (!v->is_number_integer()) {
      fail(p, "expected an integer");
      return 0;
    }
    const int64_t x = v->get<int64_t>();
    if (x < lo || x > hi) fail(p, "expected " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " + std::to_string(x));
    return x;
  }
  bool flag(const json& j, const std::string& path, const char* key) {
    const json* v = get(j, path, key);
    if (!v) return false;
    if (!v->is_boolean()) fail(path.empty() ? key : path + "." + key, "expected true or false");
    return ok() && v->get<bool>();
  }
  Layout layout(const json& j, const std::string& path, const char* key) {
    const std::string s = str(j, path, key);
    if (ok() && s != "dense" && s != "blocked") fail(path + "." + key, "expected \"dense\" or \"blocked\"");
    return s == "blocked" ? Layout::kBlocked : Layout::kDense;
  }
};

}  // namespace

Status plan_from_json(const std::string& text, Plan* out) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("plan is not JSON: ") + e.what());
  }
  Checker c;
  Plan p;
  if (c.str(j, "", "schema") != kSchema && c.ok()) c.fail("schema", std::string("expected \"") + kSchema + "\"");
  const std::string kind = c.str(j, "", "kind");
  if (c.ok() && kind != "gdn" && kind != "kda") c.fail("kind", "expected \"gdn\" or \"kda\"");
  p.kind = kind == "kda" ? Kind::kKda : Kind::kGdn;
  p.device = c.str(j, "", "device");
  p.device_file = c.str(j, "", "device_file");
  p.clock_ghz = c.num(j, "", "clock_ghz");
  if (c.ok() && !(p.clock_ghz > 0)) c.fail("clock_ghz", "expected a positive number");
  p.opt.C = c.integer(j, "", "chunk_size", 16, 64);
  p.opt.K = c.integer(j, "", "k", 1, 256);
  p.opt.V = c.integer(j, "", "v", 1, 256);
  if (const json* ps = c.get(j, "", "passes")) {
    p.opt.reorder = c.flag(*ps, "passes", "reorder");
    p.opt.gemm_first = c.flag(*ps, "passes", "gemm_first");
    p.opt.layout_plan = c.flag(*ps, "passes", "layout_plan");
  }
  Graph& g = p.graph;
  g.kind = p.kind;
  g.C = p.opt.C;
  g.K = p.opt.K;
  g.V = p.opt.V;
  std::map<std::string, int> ids;
  const json& tensors = c.array(j, "", "tensors");
  for (std::size_t i = 0; c.ok() && i < tensors.size(); ++i) {
    const std::string path = "tensors[" + std::to_string(i) + "]";
    const json& t = tensors[i];
    TensorNode n;
    n.name = c.str(t, path, "name");
    n.rows = c.integer(t, path, "rows", 1, 1 << 20);
    n.cols = c.integer(t, path, "cols", 1, 1 << 20);
    const std::string role = c.str(t, path, "role");
    const std::map<std::string, Role> roles = {{"input", Role::kInput}, {"intermediate", Role::kIntermediate},
                                               {"state_in", Role::kStateIn}, {"state_out", Role::kStateOut},
                                               {"output", Role::kOutput}};
    if (c.ok() && !roles.count(role)) c.fail(path + ".role", "unknown role '" + role + "'");
    if (c.ok() && ids.count(n.name)) c.fail(path + ".name", "duplicate tensor '" + n.name + "'");
    if (!c.ok()) break;
    n.role = roles.at(role);
    ids[n.name] = static_cast<int>(g.tensors.size());
    if (n.role == Role::kStateIn) g.state_in = ids[n.name];
    if (n.role == Role::kStateOut) g.state_out = ids[n.name];
    g.tensors.push_back(n);
  }
  const json& steps = c.array(j, "", "steps", true);
  for (std::size_t i = 0; c.ok() && i < steps.size(); ++i) {
    const std::string path = "steps[" + std::to_string(i) + "]";
    const json& s = steps[i];
    OpNode o;
    o.name = c.str(s, path, "op");
    const std::string k = c.str(s, path, "kind");
    if (c.ok() && k != "gemm" && k != "solve" && k != "vector") c.fail(path + ".kind", "expected gemm, solve or vector");
    o.kind = k == "gemm" ? OpKind::kGemm : k == "solve" ? OpKind::kSolve : OpKind::kVector;
    const std::string e = c.str(s, path, "engine");
    const std::string want = o.kind == OpKind::kVector ? "vector" : "matrix";
    if (c.ok() && e != want) c.fail(path + ".engine", "a " + k + " step runs on the " + want + " engine, got '" + e + "'");
    o.engine = o.kind == OpKind::kVector ? Engine::kVector : Engine::kMatrix;
    o.step = static_cast<int>(c.integer(s, path, "paper_step", 1, 6));
    o.kernel = static_cast<int>(c.integer(s, path, "kernel", 0, 1000));
    p.layouts.op_layout.push_back(c.layout(s, path, "layout"));
    for (const char* key : {"inputs", "outputs"}) {
      const json& list = c.array(s, path, key);
      for (std::size_t q = 0; c.ok() && q < list.size(); ++q) {
        const std::string lp = path + "." + key + "[" + std::to_string(q) + "]";
        if (!list[q].is_string()) {
          c.fail(lp, "expected a tensor name");
          break;
        }
        const std::string name = list[q].get<std::string>();
        if (!ids.count(name)) {
          c.fail(lp, "unknown tensor '" + name + "'");
          break;
        }
        (std::string(key) == "inputs" ? o.inputs : o.outputs).push_back(ids[name]);
      }
    }
    if (o.kind == OpKind::kVector) {
      o.vector_ops = c.num(s, path, "vector_ops");
      o.row_wise = c.flag(s, path, "row_wise");
    } else {
      o.m = c.integer(s, path, "m", 1, 1 << 20);
      o.n = c.integer(s, path, "n", 1, 1 << 20);
      o.k = c.integer(s, path, "k", 1, 1 << 20);
      o.trans_a = c.flag(s, path, "trans_a");
      o.trans_b = c.flag(s, path, "trans_b");
    }
    g.ops.push_back(o);
  }
  if (c.ok()) {
    const Status gs = check_graph(g);
    if (!gs.ok()) c.fail("steps", gs.message());
  }
  p.layouts.state_layout = c.layout(j, "", "state_layout");
  const json& tr = c.array(j, "", "transforms");
  for (std::size_t i = 0; c.ok() && i < tr.size(); ++i) {
    const std::string path = "transforms[" + std::to_string(i) + "]";
    const json& t = tr[i];
    Transform x;
    const std::string name = c.str(t, path, "tensor");
    if (c.ok() && !ids.count(name)) c.fail(path + ".tensor", "unknown tensor '" + name + "'");
    if (!c.ok()) break;
    x.tensor = ids[name];
    x.from = c.layout(t, path, "from");
    x.to = c.layout(t, path, "to");
    if (c.ok() && x.from == x.to) c.fail(path, "a transform must change the layout");
    const json* b = c.get(t, path, "before_step");
    if (c.ok()) {
      if (b->is_null()) {
        x.before_op = -1;
      } else {
        x.before_op = static_cast<int>(c.integer(t, path, "before_step", 0, static_cast<int64_t>(g.ops.size()) - 1));
      }
    }
    x.cost = c.num(t, path, "cycles");
    p.layouts.transforms.push_back(x);
  }
  if (const json* m = c.get(j, "", "macs_per_chunk")) p.fla_order_macs = c.num(*m, "macs_per_chunk", "fla_order");
  if (const json* pk = c.get(j, "", "peak_bytes")) {
    if (c.ok() && !pk->is_object()) c.fail("peak_bytes", "expected an object keyed by memory name");
    for (auto it = pk->begin(); c.ok() && it != pk->end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0) {
        c.fail("peak_bytes." + it.key(), "expected a byte count");
      } else {
        p.lifetimes.peak_bytes[it.key()] = it.value().get<int64_t>();
      }
    }
  }
  p.lifetimes.state_in_place = c.flag(j, "", "state_in_place");
  p.lifetimes.materialised_traffic_bytes = c.integer(j, "", "materialised_traffic_bytes", 0, INT64_MAX);
  if (const json* ec = c.get(j, "", "estimated_cost")) {
    p.layouts.cost = c.num(*ec, "estimated_cost", "cycles_per_chunk");
    p.layouts.dp_states = c.integer(*ec, "estimated_cost", "dp_states", 0, INT64_MAX);
  }
  if (!c.ok()) return c.st;
  *out = std::move(p);
  return Status::Ok();
}

Status load_plan_file(const std::string& path, Plan* out) {
  std::ifstream f(path);
  if (!f) return NotFound("cannot read plan file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  const Status st = plan_from_json(ss.str(), out);
  return st.ok() ? st : InvalidArgument(path + ": " + st.message());
}

std::string plan_report(const Plan& p) {
  const Graph& g = p.graph;
  std::ostringstream os;
  char buf[256];
  os << "plan: " << kind_name(p.kind) << " chunk on " << p.device << ", C=" << p.opt.C << " K=" << p.opt.K
     << " V=" << p.opt.V << "; passes: reorder " << (p.opt.reorder ? "on" : "off") << ", gemm-first "
     << (p.opt.gemm_first ? "on" : "off") << ", layout plan " << (p.opt.layout_plan ? "on" : "off") << "\n";
  os << "device description: " << p.device_file << "\n";
  os << "  #  step  engine  layout   operation                          transforms before it\n";
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const OpNode& o = g.ops[i];
    std::string tr;
    for (const Transform& t : p.layouts.transforms) {
      if (t.before_op == static_cast<int>(i)) {
        tr += (tr.empty() ? "" : ", ") + g.tensors[t.tensor].name + " " + layout_name(t.from) + "->" + layout_name(t.to);
      }
    }
    std::snprintf(buf, sizeof buf, " %2zu  #%d    %-6s  %-7s  %-34s %s\n", i, o.step, engine_name(o.engine),
                  layout_name(p.layouts.op_layout[i]), o.name.c_str(), tr.c_str());
    os << buf;
  }
  for (const Transform& t : p.layouts.transforms) {
    if (t.before_op < 0) {
      os << "  at the chunk end: " << g.tensors[t.tensor].name << " " << layout_name(t.from) << "->"
         << layout_name(t.to) << "\n";
    }
  }
  os << "state layout: " << layout_name(p.layouts.state_layout) << "; state updated in place: "
     << (p.lifetimes.state_in_place ? "yes" : "no (old and new state co-reside)") << "\n";
  os << "peak live bytes:";
  for (const auto& [m, b] : p.lifetimes.peak_bytes) os << " " << m << " " << b;
  os << "\n";
  const double macs = g.matrix_macs();
  std::snprintf(buf, sizeof buf, "matrix MACs per chunk: %.0f (FLA order %.0f, %.1f%% fewer)\n", macs,
                p.fla_order_macs, p.fla_order_macs > 0 ? 100 * (1 - macs / p.fla_order_macs) : 0.0);
  os << buf;
  std::snprintf(buf, sizeof buf, "estimated cost: %.0f cycles per chunk (%.2f us at %.2f GHz), %zu transforms\n",
                p.layouts.cost, p.layouts.cost / (p.clock_ghz * 1e3), p.clock_ghz, p.layouts.transforms.size());
  os << buf;
  return os.str();
}

}  // namespace hanpu::plan
