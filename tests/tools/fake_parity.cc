// A parity-protocol command with a chosen result, for testing the gate:
//   fake_parity [--top1 X] [--kl X] [--sha HEX] [--exit N] [--silent] [--touch FILE]
// prints one verity.parity/1 object (unless --silent) and exits with --exit (default 0).
// With VERITY_PARITY_MODE=deep it uses --deep-top1/--deep-kl when given.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  double top1 = 1.0, kl = 0.0, deep_top1 = -1, deep_kl = -1;
  int code = 0;
  bool silent = false;
  std::string sha(64, 'b'), touch;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--top1") top1 = std::atof(next().c_str());
    else if (a == "--kl") kl = std::atof(next().c_str());
    else if (a == "--deep-top1") deep_top1 = std::atof(next().c_str());
    else if (a == "--deep-kl") deep_kl = std::atof(next().c_str());
    else if (a == "--sha") sha = next();
    else if (a == "--exit") code = std::atoi(next().c_str());
    else if (a == "--silent") silent = true;
    else if (a == "--touch") touch = next();
  }
  if (!touch.empty()) std::ofstream(touch, std::ios::app) << "ran\n";
  const char* mode = std::getenv("VERITY_PARITY_MODE");  // a test tool, outside the product
  if (mode && std::string(mode) == "deep") {
    if (deep_top1 >= 0) top1 = deep_top1;
    if (deep_kl >= 0) kl = deep_kl;
  }
  if (silent) return code;
  bool ok = top1 >= 0.95 && kl <= 0.05;
  std::printf("{\"schema\":\"verity.parity/1\",\"reference\":\"fake\",\"depths\":[{\"depth\":1,\"top1\":1.0,"
              "\"mean_kl\":0.0,\"max_kl\":0.0},{\"depth\":64,\"top1\":%g,\"mean_kl\":%g,\"max_kl\":%g}],"
              "\"worst\":{\"top1\":%g,\"mean_kl\":%g},\"logits_sha256\":\"%s\",\"ok\":%s}\n",
              top1, kl, kl * 2, top1, kl, sha.c_str(), ok ? "true" : "false");
  return code;
}
