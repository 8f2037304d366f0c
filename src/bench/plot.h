// SVG plots of benchmark results (no dependencies: the SVG is written as text).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bench/bench.h"

namespace hanpu {

// One named line of a plot: (x, y) points, both positive.
struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;
};

// A log-log line plot: x in powers of two (labelled `x_label`), y in decades of `y_unit`, one line and
// legend entry per series in order.
std::string svg_log_log(const std::string& title, const std::string& x_label, const std::string& y_unit,
                        std::vector<PlotSeries> series);

// Grouped bars: one group of bars per category (x labels), one bar per series (legend), values >= 0 on a
// linear axis from 0 (labelled `y_label`).
std::string svg_grouped_bars(const std::string& title, const std::string& y_label,
                             const std::vector<std::string>& categories, const std::vector<std::string>& series,
                             const std::vector<std::vector<double>>& values);  // values[category][series]

// Median time vs sequence length, one line per strategy, log-log axes. Decode records are skipped.
std::string svg_time_vs_tokens(const BenchReport& rep);

}  // namespace hanpu
