#include "fuse/stream.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

namespace hanpu::fuse {

const std::vector<std::string>& stream_policies() {
  static const std::vector<std::string> p = {"fifo", "pairing", "admission"};
  return p;
}

Status parse_stream(const std::string& text, std::vector<StreamTask>* out) {
  std::vector<StreamTask> tasks;
  std::istringstream in(text);
  std::string line;
  for (int no = 1; std::getline(in, line); ++no) {
    line = line.substr(0, line.find('#'));
    std::istringstream ls(line);
    std::vector<std::string> f;
    for (std::string w; ls >> w;) f.push_back(w);
    if (f.empty()) continue;
    auto bad = [&](const std::string& why) {
      return InvalidArgument("stream line " + std::to_string(no) + ": " + why +
                             " (expected ARRIVAL_US SPEC [DEADLINE_US|-] [CHAIN_US])");
    };
    if (f.size() < 2 || f.size() > 4) return bad("2 to 4 fields");
    StreamTask t;
    try {
      size_t used = 0;
      t.arrival_us = std::stod(f[0], &used);
      if (used != f[0].size() || t.arrival_us < 0) return bad("arrival '" + f[0] + "' is not a time >= 0");
      if (f.size() >= 3 && f[2] != "-") {
        t.deadline_us = std::stod(f[2], &used);
        if (used != f[2].size() || !(t.deadline_us > 0)) return bad("deadline '" + f[2] + "' is not a time > 0");
      }
      if (f.size() == 4) {
        t.chain_us = std::stod(f[3], &used);
        if (used != f[3].size() || t.chain_us < 0) return bad("chain '" + f[3] + "' is not a time >= 0");
      }
    } catch (const std::exception&) {
      return bad("a number does not parse");
    }
    t.spec = f[1];
    if (!tasks.empty() && t.arrival_us < tasks.back().arrival_us) return bad("arrivals must not decrease");
    tasks.push_back(std::move(t));
  }
  if (tasks.empty()) return InvalidArgument("the stream has no tasks");
  *out = std::move(tasks);
  return Status::Ok();
}

namespace {

// What the policies know of one spec: its task, its time alone, and its dominant compute engine (the
// larger of the resource vector's matrix and vector cycles: what complementarity pairs).
struct Known {
  Task task;
  double alone_us = 0;
  bool matrix_bound = false;
};

// Where a stream runs: the policies ask it for predicted times, run entries on it and read its clock.
class Backend {
 public:
  virtual ~Backend() = default;
  // Builds and times `spec` alone once.
  Status add(const std::string& spec) {
    if (known_.count(spec)) return Status::Ok();
    Known k;
    HANPU_RETURN_IF_ERROR(build(spec, &k.task));
    GroupResult r;
    HANPU_RETURN_IF_ERROR(time_group({&k.task}, 1, &r));
    k.alone_us = r.makespan_us;
    k.matrix_bound = k.task.matrix_cycles > k.task.vector_cycles;
    known_.emplace(spec, std::move(k));
    return Status::Ok();
  }
  const Known& of(const std::string& spec) const { return known_.at(spec); }
  void set_alone(const std::string& spec, double us) { known_.at(spec).alone_us = us; }
  void set_pair(const std::string& a, const std::string& b, std::pair<double, double> done) { pairs_[{a, b}] = done; }
  // Predicted completion of each task of the pair (a first) from the entry's start; both specs added.
  Status pair(const std::string& a, const std::string& b, std::pair<double, double>* done) {
    const auto key = std::make_pair(a, b);
    auto it = pairs_.find(key);
    if (it == pairs_.end()) {
      GroupResult r;
      HANPU_RETURN_IF_ERROR(time_group({&known_.at(a).task, &known_.at(b).task}, 4, &r));
      it = pairs_.emplace(key, std::make_pair(r.completion_us[0], r.completion_us[1])).first;
    }
    *done = it->second;
    return Status::Ok();
  }
  virtual double now() = 0;
  virtual void wait_until(double t_us) = 0;
  // Runs one entry now: `spec` alone, or a pair; the absolute completion of each task.
  virtual Status run_alone(const std::string& spec, double* done) = 0;
  virtual Status run_pair(const std::string& a, const std::string& b, std::pair<double, double>* done) = 0;

 protected:
  virtual Status build(const std::string& spec, Task* t) = 0;
  // The times of `tasks` as `group` (alone: group 1; a pair: group 4) that predictions are made of.
  virtual Status time_group(const std::vector<const Task*>& tasks, int group, GroupResult* r) = 0;
  static std::vector<Task> copies(const std::vector<const Task*>& tasks) {
    std::vector<Task> v;
    for (const Task* t : tasks) v.push_back(*t);
    return v;
  }

 private:
  std::map<std::string, Known> known_;
  std::map<std::pair<std::string, std::string>, std::pair<double, double>> pairs_;
};

// The NPU model: a virtual clock that an entry advances by its model time (the predictions are exact).
class ModelBackend : public Backend {
 public:
  ModelBackend(const plan::Device& d, double t0) : d_(d), now_(t0) {}
  double now() override { return now_; }
  void wait_until(double t_us) override { now_ = std::max(now_, t_us); }
  Status run_alone(const std::string& spec, double* done) override {
    *done = now_ += of(spec).alone_us;
    return Status::Ok();
  }
  Status run_pair(const std::string& a, const std::string& b, std::pair<double, double>* done) override {
    HANPU_RETURN_IF_ERROR(pair(a, b, done));
    done->first += now_;
    done->second += now_;
    now_ = std::max(done->first, done->second);
    return Status::Ok();
  }

 protected:
  Status build(const std::string& spec, Task* t) override {
    return build_task(spec, d_, on_chip_capacity(d_) / 2, t);
  }
  Status time_group(const std::vector<const Task*>& tasks, int group, GroupResult* r) override {
    return run_group(copies(tasks), d_, group, r);
  }

 private:
  const plan::Device& d_;
  double now_;
};

// One core of this CPU in real time: arrivals are waited for by the clock, every entry runs its real
// kernels on the one-core executor (alone: group 1; a pair: group 4), and completions are measured. The
// predictions the policies decide by are medians of kRounds interleaved rounds (every spec alone, then
// every complementary pair, so that each run finds the caches as the others left them) made before the
// stream starts. The clock stops while the executor sets an entry up and tears it down (its plan and
// worker threads, a few hundred microseconds a call, which a resident runtime pays once); the entry's own
// dispatch, the hand-off to the core's worker, stays on the clock.
class HostBackend : public Backend {
 public:
  HostBackend(const plan::Device& d, double t0) : d_(d), t0_(t0) {}
  void start() {
    start_ = std::chrono::steady_clock::now();
    paused_us_ = 0;
  }
  double now() override { return t0_ + elapsed_us() - paused_us_; }
  void wait_until(double t_us) override {
    const double ahead = t_us - now();
    if (ahead > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(ahead));
  }
  // Times every spec alone and every pair (a first) in interleaved rounds, and sets each entry's tasks
  // aside so that no entry copies a task on the clock.
  Status calibrate(const std::vector<std::string>& specs, const std::vector<std::pair<std::string, std::string>>& pairs) {
    for (const std::string& sp : specs) alone_sets_.try_emplace(sp, std::vector<Task>{of(sp).task});
    for (const auto& pr : pairs) pair_sets_.try_emplace(pr, std::vector<Task>{of(pr.first).task, of(pr.second).task});
    std::map<std::string, std::vector<double>> alone;
    std::map<std::pair<std::string, std::string>, std::vector<std::pair<double, double>>> paired;
    for (int round = 0; round < kRounds; ++round) {
      for (const auto& [sp, set] : alone_sets_) {
        GroupResult r;
        HANPU_RETURN_IF_ERROR(run_group_core(set, d_, 1, &r));
        alone[sp].push_back(r.makespan_us);
      }
      for (const auto& [pr, set] : pair_sets_) {
        GroupResult r;
        HANPU_RETURN_IF_ERROR(run_group_core(set, d_, 4, &r));
        paired[pr].emplace_back(r.completion_us[0], r.completion_us[1]);
      }
    }
    for (auto& [sp, v] : alone) {
      std::sort(v.begin(), v.end());
      set_alone(sp, v[v.size() / 2]);
    }
    for (auto& [pr, v] : paired) {
      // The round with the median pair makespan.
      std::sort(v.begin(), v.end(), [](const auto& x, const auto& y) {
        return std::max(x.first, x.second) < std::max(y.first, y.second);
      });
      set_pair(pr.first, pr.second, v[v.size() / 2]);
    }
    return Status::Ok();
  }
  Status run_alone(const std::string& spec, double* done) override {
    std::pair<double, double> d;
    HANPU_RETURN_IF_ERROR(run_entry(alone_sets_.at(spec), 1, &d));
    *done = d.first;
    return Status::Ok();
  }
  Status run_pair(const std::string& a, const std::string& b, std::pair<double, double>* done) override {
    return run_entry(pair_sets_.at({a, b}), 4, done);
  }

 protected:
  static constexpr int kRounds = 3;
  Status build(const std::string& spec, Task* t) override {
    return build_task(spec, d_, on_chip_capacity(d_) / 2, t, true);
  }
  // One warm-up run; calibrate() sets the predictions.
  Status time_group(const std::vector<const Task*>& tasks, int group, GroupResult* r) override {
    return run_group_core(copies(tasks), d_, group, r);
  }

 private:
  double elapsed_us() const {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_).count();
  }
  // Runs one entry; the absolute completions (the second is the first's for one task). The call's time
  // beyond its makespan is the executor's set-up and tear-down: off the clock.
  Status run_entry(const std::vector<Task>& set, int group, std::pair<double, double>* done) {
    const double t = now(), w0 = elapsed_us();
    GroupResult r;
    HANPU_RETURN_IF_ERROR(run_group_core(set, d_, group, &r));
    paused_us_ += std::max(0.0, elapsed_us() - w0 - r.makespan_us);
    *done = {t + r.completion_us[0], t + r.completion_us.back()};
    return Status::Ok();
  }
  const plan::Device& d_;
  double t0_;
  std::chrono::steady_clock::time_point start_;
  double paused_us_ = 0;
  std::map<std::string, std::vector<Task>> alone_sets_;
  std::map<std::pair<std::string, std::string>, std::vector<Task>> pair_sets_;
};

// The policies (stream.h) over one backend.
Status run_policy(const std::vector<StreamTask>& stream, const std::string& policy, double cap_us, int64_t capacity,
                  Backend& be, StreamResult* out) {
  auto alone = [&](int i) { return be.of(stream[i].spec).alone_us; };
  auto deadline = [&](int i) { return stream[i].deadline_us > 0 ? stream[i].arrival_us + stream[i].deadline_us : 1e300; };
  auto complementary = [&](int a, int b) {
    const Known &x = be.of(stream[a].spec), &y = be.of(stream[b].spec);
    return x.matrix_bound != y.matrix_bound && x.task.on_chip_bytes + y.task.on_chip_bytes <= capacity;
  };
  const int n = static_cast<int>(stream.size());
  StreamResult r;
  r.policy = policy;
  r.completion_us.assign(n, 0);
  std::deque<int> queue;
  int next = 0;
  auto admit_arrivals = [&] {
    const double now = be.now();
    while (next < n && stream[next].arrival_us <= now) queue.push_back(next++);
  };
  while (next < n || !queue.empty()) {
    admit_arrivals();
    if (queue.empty()) {
      be.wait_until(stream[next].arrival_us);
      continue;
    }
    const double now = be.now();
    const int h = queue.front();
    int partner = -1;
    std::pair<double, double> done;
    if (policy != "fifo") {
      for (size_t q = 1; q < queue.size() && partner < 0; ++q) {
        const int p = queue[q];
        if (!complementary(h, p)) continue;
        if (policy == "admission" && (stream[p].deadline_us > 0 || alone(p) > cap_us)) continue;
        HANPU_RETURN_IF_ERROR(be.pair(stream[h].spec, stream[p].spec, &done));
        if (policy == "pairing" && (now + done.first + stream[h].chain_us > deadline(h) ||
                                    now + done.second + stream[p].chain_us > deadline(p))) {
          continue;  // pairing would break a deadline that running alone might keep
        }
        partner = p;
      }
      if (policy == "pairing" && partner < 0) {
        // Wait for the next complementary arrival while the wait still fits the deadline.
        int k = next;
        while (k < n && !complementary(h, k)) ++k;
        if (k < n) {
          HANPU_RETURN_IF_ERROR(be.pair(stream[h].spec, stream[k].spec, &done));
          const double t = stream[k].arrival_us;
          const bool fits = stream[h].deadline_us > 0 ? t + done.first + stream[h].chain_us <= deadline(h)
                                                      : t - now <= cap_us;
          if (fits) {
            be.wait_until(t);
            continue;  // the partner arrives, and is taken next round
          }
        }
      }
    }
    queue.pop_front();
    ++r.entries;
    if (partner >= 0) {
      queue.erase(std::find(queue.begin(), queue.end(), partner));
      ++r.pairs;
      HANPU_RETURN_IF_ERROR(be.run_pair(stream[h].spec, stream[partner].spec, &done));
      r.completion_us[h] = done.first;
      r.completion_us[partner] = done.second;
    } else {
      HANPU_RETURN_IF_ERROR(be.run_alone(stream[h].spec, &r.completion_us[h]));
    }
  }
  double turnaround = 0;
  int with_deadline = 0, missed = 0;
  for (int i = 0; i < n; ++i) {
    turnaround += (r.completion_us[i] - stream[i].arrival_us) / alone(i);
    if (stream[i].deadline_us > 0) {
      ++with_deadline;
      missed += r.completion_us[i] + stream[i].chain_us > deadline(i) ? 1 : 0;
    }
  }
  r.makespan_us = *std::max_element(r.completion_us.begin(), r.completion_us.end()) - stream[0].arrival_us;
  r.throughput_per_s = r.makespan_us > 0 ? n / (r.makespan_us * 1e-6) : 0;
  r.avg_normalised_turnaround = turnaround / n;
  r.deadline_miss_rate = with_deadline ? static_cast<double>(missed) / with_deadline : 0;
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace

Status run_stream(const std::vector<StreamTask>& stream, const plan::Device& d, const std::string& policy,
                  double cap_us, StreamResult* out, Executor ex) {
  if (std::find(stream_policies().begin(), stream_policies().end(), policy) == stream_policies().end()) {
    return InvalidArgument("unknown policy '" + policy + "' (fifo, pairing, admission)");
  }
  if (stream.empty()) return InvalidArgument("the stream has no tasks");
  if (ex == Executor::kHost) return InvalidArgument("a stream runs on the NPU model or on one host core (host-core)");
  if (ex == Executor::kModel && !d.has_sim) {
    return InvalidArgument("device '" + d.name + "' has no \"sim\" section (the NPU model needs one)");
  }
  const double t0 = stream[0].arrival_us;
  std::unique_ptr<Backend> be;
  HostBackend* host = nullptr;
  if (ex == Executor::kModel) {
    be = std::make_unique<ModelBackend>(d, t0);
  } else {
    auto h = std::make_unique<HostBackend>(d, t0);
    host = h.get();
    be = std::move(h);
  }
  for (const StreamTask& s : stream) HANPU_RETURN_IF_ERROR(be->add(s.spec));
  if (host) {
    // Every pair a policy may form (complementary dominant engines) is timed before the clock starts: a
    // prediction made mid-stream would take the core's time.
    std::vector<std::string> specs;
    std::vector<std::pair<std::string, std::string>> pairs;
    for (size_t a = 0; a < stream.size(); ++a) {
      specs.push_back(stream[a].spec);
      for (size_t b = a + 1; b < stream.size(); ++b) {
        const std::string &x = stream[a].spec, &y = stream[b].spec;
        if (be->of(x).matrix_bound == be->of(y).matrix_bound) continue;
        pairs.emplace_back(x, y);
        pairs.emplace_back(y, x);
      }
    }
    HANPU_RETURN_IF_ERROR(host->calibrate(specs, pairs));
    host->start();
  }
  return run_policy(stream, policy, cap_us, on_chip_capacity(d), *be, out);
}

}  // namespace hanpu::fuse
