#include "verify/verify.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "hanpu/engine.h"
#include "ops/fla_emulation.h"
#include "ops/named_inputs.h"

namespace hanpu {

double nmse(const std::vector<double>& y, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) return INFINITY;
    const double e = y[i] - ref[i];
    num += e * e;
    den += ref[i] * ref[i];
  }
  return den > 0 ? num / den : num;
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<double> rounded(const std::vector<double>& x, DType dt) {
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = round_to_dtype(x[i], dt);
  return out;
}

struct PathOutput {
  Tensor o, state;
};

Status run_path(Status (*fn)(const Inputs&, const Options&, const Outputs&), const Inputs& in, const Options& opt,
                DType o_dtype, DType s_dtype, const Tensor& o_like, const std::vector<int64_t>& s_shape,
                PathOutput* out) {
  out->o = Tensor(o_dtype, o_like.shape);
  out->state = Tensor(s_dtype, s_shape);
  return fn(in, opt, Outputs{out->o.view(), out->state.view()});
}

}  // namespace

double accuracy_bar(const Instance& inst, const std::vector<double>& ref, DType out_dtype) {
  const double base = inst.extreme_gates && inst.kind == Kind::kKda ? 1e-8 : 1e-10;
  return inst.dtype == DType::kF32 ? base : 2 * nmse(rounded(ref, out_dtype), ref) + base;
}

double bf16_margin(std::size_t n) {
  return 1.1 + 8.0 / std::sqrt(static_cast<double>(std::max<std::size_t>(n, 1)));
}

double accuracy_bar_bf16_o(const Instance& inst, const std::vector<double>& ref, double fla_o_nmse) {
  const double fixed = inst.dtype == DType::kBF16 ? 1.5 * 1.5 * nmse(rounded(ref, DType::kBF16), ref) : 4e-3 * 4e-3;
  const double m = bf16_margin(ref.size());
  return std::max(fixed, m * m * fla_o_nmse) + 1e-12;
}

double accuracy_bar_bf16_state(const Instance& inst, std::size_t n, double fla_s_nmse) {
  const double fixed = inst.dtype == DType::kBF16 ? 2.5e-3 : 4e-3;
  const double m = bf16_margin(n);
  return std::max(fixed * fixed, m * m * fla_s_nmse) + 1e-12;
}

InstanceResult run_instance(const Instance& inst, bool engine) {
  const auto t0 = std::chrono::steady_clock::now();
  InstanceResult res;
  res.index = inst.index;
  res.scenario = inst.scenario;
  res.kind = kind_name(inst.kind);
  res.dtype = dtype_name(inst.dtype);
  res.shape = inst.describe();
  Inputs in;
  Status st = bind_inputs(inst.tensors, &in);
  const Tensor& q = *inst.tensors.find("q");
  const Tensor& v = *inst.tensors.find("v");
  const int64_t N = in.cu_seqlens ? in.cu_seqlens->shape[0] - 1 : q.shape[0];
  const int64_t K = q.shape[3], V = v.shape[3], HV = v.shape[2];
  const std::vector<int64_t> s_shape =
      inst.opt.state_v_first ? std::vector<int64_t>{N, HV, V, K} : std::vector<int64_t>{N, HV, K, V};
  const Tensor o_like(DType::kF64, {q.shape[0], q.shape[1], HV, V});
  PathOutput ref, chunk, rec;
  if (st.ok()) st = run_path(reference_forward, in, inst.opt, DType::kF64, DType::kF64, o_like, s_shape, &ref);
  if (st.ok()) st = run_path(chunk_forward, in, inst.opt, inst.dtype, DType::kF32, o_like, s_shape, &chunk);
  if (st.ok()) st = run_path(recurrent_forward, in, inst.opt, inst.dtype, DType::kF32, o_like, s_shape, &rec);
  if (!st.ok()) {
    res.error = st.ToString();
    res.chunk_o = res.chunk_s = res.rec_o = res.rec_s = res.cvr_o = res.cvr_s = INFINITY;
    res.seconds = seconds_since(t0);
    return res;
  }
  const std::vector<double> o_ref = to_doubles(ref.o.view()), s_ref = to_doubles(ref.state.view());
  const std::vector<double> o_c = to_doubles(chunk.o.view()), s_c = to_doubles(chunk.state.view());
  const std::vector<double> o_r = to_doubles(rec.o.view()), s_r = to_doubles(rec.state.view());
  res.chunk_o = nmse(o_c, o_ref);
  res.chunk_s = nmse(s_c, s_ref);
  res.rec_o = nmse(o_r, o_ref);
  res.rec_s = nmse(s_r, s_ref);
  res.cvr_o = nmse(o_c, o_r);
  res.cvr_s = nmse(s_c, s_r);
  res.rec_bar_o = accuracy_bar(inst, o_ref, inst.dtype);
  res.rec_bar_s = accuracy_bar(inst, s_ref, DType::kF32);  // the state is fp32 for every input dtype
  const bool bf16 = resolve_precision(inst.opt.precision, inst.dtype) == Precision::kBf16;
  res.precision = bf16 ? "bf16" : "exact";
  if (bf16) {
    PathOutput fla;
    st = run_path(fla_bf16_emulation_forward, in, inst.opt, inst.dtype, DType::kF32, o_like, s_shape, &fla);
    if (!st.ok()) res.error = "fla emulation: " + st.ToString();
    res.fla_o = st.ok() ? nmse(to_doubles(fla.o.view()), o_ref) : INFINITY;
    res.fla_s = st.ok() ? nmse(to_doubles(fla.state.view()), s_ref) : INFINITY;
    res.bar_o = accuracy_bar_bf16_o(inst, o_ref, res.fla_o);
    res.bar_s = accuracy_bar_bf16_state(inst, s_ref.size(), res.fla_s);
  } else {
    res.bar_o = res.rec_bar_o;
    res.bar_s = res.rec_bar_s;
  }
  for (Strategy s : engine ? all_strategies() : std::vector<Strategy>{}) {
    EngineConfig ec;
    ec.strategy = s;
    ec.threads = 2;
    PathOutput eng{Tensor(inst.dtype, o_like.shape), Tensor(DType::kF32, s_shape)};
    st = engine_forward(in, inst.opt, ec, Outputs{eng.o.view(), eng.state.view()});
    const double eo = st.ok() ? nmse(to_doubles(eng.o.view()), o_ref) : INFINITY;
    const double es = st.ok() ? nmse(to_doubles(eng.state.view()), s_ref) : INFINITY;
    if (!st.ok()) res.error = std::string(strategy_name(s)) + ": " + st.ToString();
    if (eo / res.bar_o > res.engine_o / res.bar_o || es / res.bar_s > res.engine_s / res.bar_s) {
      res.engine_worst = strategy_name(s);
    }
    res.engine_o = std::max(res.engine_o, eo);
    res.engine_s = std::max(res.engine_s, es);
    if (s == Strategy::kHanpu) {
      res.hanpu_o = eo;
      res.hanpu_s = es;
    }
  }
  // Chunk vs recurrent: within the bar in exact mode; in bf16 mode the two paths run at different
  // precisions, so their distance is bounded by the triangle inequality (sum of the two relative RMS bars).
  // bf16: each instance alone within the gross-error guard (verify.h; the bars hold pooled).
  const auto triangle = [](double a, double b) { return (std::sqrt(a) + std::sqrt(b)) * (std::sqrt(a) + std::sqrt(b)); };
  const double guard = bf16 ? kBf16GrossFactor * kBf16GrossFactor : 1.0;
  const double bar_o = guard * res.bar_o, bar_s = guard * res.bar_s;
  const double cvr_bar_o = bf16 ? triangle(bar_o, res.rec_bar_o) : bar_o;
  const double cvr_bar_s = bf16 ? triangle(bar_s, res.rec_bar_s) : bar_s;
  res.n_o = static_cast<int64_t>(o_ref.size());
  res.n_s = static_cast<int64_t>(s_ref.size());
  res.passed = res.error.empty() && res.chunk_o <= bar_o && res.rec_o <= res.rec_bar_o && res.cvr_o <= cvr_bar_o &&
               res.chunk_s <= bar_s && res.rec_s <= res.rec_bar_s && res.cvr_s <= cvr_bar_s &&
               res.engine_o <= bar_o && res.engine_s <= bar_s;
  res.seconds = seconds_since(t0);
  return res;
}

namespace {

struct Group {
  std::string kind, dtype, scenario;
  std::vector<const InstanceResult*> members;
};

std::vector<Group> group_results(const VerifyReport& rep) {
  std::map<std::string, Group> groups;
  for (const auto& r : rep.results) {
    Group& g = groups[r.kind + "/" + r.dtype + "/" + r.scenario];
    g.kind = r.kind;
    g.dtype = r.dtype;
    g.scenario = r.scenario;
    g.members.push_back(&r);
  }
  std::vector<Group> out;
  for (auto& [key, g] : groups) out.push_back(std::move(g));
  return out;
}

}  // namespace

PooledRatio pooled_ratio(const std::vector<const InstanceResult*>& group) {
  double eo = 0, bo = 0, es = 0, bs = 0;
  for (const InstanceResult* r : group) {
    if (r->precision != "bf16" || !r->error.empty()) continue;
    eo += static_cast<double>(r->n_o) * std::max(r->chunk_o, r->engine_o);
    bo += static_cast<double>(r->n_o) * r->bar_o;
    es += static_cast<double>(r->n_s) * std::max(r->chunk_s, r->engine_s);
    bs += static_cast<double>(r->n_s) * r->bar_s;
  }
  return {bo > 0 ? eo / bo : 0.0, bs > 0 ? es / bs : 0.0};
}

VerifyReport run_verify(const VerifyConfig& cfg,
                        const std::function<void(const InstanceResult&, int done)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  VerifyReport rep;
  rep.results.resize(std::max(cfg.instances, 0));
  int threads = cfg.threads > 0 ? cfg.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, std::min(threads, cfg.instances));
  // Long instances first so the tail of the run is not one long instance on one thread.
  std::vector<int> order(rep.results.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  const std::vector<std::string>& sc = verify_scenarios();
  std::stable_partition(order.begin(), order.end(), [&](int i) { return sc[i % sc.size()] == "long"; });
  std::atomic<std::size_t> next{0};
  std::mutex mu;
  int done = 0;
  auto worker = [&] {
    for (std::size_t j; (j = next.fetch_add(1)) < order.size();) {
      const int i = order[j];
      Instance inst = make_instance(cfg.seed, i);
      inst.opt.precision = cfg.precision;
      InstanceResult r = run_instance(inst, cfg.engine);
      std::lock_guard<std::mutex> lock(mu);
      rep.results[i] = r;
      ++done;
      if (progress) progress(rep.results[i], done);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  for (const auto& r : rep.results) rep.failures += r.passed ? 0 : 1;
  for (const Group& g : group_results(rep)) {
    const PooledRatio pr = pooled_ratio(g.members);
    if (pr.passed()) continue;
    char line[160];
    std::snprintf(line, sizeof line, "%s/%s/%s: pooled o %.2fx, state %.2fx its bars (NMSE)", g.kind.c_str(),
                  g.dtype.c_str(), g.scenario.c_str(), pr.o, pr.state);
    rep.failed_groups.push_back(line);
  }
  rep.seconds = seconds_since(t0);
  return rep;
}

namespace {

struct Stat {
  double max = 0, median = 0;
};

Stat stat_of(const Group& g, double InstanceResult::*field) {
  std::vector<double> v;
  for (const auto* r : g.members) v.push_back(r->*field);
  std::sort(v.begin(), v.end());
  Stat s;
  if (v.empty()) return s;
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return s;
}

int failures_of(const Group& g) {
  int f = 0;
  for (const auto* r : g.members) f += r->passed ? 0 : 1;
  return f;
}

// Worst ratio of a measured NMSE to its bar over the group (<= 1 passes).
double worst_ratio(const Group& g) {
  double w = 0;
  for (const auto* r : g.members) {
    const double o = std::max(r->chunk_o, r->engine_o) / r->bar_o;
    const double s = std::max({r->chunk_s, r->engine_s}) / r->bar_s;
    w = std::max({w, o, s, r->rec_o / r->rec_bar_o, r->rec_s / r->rec_bar_s});
  }
  return w;
}

}  // namespace

std::string format_table(const VerifyReport& rep) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "%-4s %-5s %-18s %3s | %-19s | %-19s | %-9s %-9s | %-9s %-9s | %-9s %-9s | %-8s %-8s %s\n", "kind",
                "dtype", "scenario", "n", "chunk o max / med", "chunk S max / med", "rec o max", "rec S max",
                "eng o max", "eng S max", "hanpu o", "hanpu S", "worst/bar", "pool/bar", "fail");
  out += line;
  out += std::string(171, '-') + "\n";
  bool any_bf16 = false;
  for (const Group& g : group_results(rep)) {
    const Stat co = stat_of(g, &InstanceResult::chunk_o), cs = stat_of(g, &InstanceResult::chunk_s);
    const Stat ro = stat_of(g, &InstanceResult::rec_o), rs = stat_of(g, &InstanceResult::rec_s);
    const Stat eo = stat_of(g, &InstanceResult::engine_o), es = stat_of(g, &InstanceResult::engine_s);
    const Stat ho = stat_of(g, &InstanceResult::hanpu_o), hs = stat_of(g, &InstanceResult::hanpu_s);
    const bool bf16 = std::any_of(g.members.begin(), g.members.end(), [](auto* r) { return r->precision == "bf16"; });
    any_bf16 |= bf16;
    const PooledRatio pr = pooled_ratio(g.members);
    char pooled[16] = "-";
    if (bf16) std::snprintf(pooled, sizeof pooled, "%8.2e", std::max(pr.o, pr.state));
    std::snprintf(line, sizeof line,
                  "%-4s %-5s %-18s %3zu | %9.2e %9.2e | %9.2e %9.2e | %9.2e %9.2e | %9.2e %9.2e | %9.2e %9.2e | "
                  "%8.2e %-8s %d%s\n",
                  g.kind.c_str(), g.dtype.c_str(), g.scenario.c_str(), g.members.size(), co.max, co.median, cs.max,
                  cs.median, ro.max, rs.max, eo.max, es.max, ho.max, hs.max, worst_ratio(g), pooled, failures_of(g),
                  pr.passed() ? "" : " pooled");
    out += line;
  }
  std::snprintf(line, sizeof line, "%zu instances, %d failed", rep.results.size(), rep.failures);
  out += line;
  if (any_bf16) {
    std::snprintf(line, sizeof line,
                  " (bf16: each instance within %gx its bars in relative RMS, every scenario pooled within them: %zu "
                  "over)",
                  kBf16GrossFactor, rep.failed_groups.size());
    out += line;
  }
  std::snprintf(line, sizeof line, ", %.1f s\n", rep.seconds);
  out += line;
  return out;
}

std::string format_json(const VerifyReport& rep, const VerifyConfig& cfg) {
  using nlohmann::json;
  // JSON has no infinity: non-finite NMSE values are written as null.
  auto num = [](double x) { return std::isfinite(x) ? json(x) : json(nullptr); };
  json j;
  j["seed"] = cfg.seed;
  j["precision"] = precision_name(cfg.precision);
  j["instances"] = rep.results.size();
  j["failures"] = rep.failures;
  j["group_failures"] = rep.failed_groups.size();
  j["seconds"] = rep.seconds;
  j["groups"] = json::array();
  for (const Group& g : group_results(rep)) {
    json jg = {{"kind", g.kind}, {"dtype", g.dtype}, {"scenario", g.scenario}, {"n", g.members.size()},
               {"failures", failures_of(g)}, {"worst_ratio_to_bar", num(worst_ratio(g))}};
    const PooledRatio pr = pooled_ratio(g.members);
    jg["pooled_ratio_to_bar"] = {{"o", num(pr.o)}, {"state", num(pr.state)}};
    jg["pooled_passed"] = pr.passed();
    const std::pair<const char*, double InstanceResult::*> fields[] = {
        {"chunk_o", &InstanceResult::chunk_o}, {"chunk_state", &InstanceResult::chunk_s},
        {"recurrent_o", &InstanceResult::rec_o}, {"recurrent_state", &InstanceResult::rec_s},
        {"chunk_vs_recurrent_o", &InstanceResult::cvr_o}, {"chunk_vs_recurrent_state", &InstanceResult::cvr_s},
        {"engine_o", &InstanceResult::engine_o}, {"engine_state", &InstanceResult::engine_s},
        {"hanpu_o", &InstanceResult::hanpu_o}, {"hanpu_state", &InstanceResult::hanpu_s}};
    for (const auto& [name, field] : fields) {
      const Stat s = stat_of(g, field);
      jg[name] = {{"max", num(s.max)}, {"median", num(s.median)}};
    }
    j["groups"].push_back(jg);
  }
  j["results"] = json::array();
  for (const auto& r : rep.results) {
    j["results"].push_back({{"index", r.index}, {"kind", r.kind}, {"dtype", r.dtype}, {"scenario", r.scenario},
                            {"shape", r.shape}, {"passed", r.passed}, {"error", r.error},
                            {"nmse", {{"chunk_o", num(r.chunk_o)}, {"chunk_state", num(r.chunk_s)},
                                      {"recurrent_o", num(r.rec_o)}, {"recurrent_state", num(r.rec_s)},
                                      {"chunk_vs_recurrent_o", num(r.cvr_o)},
                                      {"chunk_vs_recurrent_state", num(r.cvr_s)}, {"engine_o", num(r.engine_o)},
                                      {"engine_state", num(r.engine_s)}, {"hanpu_o", num(r.hanpu_o)},
                                      {"hanpu_state", num(r.hanpu_s)}}},
                            {"engine_worst_strategy", r.engine_worst}, {"engine_checked", cfg.engine},
                            {"precision", r.precision}, {"bar_o", r.bar_o}, {"bar_state", r.bar_s},
                            {"recurrent_bar_o", r.rec_bar_o}, {"recurrent_bar_state", r.rec_bar_s},
                            {"values_o", r.n_o}, {"values_state", r.n_s},
                            {"fla_emulation_o", num(r.fla_o)}, {"fla_emulation_state", num(r.fla_s)},
                            {"seconds", r.seconds}});
  }
  return j.dump(2) + "\n";
}

}  // namespace hanpu
