// What the tests that drive llama.cpp's peer share: the check that the peer
// was built, and the small synthetic Llama they run it on. Include after
// defining LLAMA_PEER_BIN and LLAMA_PEER_MISSING (tests/CMakeLists.txt).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tests/test_util.h"

namespace verity::test {

// Issue 10's ~110M model in miniature: GQA, an unshared classifier, rows of
// 256 or 768 weights, so q8_0 has whole blocks and llama.cpp's k-quant files
// hold k-quants (stories260K's rows of 64 make it fall back to other types).
inline constexpr const char* kPeerSynthConfig =
    R"({"dim":256,"hidden_dim":768,"n_layers":4,"n_heads":8,"n_kv_heads":4,"vocab_size":512,"seq_len":256,"shared_classifier":false})";

// That synth, written by this build's verity as an F32 GGUF in `dir`.
inline std::string PeerSynthF32Gguf(const std::string& dir) {
  for (const std::string& cmd :
       {VerityBin() + " synth --out " + dir + "/synth.bin --config '" + kPeerSynthConfig + "'",
        VerityBin() + " convert --to gguf --model " + dir + "/synth.bin --out " + dir + "/synth.gguf --dtype f32"}) {
    auto r = Shell(cmd);
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.err;
  }
  return dir + "/synth.gguf";
}

}  // namespace verity::test

// The harness, or a failure saying what is missing.
#define REQUIRE_PEER()                                            \
  do {                                                            \
    if (std::string(LLAMA_PEER_BIN).empty())                      \
      FAIL() << "llama.cpp peer missing (" LLAMA_PEER_MISSING     \
                "): run scripts/setup.sh (npm ci in tests/npm), " \
                "then reconfigure the build";                     \
  } while (0)
