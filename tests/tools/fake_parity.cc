// A parity-protocol command with a chosen result, for testing the gate:
//   fake_parity [--top1 X] [--kl X] [--sha HEX] [--all-sha HEX] [--exit N] [--silent] [--touch FILE]
//               [--build ID] [--artifact HEX] [--no-build] [--mode M] [--nan]
//               [--depths N] [--window N] [--positions N] [--tokens T] [--deepest D]
//               [--deep-top1 X] [--deep-kl X] [--deep-depths N] [--deep-window N]
//               [--dtype D] [--no-dtype]
// prints one verity.parity/1 object (unless --silent) and exits with --exit (default 0).
// Defaults: 7 depths spread up to --deepest (= --tokens, 512), window 8, each
// depth with positions = window, mode standard, build "fake-build" with
// artifact 64 'a' (what fake_bench prints by default, so the two bind), dtype f32.
// With VERITY_PARITY_MODE=deep: mode deep, --deep-depths (14) depths,
// --deep-window (16), and --deep-top1/--deep-kl when given.
// --top1/--kl go to the last (worst) depth. --nan prints the second depth's
// mean_kl as null and changes nothing else (ok, worst, exit): a producer that
// let std::max drop the NaN, so the gate's own check is what gets tested.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

struct Args {
  double top1 = 1.0, kl = 0.0, deep_top1 = -1, deep_kl = -1;
  int code = 0, depths = 7, window = 8, positions = -1, tokens = 512, deepest = -1;
  int deep_depths = 14, deep_window = 16;
  bool silent = false, no_build = false, nan = false;
  std::string sha = std::string(64, 'b'), all_sha = std::string(64, 'c'), touch, mode;
  std::string build = "fake-build", artifact = std::string(64, 'a'), dtype = "f32";
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i++) {
    std::string f = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    auto num = [&] { return std::atoi(next().c_str()); };
    if (f == "--top1") a.top1 = std::atof(next().c_str());
    else if (f == "--kl") a.kl = std::atof(next().c_str());
    else if (f == "--deep-top1") a.deep_top1 = std::atof(next().c_str());
    else if (f == "--deep-kl") a.deep_kl = std::atof(next().c_str());
    else if (f == "--sha") a.sha = next();
    else if (f == "--all-sha") a.all_sha = next();
    else if (f == "--exit") a.code = num();
    else if (f == "--silent") a.silent = true;
    else if (f == "--touch") a.touch = next();
    else if (f == "--build") a.build = next();
    else if (f == "--artifact") a.artifact = next();
    else if (f == "--no-build") a.no_build = true;
    else if (f == "--mode") a.mode = next();
    else if (f == "--dtype") a.dtype = next();
    else if (f == "--no-dtype") a.dtype.clear();
    else if (f == "--nan") a.nan = true;
    else if (f == "--depths") a.depths = num();
    else if (f == "--window") a.window = num();
    else if (f == "--positions") a.positions = num();
    else if (f == "--tokens") a.tokens = num();
    else if (f == "--deepest") a.deepest = num();
    else if (f == "--deep-depths") a.deep_depths = num();
    else if (f == "--deep-window") a.deep_window = num();
  }
  return a;
}

std::string Num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// The depths array: n entries spread up to `deepest`, all clean but the last (worst) one.
std::string Depths(const Args& a, int n, int window, double top1, double kl) {
  const int deepest = a.deepest > 0 ? a.deepest : a.tokens;
  const int positions = a.positions >= 0 ? a.positions : window;
  std::string out;
  char buf[256];
  for (int i = 1; i <= n; i++) {
    const int depth = i == n ? deepest : std::max(1, i * deepest / n);
    const bool last = i == n;
    const std::string mean = a.nan && i == 2 ? "null" : (last ? Num(kl) : "0");
    std::snprintf(buf, sizeof buf, "%s{\"depth\":%d,\"positions\":%d,\"top1\":%g,\"mean_kl\":%s,\"max_kl\":%g}",
                  i > 1 ? "," : "", depth, positions, last ? top1 : 1.0, mean.c_str(), last ? kl * 2 : 0.0);
    out += buf;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = Parse(argc, argv);
  if (!a.touch.empty()) std::ofstream(a.touch, std::ios::app) << "ran\n";
  const char* env = std::getenv("VERITY_PARITY_MODE");  // a test tool, outside the product
  const bool deep = env && std::string(env) == "deep";
  double top1 = a.top1, kl = a.kl;
  if (deep) {
    if (a.deep_top1 >= 0) top1 = a.deep_top1;
    if (a.deep_kl >= 0) kl = a.deep_kl;
  }
  if (a.silent) return a.code;
  const int n = deep ? a.deep_depths : a.depths, window = deep ? a.deep_window : a.window;
  const std::string mode = !a.mode.empty() ? a.mode : deep ? "deep" : "standard";
  const bool ok = top1 >= 0.95 && kl <= 0.05;
  const std::string build =
      a.no_build ? "" : ",\"build\":{\"id\":\"" + a.build + "\",\"artifact_sha256\":\"" + a.artifact + "\"}";
  const std::string dtype = a.dtype.empty() ? "" : ",\"dtype\":\"" + a.dtype + "\"";
  std::printf(
      "{\"schema\":\"verity.parity/1\",\"reference\":\"fake\"%s,\"mode\":\"%s\",\"tokens\":%d,\"window\":%d,"
      "\"depths\":[%s],\"worst\":{\"top1\":%g,\"mean_kl\":%s},\"logits_sha256\":\"%s\","
      "\"all_rows_sha256\":\"%s\",\"nonfinite\":[]%s,\"ok\":%s}\n",
      dtype.c_str(), mode.c_str(), a.tokens, window, Depths(a, n, window, top1, kl).c_str(), top1, Num(kl).c_str(),
      a.sha.c_str(), a.all_sha.c_str(), build.c_str(), ok ? "true" : "false");
  return a.code;
}
