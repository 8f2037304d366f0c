#include "fuse/stream.h"

#include <algorithm>
#include <deque>
#include <map>
#include <sstream>

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

// Model times of tasks alone and of pairs, built once per spec / spec pair.
class Costs {
 public:
  explicit Costs(const plan::Device& d) : d_(d) {}

  // What the policies know of one spec: its task, its time alone, and its dominant compute engine (the
  // larger of the resource vector's matrix and vector cycles: what complementarity pairs).
  struct Known {
    Task task;
    double alone_us = 0;
    bool matrix_bound = false;
  };

  // Builds and times `spec` alone once.
  Status add(const std::string& spec) {
    if (known_.count(spec)) return Status::Ok();
    Known k;
    HANPU_RETURN_IF_ERROR(build_task(spec, d_, on_chip_capacity(d_) / 2, &k.task));
    GroupResult r;
    HANPU_RETURN_IF_ERROR(run_group({k.task}, d_, 1, &r));
    k.alone_us = r.makespan_us;
    k.matrix_bound = k.task.matrix_cycles > k.task.vector_cycles;
    known_.emplace(spec, std::move(k));
    return Status::Ok();
  }
  const Known& of(const std::string& spec) const { return known_.at(spec); }

  // Completion of each task of the pair (a first), from the entry's start; both specs added before.
  Status pair(const std::string& a, const std::string& b, std::pair<double, double>* done) {
    const auto key = std::make_pair(a, b);
    auto it = pairs_.find(key);
    if (it == pairs_.end()) {
      GroupResult r;
      HANPU_RETURN_IF_ERROR(run_group({of(a).task, of(b).task}, d_, 4, &r));
      it = pairs_.emplace(key, std::make_pair(r.completion_us[0], r.completion_us[1])).first;
    }
    *done = it->second;
    return Status::Ok();
  }

 private:
  const plan::Device& d_;
  std::map<std::string, Known> known_;
  std::map<std::pair<std::string, std::string>, std::pair<double, double>> pairs_;
};

}  // namespace

Status run_stream(const std::vector<StreamTask>& stream, const plan::Device& d, const std::string& policy,
                  double cap_us, StreamResult* out) {
  if (std::find(stream_policies().begin(), stream_policies().end(), policy) == stream_policies().end()) {
    return InvalidArgument("unknown policy '" + policy + "' (fifo, pairing, admission)");
  }
  if (stream.empty()) return InvalidArgument("the stream has no tasks");
  Costs costs(d);
  const int64_t capacity = on_chip_capacity(d);
  for (const StreamTask& s : stream) HANPU_RETURN_IF_ERROR(costs.add(s.spec));
  auto alone = [&](int i) { return costs.of(stream[i].spec).alone_us; };
  auto deadline = [&](int i) { return stream[i].deadline_us > 0 ? stream[i].arrival_us + stream[i].deadline_us : 1e300; };
  auto complementary = [&](int a, int b) {
    const Costs::Known &x = costs.of(stream[a].spec), &y = costs.of(stream[b].spec);
    return x.matrix_bound != y.matrix_bound && x.task.on_chip_bytes + y.task.on_chip_bytes <= capacity;
  };
  const int n = static_cast<int>(stream.size());
  StreamResult r;
  r.policy = policy;
  r.completion_us.assign(n, 0);
  std::deque<int> queue;
  int next = 0;
  double now = stream[0].arrival_us;
  auto admit_arrivals = [&] {
    while (next < n && stream[next].arrival_us <= now) queue.push_back(next++);
  };
  while (next < n || !queue.empty()) {
    admit_arrivals();
    if (queue.empty()) {
      now = stream[next].arrival_us;
      continue;
    }
    const int h = queue.front();
    int partner = -1;
    std::pair<double, double> done;
    if (policy != "fifo") {
      for (size_t q = 1; q < queue.size() && partner < 0; ++q) {
        const int p = queue[q];
        if (!complementary(h, p)) continue;
        if (policy == "admission" && (stream[p].deadline_us > 0 || alone(p) > cap_us)) continue;
        HANPU_RETURN_IF_ERROR(costs.pair(stream[h].spec, stream[p].spec, &done));
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
          HANPU_RETURN_IF_ERROR(costs.pair(stream[h].spec, stream[k].spec, &done));
          const double t = stream[k].arrival_us;
          const bool fits = stream[h].deadline_us > 0 ? t + done.first + stream[h].chain_us <= deadline(h)
                                                      : t - now <= cap_us;
          if (fits) {
            now = t;
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
      r.completion_us[h] = now + done.first;
      r.completion_us[partner] = now + done.second;
      now += std::max(done.first, done.second);
    } else {
      now += alone(h);
      r.completion_us[h] = now;
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

}  // namespace hanpu::fuse
