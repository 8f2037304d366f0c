#include "bench/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

namespace hanpu {

namespace {

constexpr double kW = 760, kH = 460, kLeft = 80, kRight = 170, kTop = 40, kBottom = 60;
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"};

std::string fmt(const char* f, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c, d);
  return buf;
}

}  // namespace

std::string svg_log_log(const std::string& title, const std::string& x_label, const std::string& y_unit,
                        std::vector<PlotSeries> series) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const PlotSeries& l : series) {
    for (const auto& [x, y] : l.points) {
      x0 = std::min(x0, std::log2(x));
      x1 = std::max(x1, std::log2(x));
      y0 = std::min(y0, std::log10(y));
      y1 = std::max(y1, std::log10(y));
    }
  }
  std::string s = fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
                      "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", kW, kH);
  if (!(x0 <= x1)) return s + "<text x=\"20\" y=\"30\">no data</text>\n</svg>\n";
  y0 = std::floor(y0);
  y1 = std::max(std::ceil(y1), y0 + 1);
  if (x1 <= x0) x1 = x0 + 1;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto px = [&](double t) { return kLeft + (std::log2(t) - x0) / (x1 - x0) * pw; };
  auto py = [&](double v) { return kTop + (y1 - std::log10(v)) / (y1 - y0) * ph; };
  s += fmt("<text x=\"%.0f\" y=\"24\" font-size=\"15\">", kLeft) + title + "</text>\n";
  s += fmt("<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#444\"/>\n", kLeft, kTop, pw, ph);
  for (double e = y0; e <= y1 + 1e-9; e += 1) {  // decades of y
    const double y = kTop + (y1 - e) / (y1 - y0) * ph;
    s += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", kLeft, y, kLeft + pw, y);
    s += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g ", kLeft - 6, y + 4, std::pow(10.0, e)) + y_unit +
         "</text>\n";
  }
  for (double e = std::ceil(x0); e <= x1 + 1e-9; e += 1) {  // powers of two of x
    const double x = kLeft + (e - x0) / (x1 - x0) * pw;
    s += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>\n", x, kTop, x, kTop + ph);
    s += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", x, kTop + ph + 18, std::pow(2.0, e));
  }
  s += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", kLeft + pw / 2, kH - 16) + x_label + "</text>\n";
  for (std::size_t i = 0; i < series.size(); ++i) {
    auto& pts = series[i].points;
    std::sort(pts.begin(), pts.end());
    const char* color = kColors[i % (sizeof kColors / sizeof kColors[0])];
    std::string poly;
    for (const auto& [x, y] : pts) poly += fmt("%.1f,%.1f ", px(x), py(y));
    s += "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" + std::string(color) + "\" points=\"" + poly + "\"/>\n";
    for (const auto& [x, y] : pts) {
      s += fmt("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"", px(x), py(y)) + color + "\"/>\n";
    }
    const double ly = kTop + 14 + 20.0 * static_cast<double>(i);
    s += fmt("<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke-width=\"2\" stroke=\"", kW - kRight + 14, ly,
             kW - kRight + 40, ly) + color + "\"/>\n";
    s += fmt("<text x=\"%.0f\" y=\"%.1f\">", kW - kRight + 46, ly + 4) + series[i].name + "</text>\n";
  }
  return s + "</svg>\n";
}

std::string svg_grouped_bars(const std::string& title, const std::string& y_label,
                             const std::vector<std::string>& categories, const std::vector<std::string>& series,
                             const std::vector<std::vector<double>>& values) {
  const double w = std::max(kW, kLeft + kRight + 40.0 * static_cast<double>(categories.size() * (series.size() + 1)));
  std::string s = fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
                      "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", w, kH);
  double top = 0;
  for (const auto& row : values) {
    for (double v : row) top = std::max(top, v);
  }
  if (categories.empty() || series.empty() || !(top > 0)) return s + "<text x=\"20\" y=\"30\">no data</text>\n</svg>\n";
  const double pw = w - kLeft - kRight, ph = kH - kTop - kBottom - 40;  // room for slanted labels
  const double step = std::pow(10.0, std::floor(std::log10(top)));
  top = std::ceil(top / step) * step;
  s += fmt("<text x=\"%.0f\" y=\"24\" font-size=\"15\">", kLeft) + title + "</text>\n";
  s += fmt("<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#444\"/>\n", kLeft, kTop, pw, ph);
  for (double v = 0; v <= top + 1e-9 * top; v += step) {
    const double y = kTop + ph - v / top * ph;
    s += fmt("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", kLeft, y, kLeft + pw, y);
    s += fmt("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", kLeft - 6, y + 4, v);
  }
  s += fmt("<text x=\"16\" y=\"%.1f\" transform=\"rotate(-90 16 %.1f)\" text-anchor=\"middle\">", kTop + ph / 2,
           kTop + ph / 2) + y_label + "</text>\n";
  const double group_w = pw / static_cast<double>(categories.size());
  const double bar_w = group_w / static_cast<double>(series.size() + 1);
  for (size_t c = 0; c < categories.size(); ++c) {
    const double x0 = kLeft + group_w * static_cast<double>(c) + bar_w / 2;
    for (size_t k = 0; k < series.size() && k < values[c].size(); ++k) {
      const double h = values[c][k] / top * ph;
      s += fmt("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"", x0 + bar_w * static_cast<double>(k),
               kTop + ph - h, bar_w * 0.9, h) + kColors[k % (sizeof kColors / sizeof kColors[0])] + "\"/>\n";
    }
    const double lx = kLeft + group_w * (static_cast<double>(c) + 0.5), ly = kTop + ph + 14;
    s += fmt("<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\" transform=\"rotate(-20 %.1f %.1f)\">",
             lx, ly, lx, ly) + categories[c] + "</text>\n";
  }
  for (size_t k = 0; k < series.size(); ++k) {
    const double ly = kTop + 14 + 20.0 * static_cast<double>(k);
    s += fmt("<rect x=\"%.0f\" y=\"%.1f\" width=\"20\" height=\"10\" fill=\"", w - kRight + 14, ly - 8) +
         kColors[k % (sizeof kColors / sizeof kColors[0])] + "\"/>\n";
    s += fmt("<text x=\"%.0f\" y=\"%.1f\">", w - kRight + 40, ly + 2) + series[k] + "</text>\n";
  }
  return s + "</svg>\n";
}

std::string svg_time_vs_tokens(const BenchReport& rep) {
  std::vector<PlotSeries> series;
  // A series per strategy, and per precision mode where the run timed several.
  bool modes = false;
  for (const BenchRecord& r : rep.records) modes = modes || r.precision != rep.records.front().precision;
  for (const BenchRecord& r : rep.records) {
    if (r.batch != 0 || r.median_ms <= 0) continue;
    const std::string name = modes ? r.strategy + " " + r.precision : r.strategy;
    auto it = std::find_if(series.begin(), series.end(), [&](const PlotSeries& l) { return l.name == name; });
    if (it == series.end()) it = series.insert(series.end(), PlotSeries{name, {}});
    it->points.emplace_back(static_cast<double>(r.tokens), r.median_ms);
  }
  return svg_log_log("median time vs sequence length (log-log)", "tokens T", "ms", std::move(series));
}

}  // namespace hanpu
