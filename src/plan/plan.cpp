#include "plan/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/json_reader.h"

namespace hanpu::plan {

using nlohmann::json;

namespace {

const char* kSchema = "hanpu-plan/2";

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

double fla_order_macs(Kind kind, const PlanOptions& opt) {
  GraphOptions fla;
  fla.chunk_first = false;
  fla.gemm_first = false;
  return build_chunk_graph(kind, opt.C, opt.K, opt.V, fla).matrix_macs();
}

const char* split_name(KernelSplit k) {
  switch (k) {
    case KernelSplit::kFused: return "fused";
    case KernelSplit::kFla: return "fla";
    case KernelSplit::kFlashQla: return "flashqla";
    case KernelSplit::kNative: break;
  }
  return "native";
}

// The cost model a plan of `opt` is costed on: the bf16 unit's (the engine's row blocks) in bf16 precision,
// else the device's.
std::unique_ptr<CostModel> plan_cost_model(const Device& d, Kind kind, const PlanOptions& opt) {
  if (opt.bf16) return std::make_unique<Bf16CostModel>(d, kind, opt.row_block);
  return std::make_unique<DeviceCostModel>(d);
}

// The chunk's layouts: exact mode, the DP or the fixed layouts (the update's operand packed on request) on
// the device's cost model; bf16 mode, the packing choice on the bf16 unit's (the engine's row blocks).
LayoutPlan chunk_layouts(const Graph& g, const Device& d, const PlanOptions& opt) {
  if (opt.bf16) return packing_layouts(g, Bf16CostModel(d, g.kind, opt.row_block), opt.packing);
  const DeviceCostModel cm(d);
  if (opt.layout_plan) return plan_layouts(g, cm);
  LayoutPlan p = fixed_layouts(g, cm);
  if (!opt.packed_update) return p;
  std::vector<Layout> ls = p.op_layout;
  for (std::size_t i = 0; i < ls.size(); ++i) {
    if (g.ops[i].code == OpCode::kKtV) ls[i] = Layout::kBlocked;
  }
  return evaluate_plan(g, cm, ls, p.state_layout);
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
  go.kernels = opt.kernels;
  p.graph = build_chunk_graph(kind, opt.C, opt.K, opt.V, go);
  HANPU_RETURN_IF_ERROR(check_chunk_graph(p.graph));
  p.fla_order_macs = fla_order_macs(kind, opt);
  if (opt.bf16 && d.matrix_requires_blocked) {
    return InvalidArgument("precision bf16 plans a CPU's bf16 unit (plan/packing.h); device '" + d.name +
                           "' requires blocked matrix operands (an NPU: plan it in exact precision)");
  }
  p.layouts = chunk_layouts(p.graph, d, opt);
  if (!std::isfinite(p.layouts.cost)) {
    return InvalidArgument("no layout of the chunk's steps is allowed on device '" + d.name + "'");
  }
  p.lifetimes = analyse_lifetimes(p.graph, d);
  *out = std::move(p);
  return Status::Ok();
}

Status make_slice_plan(const Plan& whole, const Device& d, int64_t cols, Plan* out) {
  PlanOptions so = whole.opt;
  so.V = cols;
  return make_plan(whole.kind, d, so, out);
}

Status make_execution_plan(Kind kind, const Device& d, const std::string& strategy, const PlanOptions& po,
                           const MapRequest& req, Plan* out) {
  const StrategyInfo* info = find_strategy(strategy);
  if (!info) return unknown_strategy(strategy, true);
  return make_execution_plan(kind, d, info->name, info->opt, po, req, out);
}

Status make_execution_plan(Kind kind, const Device& d, const std::string& name, const StrategyOptions& so,
                           const PlanOptions& po, const MapRequest& req, Plan* out) {
  PlanOptions co = po;
  const bool head_level = so.dataflow == Dataflow::kHeadLevel;
  // The baselines keep FLA's order and the fixed layouts; their kernels split the chunk graph.
  co.reorder = head_level && so.chunk_first;
  co.gemm_first = head_level && so.gemm_first;
  co.layout_plan = head_level && so.layout_plan;
  co.packed_update = head_level && po.packed_update;
  co.kernels = kernel_split(so.dataflow);
  Plan p;
  HANPU_RETURN_IF_ERROR(make_plan(kind, d, co, &p));
  if (req.shape.C != co.C) return InvalidArgument("the shape's chunk size differs from the plan's");
  if (req.shape.V != co.V) return InvalidArgument("the shape's V differs from the plan's");
  MapInputs in;
  in.head_cost = p.layouts.cost;
  in.segment_chunks = req.segment_chunks;
  in.chunk_parallel_fallback = req.chunk_parallel_fallback;
  const int64_t align = req.column_align > 0 ? req.column_align : d.block_cols;
  if (head_level && so.tail_split && req.shape.units() % req.shape.workers != 0) {
    const int64_t most = std::min<int64_t>(req.shape.workers, co.V / align);
    in.slice_cost.assign(static_cast<std::size_t>(std::max<int64_t>(most + 1, 0)), 0.0);
    for (int64_t s = 2; s <= most; ++s) {
      const int64_t w = slice_width(co.V, static_cast<int>(s), align);
      if ((co.V + w - 1) / w != s) continue;  // s slices of aligned width do not exist
      Plan sp;
      HANPU_RETURN_IF_ERROR(make_slice_plan(p, d, w, &sp));
      in.slice_cost[s] = sp.layouts.cost;
    }
  }
  HANPU_RETURN_IF_ERROR(map_work(so, req.shape, align, in, &p.mapping));
  p.has_mapping = true;
  p.strategy = name;
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
  j["passes"] = {{"reorder", p.opt.reorder}, {"gemm_first", p.opt.gemm_first}, {"layout_plan", p.opt.layout_plan},
                 {"packed_update", p.opt.packed_update}, {"bf16", p.opt.bf16}, {"packing", packing_name(p.opt.packing)}};
  j["kernels"] = split_name(p.opt.kernels);
  json tensors = json::array();
  for (const TensorNode& t : g.tensors) {
    tensors.push_back({{"name", t.name}, {"rows", t.rows}, {"cols", t.cols}, {"role", role_name(t.role)}});
  }
  j["tensors"] = tensors;
  json steps = json::array();
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const OpNode& o = g.ops[i];
    json s = {{"code", op_code_name(o.code)}, {"op", o.name}, {"kind", op_kind_name(o.kind)}, {"engine", engine_name(o.engine)}, {"paper_step", o.step},
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
  if (p.has_mapping) {
    j["strategy"] = p.strategy;
    j["mapping"] = mapping_to_json(p.mapping);
  }
  return j;
}

namespace {

Layout read_layout(const JsonReader& r, const char* key) {
  const std::string s = r.str(key);
  if (r.ok() && s != "dense" && s != "blocked") r.fail_at(key, "expected \"dense\" or \"blocked\"");
  return s == "blocked" ? Layout::kBlocked : Layout::kDense;
}

bool same(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)); }

// The graph's tensors and steps (structure only; derived numbers are recomputed by the caller).
void read_graph(const JsonReader& r, Plan& p, std::map<std::string, int>& ids) {
  Graph& g = p.graph;
  const json& tensors = r.array("tensors");
  for (std::size_t i = 0; r.ok() && i < tensors.size(); ++i) {
    const JsonReader t(tensors[i], "tensors[" + std::to_string(i) + "]", r);
    const std::string name = t.str("name");
    Value v;
    if (r.ok() && !parse_value(name, &v)) t.fail_at("name", "unknown tensor '" + name + "'");
    if (r.ok() && ids.count(name)) t.fail_at("name", "duplicate tensor '" + name + "'");
    const int64_t rows = t.integer("rows", 1, 1 << 20), cols = t.integer("cols", 1, 1 << 20);
    const std::string role = t.str("role");
    if (!r.ok()) break;
    const int id = g.add_tensor(v, rows, cols);
    if (role != role_name(g.tensors[id].role)) {
      t.fail_at("role", "'" + name + "' is " + role_name(g.tensors[id].role) + ", got '" + role + "'");
    }
    ids[name] = id;
    if (v == Value::kS) g.state_in = id;
    if (v == Value::kSnew) g.state_out = id;
  }
  const json& steps = r.array("steps", true);
  for (std::size_t i = 0; r.ok() && i < steps.size(); ++i) {
    const JsonReader s(steps[i], "steps[" + std::to_string(i) + "]", r);
    OpNode o;
    const std::string code = s.str("code");
    if (r.ok() && !parse_op_code(code, &o.code)) s.fail_at("code", "unknown operator code '" + code + "'");
    o.name = s.str("op");
    const std::string k = s.str("kind");
    if (r.ok() && k != "gemm" && k != "solve" && k != "vector") s.fail_at("kind", "expected gemm, solve or vector");
    o.kind = k == "gemm" ? OpKind::kGemm : k == "solve" ? OpKind::kSolve : OpKind::kVector;
    const std::string e = s.str("engine");
    const std::string want = o.kind == OpKind::kVector ? "vector" : "matrix";
    if (r.ok() && e != want) s.fail_at("engine", "a " + k + " step runs on the " + want + " engine, got '" + e + "'");
    o.engine = o.kind == OpKind::kVector ? Engine::kVector : Engine::kMatrix;
    o.step = static_cast<int>(s.integer("paper_step", 1, 6));
    o.kernel = static_cast<int>(s.integer("kernel", 0, 31));
    p.layouts.op_layout.push_back(read_layout(s, "layout"));
    for (const char* key : {"inputs", "outputs"}) {
      const json& list = s.array(key);
      for (std::size_t q = 0; r.ok() && q < list.size(); ++q) {
        const std::string lp = s.path_of(key) + "[" + std::to_string(q) + "]";
        if (!list[q].is_string() || !ids.count(list[q].get<std::string>())) {
          r.fail(lp, list[q].is_string() ? "unknown tensor '" + list[q].get<std::string>() + "'" : "expected a tensor name");
          break;
        }
        (std::string(key) == "inputs" ? o.inputs : o.outputs).push_back(ids[list[q].get<std::string>()]);
      }
    }
    if (o.kind == OpKind::kVector) {
      o.vector_ops = s.num("vector_ops");
      o.row_wise = s.flag("row_wise");
    } else {
      o.m = s.integer("m", 1, 1 << 20);
      o.n = s.integer("n", 1, 1 << 20);
      o.k = s.integer("k", 1, 1 << 20);
      o.trans_a = s.flag("trans_a");
      o.trans_b = s.flag("trans_b");
    }
    g.ops.push_back(o);
  }
}

// Stored derived fields against the recomputed plan `q`: the first disagreement, naming the field.
void check_derived(const JsonReader& r, const Plan& q) {
  auto differs = [&](const std::string& field, const std::string& stored, const std::string& now) {
    r.fail(field, "stored " + stored + ", the plan recomputes " + now);
  };
  if (!r.ok()) return;
  const json* peaks = r.get("peak_bytes");  // the document is untrusted: every field read through the reader
  if (peaks && !peaks->is_object()) r.fail_at("peak_bytes", "expected an object keyed by memory name");
  if (!r.ok()) return;
  for (auto it = peaks->begin(); r.ok() && it != peaks->end(); ++it) {
    const auto f = q.lifetimes.peak_bytes.find(it.key());
    const std::string now = f == q.lifetimes.peak_bytes.end() ? "no such memory" : std::to_string(f->second);
    if (!it.value().is_number_integer() || f == q.lifetimes.peak_bytes.end() || it.value().get<int64_t>() != f->second) {
      differs("peak_bytes." + it.key(), it.value().dump(), now);
    }
  }
  if (r.ok() && peaks->size() != q.lifetimes.peak_bytes.size()) {
    differs("peak_bytes", std::to_string(peaks->size()) + " memories", std::to_string(q.lifetimes.peak_bytes.size()));
  }
  const bool in_place = r.flag("state_in_place");
  if (r.ok() && in_place != q.lifetimes.state_in_place) {
    differs("state_in_place", in_place ? "true" : "false", q.lifetimes.state_in_place ? "true" : "false");
  }
  const int64_t mt = r.integer("materialised_traffic_bytes", 0, INT64_MAX);
  if (r.ok() && mt != q.lifetimes.materialised_traffic_bytes) {
    differs("materialised_traffic_bytes", std::to_string(mt), std::to_string(q.lifetimes.materialised_traffic_bytes));
  }
  const double cost = r.child("estimated_cost").num("cycles_per_chunk");
  if (r.ok() && !same(cost, q.layouts.cost)) {
    differs("estimated_cost.cycles_per_chunk", std::to_string(cost), std::to_string(q.layouts.cost));
  }
  const double fla = r.child("macs_per_chunk").num("fla_order");
  if (r.ok() && !same(fla, q.fla_order_macs)) differs("macs_per_chunk.fla_order", std::to_string(fla), std::to_string(q.fla_order_macs));
  const json& tr = r.array("transforms");
  if (r.ok() && tr.size() != q.layouts.transforms.size()) {
    differs("transforms", std::to_string(tr.size()) + " transforms", std::to_string(q.layouts.transforms.size()));
  }
  for (std::size_t i = 0; r.ok() && i < tr.size(); ++i) {
    const JsonReader t(tr[i], "transforms[" + std::to_string(i) + "]", r);
    const Transform& x = q.layouts.transforms[i];
    const json* b = t.get("before_step");
    const int before = b && b->is_number_integer() ? b->get<int>() : -1;
    if (r.ok() && (t.str("tensor") != q.graph.tensors[x.tensor].name || before != x.before_op || !same(t.num("cycles"), x.cost))) {
      differs(t.path(), tr[i].dump(), "a transform of '" + q.graph.tensors[x.tensor].name + "'");
    }
  }
}

}  // namespace

Status plan_from_json(const std::string& text, Plan* out) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("plan is not JSON: ") + e.what());
  }
  JsonReader r(j, "");
  const std::string schema = r.str("schema");
  if (r.ok() && schema == "hanpu-plan/1") {
    return InvalidArgument("schema: \"hanpu-plan/1\" plans have no mapping of the work and are no longer run; "
                           "make a hanpu-plan/2 plan with `hanpu plan --strategy NAME --device D --json FILE`");
  }
  if (r.ok() && schema != kSchema) r.fail("schema", std::string("expected \"") + kSchema + "\"");
  Plan p;
  const std::string kind = r.str("kind");
  if (r.ok() && kind != "gdn" && kind != "kda") r.fail("kind", "expected \"gdn\" or \"kda\"");
  p.kind = kind == "kda" ? Kind::kKda : Kind::kGdn;
  p.device = r.str("device");
  p.device_file = r.str("device_file");
  p.opt.C = r.integer("chunk_size", 16, 64);
  if (r.ok() && p.opt.C != 16 && p.opt.C != 32 && p.opt.C != 64) r.fail("chunk_size", "expected 16, 32 or 64");
  p.opt.K = r.integer("k", 1, 256);
  p.opt.V = r.integer("v", 1, 256);
  const JsonReader ps = r.child("passes");
  p.opt.reorder = ps.flag("reorder");
  p.opt.gemm_first = ps.flag("gemm_first");
  p.opt.layout_plan = ps.flag("layout_plan");
  p.opt.packed_update = ps.flag("packed_update");
  if (r.ok() && ps.raw().contains("bf16")) p.opt.bf16 = ps.flag("bf16");  // absent in plans older than the mode
  if (r.ok() && ps.raw().contains("packing")) {
    const std::string name = ps.str("packing");
    if (r.ok() && !parse_packing(name, &p.opt.packing)) r.fail("passes.packing", "expected planned, never-keep or pack-always");
  }
  const std::string split = r.str("kernels");
  if (r.ok() && split != "fused" && split != "fla" && split != "flashqla" && split != "native") {
    r.fail("kernels", "expected fused, fla, flashqla or native");
  }
  p.opt.kernels = split == "fla"        ? KernelSplit::kFla
                  : split == "flashqla" ? KernelSplit::kFlashQla
                  : split == "native"   ? KernelSplit::kNative
                                        : KernelSplit::kFused;
  Graph& g = p.graph;
  g.kind = p.kind;
  g.C = p.opt.C;
  g.K = p.opt.K;
  g.V = p.opt.V;
  std::map<std::string, int> ids;
  read_graph(r, p, ids);
  if (r.ok()) {
    const Status gs = check_chunk_graph(g);
    if (!gs.ok()) r.fail("steps", gs.message());
  }
  p.layouts.state_layout = read_layout(r, "state_layout");
  if (!r.ok()) return r.status();
  // Derived fields: recomputed from the structure on the plan's device, and refused where they disagree.
  Device d;
  const Status ds = load_device(std::filesystem::exists(p.device_file) ? p.device_file : p.device, &d);
  if (!ds.ok()) return InvalidArgument("device: " + ds.message());
  if (d.name != p.device) return InvalidArgument("device: the description at '" + p.device_file + "' is '" + d.name + "'");
  p.clock_ghz = d.clock_ghz;
  if (!p.opt.bf16 || p.opt.packing == Packing::kPlanned) {
    p.layouts = evaluate_plan(g, *plan_cost_model(d, g.kind, p.opt), p.layouts.op_layout, p.layouts.state_layout);
  } else {  // a fixed packing choice is its layouts: every product packs its own operand
    const LayoutPlan fixed = chunk_layouts(g, d, p.opt);
    if (fixed.op_layout != p.layouts.op_layout || fixed.state_layout != p.layouts.state_layout) {
      return InvalidArgument(std::string("steps: packing '") + packing_name(p.opt.packing) +
                             "' runs every step dense with a dense state");
    }
    p.layouts = fixed;
  }
  p.layouts.dp_states = r.child("estimated_cost").integer("dp_states", 0, INT64_MAX);  // the search's effort, as recorded
  if (!std::isfinite(p.layouts.cost)) return InvalidArgument("steps: a step's layout is not allowed on device '" + d.name + "'");
  p.lifetimes = analyse_lifetimes(g, d);
  p.fla_order_macs = fla_order_macs(p.kind, p.opt);
  if (!same(r.num("clock_ghz"), d.clock_ghz) && r.ok()) r.fail("clock_ghz", "differs from the device's");
  check_derived(r, p);
  if (!r.ok()) return r.status();
  if (j.contains("mapping")) {
    p.strategy = r.str("strategy");
    if (!r.ok()) return r.status();
    if (!find_strategy(p.strategy)) return unknown_strategy(p.strategy, true);
    HANPU_RETURN_IF_ERROR(mapping_from_json(j["mapping"], &p.mapping));
    if (p.mapping.shape.C != p.opt.C || p.mapping.shape.V != p.opt.V) {
      return InvalidArgument("mapping.shape: chunk size and v must be the plan's");
    }
    p.has_mapping = true;
  }
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
  if (p.opt.bf16) {
    os << "precision: bf16; packing " << packing_name(p.opt.packing)
       << " (blocked: the GEMM reads its right operand from a packed bf16 copy shared with later blocked readers; "
          "dense: it packs the operand itself)\n";
  }
  os << "device description: " << p.device_file << "\n";
  os << "  #  step  engine  layout   operation                          transforms before it\n";
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const OpNode& o = g.ops[i];
    std::string tr;
    for (const Transform& t : p.layouts.transforms) {
      if (t.before_op == static_cast<int>(i)) {
        tr += (tr.empty() ? "" : ", ") + g.tensors[t.tensor].name + " " + layout_name(t.from) + "->" + layout_name(t.to) +
              (t.cost <= 0 ? " (on the move)" : "");
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
  const auto explicit_transforms = std::count_if(p.layouts.transforms.begin(), p.layouts.transforms.end(),
                                                 [](const Transform& t) { return t.cost > 0; });
  std::snprintf(buf, sizeof buf,
                "estimated cost: %.0f cycles per chunk (%.2f us at %.2f GHz), %zu transforms (%lld explicit, the rest "
                "made by data movers on the way)\n",
                p.layouts.cost, p.layouts.cost / (p.clock_ghz * 1e3), p.clock_ghz, p.layouts.transforms.size(),
                static_cast<long long>(explicit_transforms));
  os << buf;
  if (p.has_mapping) {
    const Mapping& m = p.mapping;
    os << "strategy: " << p.strategy << "; mapping of " << m.shape.sequences() << " sequence(s) x " << m.shape.HV
       << " value heads (" << m.shape.total_chunks() << " chunks per value head) onto " << m.shape.workers << " workers:";
    const auto ranges = m.phase_ranges();
    for (std::size_t i = 0; i < m.phases.size(); ++i) {
      os << (i ? "," : "") << " " << (m.phases[i].sync == Sync::kBarrier ? "| " : "") << work_name(m.phases[i].work)
         << " (" << ranges[i].second - ranges[i].first << " items";
      if (m.phases[i].launches.size() > 1) os << ", " << m.phases[i].launches.size() << " launches of its kernels";
      os << ")";
    }
    os << "\n";
    if (m.tail_split > 1) os << "tail heads split into " << m.tail_split << " column slices\n";
    if (m.segment_chunks > 0) os << "segments of " << m.segment_chunks << " chunks\n";
  }
  return os.str();
}

std::vector<double> op_cycles(const Plan& p, const Device& d) {
  const Graph& g = p.graph;
  const std::unique_ptr<CostModel> cm = plan_cost_model(d, g.kind, p.opt);
  std::vector<double> c(g.ops.size());
  for (std::size_t i = 0; i < c.size(); ++i) c[i] = cm->op_cost(g, static_cast<int>(i), p.layouts.op_layout[i]);
  for (const Transform& t : p.layouts.transforms) c[t.before_op >= 0 ? t.before_op : c.size() - 1] += t.cost;
  return c;
}

double step_memory_cycles(const Plan& p, const Device& d) {
  if (d.rows_memory_bytes_per_cycle <= 0) return 0;
  return (p.graph.bytes_of(Role::kInput) + p.graph.bytes_of(Role::kOutput)) / d.rows_memory_bytes_per_cycle;
}

}  // namespace hanpu::plan
