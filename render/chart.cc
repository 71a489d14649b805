// The changelog's charts as small static SVGs (plain SVG 1.1: no scripts, no
// CSS, fixed number formats, so one ledger always gives the same bytes):
//  - the frontier ladder: a step line over the attempts in recording order,
//    the gate band shaded on the frontier's better side, every measured
//    attempt a marker (docs/charts.md says what each mark means);
//  - a series of main's measured medians with its drift change points.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "base/terminal.h"
#include "ledger/format.h"
#include "ledger/score.h"
#include "render/report.h"

namespace verity::reports {
// Controls (which XML 1.0 forbids) and bytes that are not UTF-8 shown as
// their escapes first (base/terminal.h), then the XML specials.
std::string MarkupText(const std::string& raw) {
  const std::string s = terminal::Visible(raw);
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

namespace {

constexpr double kW = 760, kH = 440;                       // the canvas
constexpr double kLeft = 86, kRight = kW - 24, kTop = 62;  // the plot area ...
constexpr double kBottom = kH - 112;                       // ... above the labels and the legend
constexpr const char* kBlue = "#1f6feb";
constexpr const char* kAmber = "#bf6a02";
constexpr const char* kRed = "#cf222e";
constexpr const char* kGrey = "#9a9a9a";
constexpr const char* kGreen = "#2da44e";

std::string N(double v) {  // a coordinate
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}
std::string F(const char* fmt, double v) { return ledger::FormatText(fmt, v); }
// <text> at (x, y) (y is the baseline), with attributes such as text-anchor.
std::string Text(double x, double y, const std::string& text, const std::string& attrs = "") {
  return "<text x=\"" + N(x) + "\" y=\"" + N(y) + "\"" + (attrs.empty() ? "" : " " + attrs) + ">" + MarkupText(text) +
         "</text>\n";
}
std::string Line(double x1, double y1, double x2, double y2, const std::string& attrs) {
  return "<line x1=\"" + N(x1) + "\" y1=\"" + N(y1) + "\" x2=\"" + N(x2) + "\" y2=\"" + N(y2) + "\" " + attrs + "/>\n";
}

// A tick value as text: the fewest decimals the step needs; thousands and up
// with an SI prefix (2.5M rather than 2500000).
std::string TickText(double v, double step, double largest) {
  double scale = 1;
  const char* prefix = "";
  if (largest >= 1e9) scale = 1e9, prefix = "G";
  else if (largest >= 1e6) scale = 1e6, prefix = "M";
  else if (largest >= 1e4) scale = 1e3, prefix = "k";
  const double s = step / scale;
  const int decimals = s >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(s) - 1e-9));
  char b[64];
  std::snprintf(b, sizeof b, "%.*f%s", decimals, v / scale, prefix);
  std::string t = b;
  if (t.rfind("-0", 0) == 0 && t.find_first_not_of("-0.kMG") == std::string::npos) t.erase(0, 1);  // no "-0"
  return t;
}

// The shared frame: background, titles, horizontal grid with round ticks and
// the y axis title. Returns the value -> y mapping's range through lo/hi.
struct Frame {
  double lo = 0, hi = 1;
  double Y(double v) const { return kBottom - (kBottom - kTop) * (v - lo) / (hi - lo); }
};

std::string Open(const std::string& title, const std::string& subtitle) {
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + N(kW) + "\" height=\"" + N(kH) +
                  "\" viewBox=\"0 0 " + N(kW) + " " + N(kH) + "\" font-family=\"DejaVu Sans, Arial, sans-serif\" " +
                  "font-size=\"12\">\n";
  s += "<rect width=\"" + N(kW) + "\" height=\"" + N(kH) + "\" fill=\"#ffffff\"/>\n";
  s += Text(kW / 2, 24, title, "text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\"");
  if (!subtitle.empty()) s += Text(kW / 2, 43, subtitle, "text-anchor=\"middle\" font-size=\"12\" fill=\"#555555\"");
  return s;
}

// Grid and y axis over the values in `ys`; sets `f`.
std::string YAxis(const std::vector<double>& ys, const std::string& metric, Frame* f) {
  double lo = ys.empty() ? 0 : *std::min_element(ys.begin(), ys.end());
  double hi = ys.empty() ? 1 : *std::max_element(ys.begin(), ys.end());
  if (hi - lo < 1e-9 * std::max(1.0, std::fabs(hi))) {
    const double d = std::max(std::fabs(hi) * 0.05, 1e-9);
    lo -= d, hi += d;
  }
  const double pad = 0.06 * (hi - lo);
  const std::vector<double> ticks = NiceTicks(lo - pad, hi + pad, 7);
  f->lo = ticks.front();
  f->hi = ticks.back();
  const double step = ticks.size() > 1 ? ticks[1] - ticks[0] : 1.0;
  const double largest = std::max(std::fabs(f->lo), std::fabs(f->hi));
  std::string s;
  for (double t : ticks) {
    s += Line(kLeft, f->Y(t), kRight, f->Y(t), "stroke=\"#e4e4e4\"");
    s += Text(kLeft - 7, f->Y(t) + 4, TickText(t, step, largest), "text-anchor=\"end\" fill=\"#333333\"");
  }
  s += Line(kLeft, kTop, kLeft, kBottom, "stroke=\"#333333\"");
  s += Line(kLeft, kBottom, kRight, kBottom, "stroke=\"#333333\"");
  const std::string unit = MetricUnit(metric);
  const auto dir = ledger::MetricDirection(metric);
  const std::string title = metric + (unit.empty() ? "" : " (" + unit + ")") +
                            (dir ? (*dir ? ", higher is better" : ", lower is better") : "");
  const double cy = (kTop + kBottom) / 2;
  s += "<text x=\"18\" y=\"" + N(cy) + "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " + N(cy) +
       ")\" fill=\"#333333\">" + MarkupText(title) + "</text>\n";
  return s;
}

// The x position of slot i of n, each slot as wide as the plot allows.
double SlotX(size_t i, size_t n) {
  return kLeft + (kRight - kLeft) * (static_cast<double>(i) + 0.5) / std::max<size_t>(n, 1);
}

// Labels under the slots; with many slots, every k-th.
std::string XLabels(const std::vector<std::string>& labels, const std::string& axis_title) {
  std::string s;
  const size_t n = labels.size();
  const size_t every = std::max<size_t>(1, (n + 23) / 24);
  for (size_t i = 0; i < n; i += every) {
    s += Line(SlotX(i, n), kBottom, SlotX(i, n), kBottom + 4, "stroke=\"#333333\"");
    s += Text(SlotX(i, n), kBottom + 17, labels[i], "text-anchor=\"middle\" fill=\"#333333\"");
  }
  s += Text((kLeft + kRight) / 2, kBottom + 36, axis_title, "text-anchor=\"middle\" fill=\"#555555\"");
  return s;
}

std::string Glyph(Mark m, double x, double y, const char* colour) {
  switch (m) {
    case Mark::kAccepted: return "<circle cx=\"" + N(x) + "\" cy=\"" + N(y) + "\" r=\"5\" fill=\"" + colour + "\"/>\n";
    case Mark::kParked:
      return "<circle cx=\"" + N(x) + "\" cy=\"" + N(y) + "\" r=\"5\" fill=\"#ffffff\" stroke=\"" + colour +
             "\" stroke-width=\"1.8\"/>\n";
    case Mark::kNotBanked:
      return "<rect x=\"" + N(x - 4.5) + "\" y=\"" + N(y - 4.5) +
             "\" width=\"9\" height=\"9\" fill=\"#ffffff\" stroke=\"" + colour + "\" stroke-width=\"1.8\"/>\n";
    case Mark::kRejectedParity:
      return Line(x - 5, y - 5, x + 5, y + 5, "stroke=\"" + std::string(colour) + "\" stroke-width=\"2.2\"") +
             Line(x - 5, y + 5, x + 5, y - 5, "stroke=\"" + std::string(colour) + "\" stroke-width=\"2.2\"");
  }
  return "";
}
const char* MarkColour(Mark m) {
  switch (m) {
    case Mark::kAccepted:
    case Mark::kParked: return kBlue;
    case Mark::kNotBanked: return kAmber;
    case Mark::kRejectedParity: return kRed;
  }
  return kBlue;
}

// A legend laid out left to right from kLeft, wrapping to a new row before the
// plot's right edge; each item is a glyph drawn at (x, baseline) and its text.
class Legend {
 public:
  explicit Legend(double first_row) : y_(first_row) {}
  void Add(const std::function<std::string(double x, double y)>& glyph, double glyph_w, const std::string& text,
           const std::string& attrs = "") {
    const double w = glyph_w + 6 + 6.0 * static_cast<double>(text.size());  // DejaVu Sans 12px: about 6 px a character
    if (x_ > kLeft && x_ + w > kRight) x_ = kLeft, y_ += 22;
    svg_ += glyph(x_, y_) + Text(x_ + glyph_w + 6, y_, text, attrs);
    x_ += w + 22;
  }
  const std::string& svg() const { return svg_; }

 private:
  double x_ = kLeft, y_;
  std::string svg_;
};

}  // namespace

std::string MetricUnit(const std::string& metric) {
  auto ends = [&](const char* s) {
    const std::string t = s;
    return metric.size() >= t.size() && metric.compare(metric.size() - t.size(), t.size(), t) == 0;
  };
  // Longest suffixes first: "_tok_s" and "_gb_s" also end in "_s".
  static const std::pair<const char*, const char*> kUnits[] = {
      {"_tok_s", "tok/s"}, {"_per_s", "1/s"}, {"_gb_s", "GB/s"},   {"_gflops", "GFLOP/s"}, {"_tflops", "TFLOP/s"},
      {"_mb", "MiB"},      {"_gb", "GiB"},    {"_bytes", "bytes"}, {"_ms", "ms"},          {"_us", "us"},
      {"_ns", "ns"},       {"_seconds", "s"}, {"_s", "s"}};
  for (const auto& [suffix, unit] : kUnits)
    if (ends(suffix)) return unit;
  return "";
}

std::vector<double> NiceTicks(double lo, double hi, int max_ticks) {
  max_ticks = std::max(max_ticks, 2);
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / (max_ticks - 1);
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 0;
  long long first = 0, last = 0;
  for (int tries = 0; step == 0 && tries < 4; tries++, mag *= 10)
    for (double m : {1.0, 2.0, 5.0}) {
      const double s = m * mag;
      const long long a = static_cast<long long>(std::floor(lo / s + 1e-9));
      const long long b = static_cast<long long>(std::ceil(hi / s - 1e-9));
      if (b - a + 1 <= max_ticks) {
        step = s, first = a, last = b;
        break;
      }
    }
  std::vector<double> out;
  for (long long k = first; k <= last; k++) out.push_back(static_cast<double>(k) * step);
  if (out.size() < 2) out.push_back(static_cast<double>(last + 1) * step);
  return out;
}

namespace {

using Corners = std::vector<std::pair<double, double>>;  // (x, frontier) corners of one drawn stretch

// The gate's edge: what the next attempt must clear, on the better side.
struct Gate {
  bool higher = true;
  double frac = 0.0;
  double Edge(double f) const { return higher ? f * (1 + frac) : f / (1 + frac); }
};

// What the y axis must show: the frontier and its gate edge, the seeds and the markers.
std::vector<double> LadderValues(const LadderChart& c, const Gate& gate) {
  std::vector<double> ys;
  for (const auto& s : c.slots) {
    if (s.frontier) ys.insert(ys.end(), {*s.frontier, gate.Edge(*s.frontier)});
    if (s.seeded_from) ys.insert(ys.end(), {*s.seeded_from, gate.Edge(*s.seeded_from)});
    if (s.value) ys.push_back(*s.value);
  }
  return ys;
}

// The frontier's corners: it starts at the attempt that seeded it, moves at
// each attempt that moved it, and holds to the right edge.
std::vector<Corners> FrontierStretches(const LadderChart& c) {
  const size_t n = c.slots.size();
  const double half = (kRight - kLeft) / std::max<size_t>(n, 1) / 2;
  std::vector<Corners> stretches;
  Corners cur;
  for (size_t i = 0; i < n; i++) {
    const LadderSlot& s = c.slots[i];
    const double x = SlotX(i, n);
    if (!s.frontier) {  // every counted step retracted: the line breaks until something seeds again
      if (!cur.empty()) cur.push_back({x - half, cur.back().second}), stretches.push_back(cur), cur.clear();
      continue;
    }
    if (cur.empty()) cur.push_back({s.seeded_from ? x - half : x, s.seeded_from.value_or(*s.frontier)});
    if (*s.frontier != cur.back().second) cur.push_back({x, cur.back().second}), cur.push_back({x, *s.frontier});
  }
  if (!cur.empty()) cur.push_back({kRight, cur.back().second}), stretches.push_back(cur);
  return stretches;
}

// Each stretch's gate band, then the frontier line over it.
std::string FrontierPaths(const std::vector<Corners>& stretches, const Frame& f, const Gate& gate) {
  std::string svg;
  for (const auto& r : stretches) {
    if (r.size() < 2) continue;
    std::string band, line;
    for (const auto& [x, v] : r) band += (band.empty() ? "M " : " L ") + N(x) + " " + N(f.Y(v));
    for (auto it = r.rbegin(); it != r.rend(); ++it) band += " L " + N(it->first) + " " + N(f.Y(gate.Edge(it->second)));
    svg += "<path d=\"" + band + " Z\" fill=\"" + std::string(kGreen) + "\" fill-opacity=\"0.16\" stroke=\"none\"/>\n";
    for (size_t k = 0; k < r.size(); k++) line += (k ? " L " : "M ") + N(r[k].first) + " " + N(f.Y(r[k].second));
    svg += "<path d=\"" + line + "\" fill=\"none\" stroke=\"" + std::string(kBlue) + "\" stroke-width=\"2.2\"/>\n";
  }
  return svg;
}

// The markers, and beside each what it measured.
std::string LadderMarkers(const LadderChart& c, const Frame& f, bool higher) {
  std::string svg;
  const size_t n = c.slots.size();
  for (size_t i = 0; i < n; i++) {
    const LadderSlot& s = c.slots[i];
    if (!s.value) continue;
    const double x = SlotX(i, n), y = f.Y(*s.value);
    svg += Glyph(s.mark, x, y, s.retracted ? kGrey : MarkColour(s.mark));
    if (!s.note.empty()) {
      // Centred over the marker, kept inside the plot at either edge.
      const double w = 6.2 * static_cast<double>(s.note.size());
      const double tx = std::clamp(x, kLeft + w / 2 + 2, kRight - w / 2 - 2);
      // On the better side: the frontier line reaches an accepted marker from the worse side.
      svg += Text(
          tx, higher ? y - 9 : y + 18, s.note,
          std::string("text-anchor=\"middle\" font-size=\"11\" fill=\"") + (s.retracted ? kGrey : "#444444") + "\"");
    }
  }
  return svg;
}

std::vector<std::string> SlotLabels(const LadderChart& c) {
  std::vector<std::string> labels;
  for (const LadderSlot& s : c.slots) labels.push_back(s.label);
  return labels;
}

std::string LadderLegend(const LadderChart& c, bool higher) {
  Legend legend(kH - 46);
  legend.Add(
      [](double x, double y) {
        return Line(x, y - 4, x + 22, y - 4, "stroke=\"" + std::string(kBlue) + "\" stroke-width=\"2.2\"");
      },
      22, "frontier");
  legend.Add(
      [](double x, double y) {
        return "<rect x=\"" + N(x) + "\" y=\"" + N(y - 11) + "\" width=\"22\" height=\"12\" fill=\"" + kGreen +
               "\" fill-opacity=\"0.16\"/>\n";
      },
      22, "gate band: " + F("%g%%", 100 * c.gate_frac) + " of the frontier, " + (higher ? "above" : "below") + " it");
  legend.Add([](double x, double y) { return Glyph(Mark::kAccepted, x + 5, y - 4, kBlue); }, 10, "accepted");
  legend.Add([](double x, double y) { return Glyph(Mark::kParked, x + 5, y - 4, kBlue); }, 10,
             "parked (none) or refused");
  legend.Add([](double x, double y) { return Glyph(Mark::kNotBanked, x + 5, y - 4, kAmber); }, 10,
             "above the gate, not banked");
  legend.Add([](double x, double y) { return Glyph(Mark::kRejectedParity, x + 5, y - 4, kRed); }, 10,
             "failed parity (at the frontier it faced)");
  legend.Add([](double x, double y) { return Glyph(Mark::kAccepted, x + 5, y - 4, kGrey); }, 10, "retracted",
             "fill=\"#666666\"");
  return legend.svg();
}

}  // namespace

std::string LadderSvg(const LadderChart& c) {
  const Gate gate{ledger::HigherIsBetter(c.metric), c.gate_frac};
  Frame f;
  std::string svg = Open(c.title, c.subtitle);
  svg += YAxis(LadderValues(c, gate), c.metric, &f);
  svg += FrontierPaths(FrontierStretches(c), f, gate);
  svg += LadderMarkers(c, f, gate.higher);
  svg += XLabels(SlotLabels(c), "attempts in recording order (change id)");
  svg += LadderLegend(c, gate.higher);
  svg += "</svg>\n";
  return svg;
}

std::string SeriesSvg(const SeriesChart& c) {
  const size_t n = c.points.size();
  std::vector<double> ys;
  for (const auto& p : c.points) ys.push_back(p.value);
  Frame f;
  std::string svg = Open(c.title, c.subtitle);
  svg += YAxis(ys, c.metric, &f);
  // Segment medians, then the change points between them.
  std::vector<int> edges = {0};
  for (const auto& b : c.breaks) edges.push_back(b.index);
  edges.push_back(static_cast<int>(n));
  const double half = (kRight - kLeft) / std::max<size_t>(n, 1) / 2;
  for (size_t k = 0; k + 1 < edges.size() && !c.breaks.empty(); k++) {
    const double m = k < c.breaks.size() ? c.breaks[k].before : c.breaks.back().after;
    svg += Line(SlotX(edges[k], n) - half, f.Y(m), SlotX(edges[k + 1] - 1, n) + half, f.Y(m),
                "stroke=\"" + std::string(kGreen) + "\" stroke-width=\"2.5\" stroke-opacity=\"0.8\"");
  }
  for (size_t k = 0; k < c.breaks.size(); k++) {
    const auto& b = c.breaks[k];
    const double x = SlotX(b.index, n) - half;
    svg +=
        Line(x, kTop, x, kBottom, "stroke=\"" + std::string(kRed) + "\" stroke-width=\"1.6\" stroke-dasharray=\"6 4\"");
    const double step = b.after / b.before - 1.0;
    svg += Text(x + 5, kTop + 14 + 15 * static_cast<double>(k % 2),
                F("%+.2f%% step", 100 * step) + " (" + F("%.4g", b.before) + " to " + F("%.4g", b.after) + ")",
                std::string("fill=\"") + kRed + "\" font-size=\"11\"");
  }
  std::vector<std::string> labels;
  for (size_t i = 0; i < n; i++) {
    const auto& p = c.points[i];
    labels.push_back(p.label);
    svg += "<circle cx=\"" + N(SlotX(i, n)) + "\" cy=\"" + N(f.Y(p.value)) + "\" r=\"3.8\" fill=\"" +
           (p.head ? kBlue : "#57606a") + "\"/>\n";
  }
  svg += XLabels(labels, "measurements of main in recording order (run)");
  const double r1 = kH - 46;
  double x = kLeft;
  svg += "<circle cx=\"" + N(x + 6) + "\" cy=\"" + N(r1 - 4) + "\" r=\"3.8\" fill=\"#57606a\"/>\n" +
         Text(x + 16, r1, "base of a run");
  x += 120;
  svg += "<circle cx=\"" + N(x + 6) + "\" cy=\"" + N(r1 - 4) + "\" r=\"3.8\" fill=\"" + kBlue + "\"/>\n" +
         Text(x + 16, r1, "head of an accepted change");
  x += 200;
  svg += Line(x, r1 - 4, x + 22, r1 - 4, "stroke=\"" + std::string(kGreen) + "\" stroke-width=\"2.5\"") +
         Text(x + 28, r1, "segment median");
  x += 134;
  svg += Line(x + 6, r1 - 13, x + 6, r1 + 3,
              "stroke=\"" + std::string(kRed) + "\" stroke-width=\"1.6\" stroke-dasharray=\"4 3\"") +
         Text(x + 16, r1, "change point");
  const std::string points = std::to_string(n) + " point" + (n == 1 ? "" : "s");
  const std::string summary =
      !c.breaks.empty()
          ? std::to_string(c.breaks.size()) + " change point" + (c.breaks.size() == 1 ? "" : "s") + " in " + points
      : static_cast<int>(n) < c.min_points
          ? points + ": too few to test for a change point (it takes " + std::to_string(c.min_points) + ")"
          : "no change point in " + points;
  svg += Text(kLeft, kH - 22, summary, "fill=\"#555555\"");
  svg += "</svg>\n";
  return svg;
}

}  // namespace verity::reports
