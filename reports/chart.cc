// The frontier ladder as a small static SVG: a step line through the counted
// steps of the derived ladder, a dot and label per step; steps that do not
// count stand apart, hollow. Plain SVG 1.1, renders in browsers and on code hosts.
#include <algorithm>
#include <cstdio>

#include "reports/report.h"

namespace verity::reports {
namespace {
std::string Fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}
std::string Escape(const std::string& s) {
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
}  // namespace

std::string LadderSvg(const std::string& title, const std::vector<LadderPoint>& points) {
  const double W = 720, H = 360, left = 80, right = 30, top = 50, bottom = 60;
  double lo = points.empty() ? 0 : points[0].value, hi = lo;
  for (const auto& p : points) lo = std::min(lo, p.value), hi = std::max(hi, p.value);
  if (hi - lo < 1e-9) hi = lo + 1.0;
  const double pad = 0.08 * (hi - lo);
  lo -= pad;
  hi += pad;
  const size_t n = std::max<size_t>(points.size(), 1);
  auto X = [&](size_t i) { return left + (W - left - right) * (n == 1 ? 0.5 : static_cast<double>(i) / (n - 1)); };
  auto Y = [&](double v) { return top + (H - top - bottom) * (1.0 - (v - lo) / (hi - lo)); };
  std::string s;
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"360\" viewBox=\"0 0 720 360\" "
       "font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"720\" height=\"360\" fill=\"#ffffff\"/>\n";
  s += "<text x=\"360\" y=\"28\" text-anchor=\"middle\" font-size=\"15\">" + Escape(title) + "</text>\n";
  // Axes and horizontal grid with 5 labelled ticks.
  s += "<line x1=\"" + Fmt("%.1f", left) + "\" y1=\"" + Fmt("%.1f", H - bottom) + "\" x2=\"" + Fmt("%.1f", W - right) +
       "\" y2=\"" + Fmt("%.1f", H - bottom) + "\" stroke=\"#333\"/>\n";
  s += "<line x1=\"" + Fmt("%.1f", left) + "\" y1=\"" + Fmt("%.1f", top) + "\" x2=\"" + Fmt("%.1f", left) + "\" y2=\"" +
       Fmt("%.1f", H - bottom) + "\" stroke=\"#333\"/>\n";
  for (int t = 0; t <= 4; t++) {
    double v = lo + (hi - lo) * t / 4.0;
    std::string y = Fmt("%.1f", Y(v));
    s += "<line x1=\"" + Fmt("%.1f", left) + "\" y1=\"" + y + "\" x2=\"" + Fmt("%.1f", W - right) + "\" y2=\"" + y +
         "\" stroke=\"#ddd\"/>\n";
    s += "<text x=\"" + Fmt("%.1f", left - 6) + "\" y=\"" + y + "\" text-anchor=\"end\" dominant-baseline=\"middle\">" +
         Fmt("%.1f", v) + "</text>\n";
  }
  // The ladder: horizontal until the next change, then up (or down, after a revert).
  // The ladder joins the points that count; the others stand apart.
  std::string path;
  for (size_t i = 0; i < points.size(); i++) {
    if (!points[i].counted) continue;
    const std::string x = Fmt("%.1f", X(i)), y = Fmt("%.1f", Y(points[i].value));
    if (path.empty()) {
      path += "M ";
      path += x;
      path += " ";
    } else {
      path += " H ";
      path += x;
      path += " V ";
    }
    path += y;
  }
  // After the last counted step the frontier stays where it is.
  if (!path.empty() && !points.back().counted) {
    path += " H ";
    path += Fmt("%.1f", X(points.size() - 1));
  }
  if (!path.empty()) s += "<path d=\"" + path + "\" fill=\"none\" stroke=\"#1f6feb\" stroke-width=\"2\"/>\n";
  for (size_t i = 0; i < points.size(); i++) {
    std::string x = Fmt("%.1f", X(i)), y = Fmt("%.1f", Y(points[i].value));
    s += !points[i].counted
             ? "<circle cx=\"" + x + "\" cy=\"" + y + "\" r=\"4\" fill=\"#ffffff\" stroke=\"#999\" stroke-width=\"1.5\"/>\n"
             : "<circle cx=\"" + x + "\" cy=\"" + y + "\" r=\"4\" fill=\"#1f6feb\"/>\n";
    s += "<text x=\"" + x + "\" y=\"" + Fmt("%.1f", Y(points[i].value) - 10) + "\" text-anchor=\"middle\">" +
         Fmt("%.1f", points[i].value) + "</text>\n";
    s += "<text x=\"" + x + "\" y=\"" + Fmt("%.1f", H - bottom + 18) + "\" text-anchor=\"middle\">" +
         Escape(points[i].label) + "</text>\n";
  }
  s += "<text x=\"360\" y=\"" + Fmt("%.1f", H - 12) + "\" text-anchor=\"middle\" fill=\"#555\">frontier after each "
       "counted step; hollow grey: not counted (a retracted one at the value it claimed)</text>\n";
  s += "</svg>\n";
  return s;
}

}  // namespace verity::reports
