// SVG plots of benchmark results (no dependencies: the SVG is written as text).
#pragma once

#include <string>

#include "bench/bench.h"

namespace hanpu {

// Median time vs sequence length, one line per strategy, log-log axes. Decode records are skipped.
std::string svg_time_vs_tokens(const BenchReport& rep);

}  // namespace hanpu
