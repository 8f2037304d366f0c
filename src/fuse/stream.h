// Pairing under deadlines (the fusion notes' scheduling question): a stream of tasks arriving over time
// at one core of the NPU model or of this CPU, each with its resource vector and optionally a deadline, served by a
// policy that decides which tasks share an entry.
//
// - fifo: every task its own entry, in arrival order.
// - pairing: the oldest waiting task takes as partner the oldest waiting task whose dominant compute
//   engine (matrix or vector, from the resource vectors) differs and whose region fits beside its own,
//   provided the pair's completion times keep both deadlines; with no such partner waiting it waits for the next complementary arrival only while
//   queueing + waiting + the pair's execution + its remaining chain still meet its deadline (a
//   best-effort task waits at most `cap_us`); otherwise it runs alone.
// - admission: interference-aware admission without waiting: a partner is admitted only if it is
//   best effort, its dominant engine differs, it fits the on-chip budget and its own time is at most
//   `cap_us`.
// An entry holds the core until both of its tasks finish. Times come from the model (a task alone is
// group 1, a pair group 4, fuse/runtime.h), or from this CPU's core running the stream in real time.
#pragma once

#include <string>
#include <vector>

#include "fuse/runtime.h"

namespace hanpu::fuse {

struct StreamTask {
  double arrival_us = 0;
  std::string spec;
  double deadline_us = 0;  // relative to the arrival; 0: best effort
  double chain_us = 0;     // work of its request still to run after it (counts against its deadline)
};

// Parses lines "ARRIVAL_US SPEC [DEADLINE_US|-] [CHAIN_US]" ('#' starts a comment); errors name the line.
Status parse_stream(const std::string& text, std::vector<StreamTask>* out);

struct StreamResult {
  std::string policy;
  double makespan_us = 0;        // first arrival to last completion
  double throughput_per_s = 0;   // tasks per second of makespan
  double avg_normalised_turnaround = 0;  // mean of (completion - arrival) / time alone
  double deadline_miss_rate = 0;         // among tasks with deadlines
  int entries = 0, pairs = 0;
  std::vector<double> completion_us;     // per task, in stream order
};

const std::vector<std::string>& stream_policies();

// Runs the stream under `policy` on the NPU model of `d` (model times, a virtual clock), or with
// Executor::kHostCore on one core of this CPU in real time (`d` the host device): arrivals are waited for,
// every entry runs the real kernels (alone: group 1, a pair: group 4 of the one-core executor) and
// completions are measured; the policies decide by medians of three runs of each spec alone and each
// complementary pair, timed before the clock starts.
Status run_stream(const std::vector<StreamTask>& stream, const plan::Device& d, const std::string& policy,
                  double cap_us, StreamResult* out, Executor ex = Executor::kModel);

}  // namespace hanpu::fuse
