// Every CUDA runtime, cuBLAS and NCCL call under kernels/cuda/ and in the
// NCCL collective (parallel/nccl.cc) goes through its check macro
// (base/cuda_check.h, kernels/cuda/check.h, parallel/nccl_check.h), and every `<<<` kernel launch is
// followed at once by VERITY_CUDA_LAUNCH_CHECK. This test reads the sources
// (comments and strings removed), counts what it inspected, and fails on any
// call site or launch without its check. A self-test first proves the scanner
// can fail, on fixtures with unchecked calls.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "base/strings.h"
#include "tests/test_util.h"

namespace verity {
namespace {

struct Scan {
  int calls = 0, launches = 0;
  std::vector<std::string> unchecked;  // "file:line: what"
};

// Comments and string/char literals become spaces (newlines kept, so lines still count).
std::string Strip(const std::string& s) {
  std::string out = s;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 2, "//") == 0) {
      while (i < s.size() && s[i] != '\n') out[i++] = ' ';
    } else if (s.compare(i, 2, "/*") == 0) {
      size_t end = s.find("*/", i + 2);
      end = end == std::string::npos ? s.size() : end + 2;
      for (; i < end; i++)
        if (s[i] != '\n') out[i] = ' ';
    } else if (s[i] == '"' || s[i] == '\'') {
      const char q = s[i++];
      while (i < s.size() && s[i] != q) {
        if (s[i] == '\\') out[i++] = ' ';
        if (i < s.size() && s[i] != '\n') out[i] = ' ';
        i++;
      }
      i++;
    } else {
      i++;
    }
  }
  return out;
}

// The bodies of the check macros themselves (#define VERITY_CUDA_..., with
// continuation lines) are where the checks are made, not call sites.
std::string DropCheckMacroDefinitions(std::string s) {
  static const std::regex def(R"(#\s*define\s+VERITY_(CUDA|CUBLAS|NCCL)_)");
  for (std::smatch m; std::regex_search(s, m, def);) {
    // To the first newline not escaped by a backslash (the directive's end).
    const size_t begin = static_cast<size_t>(m.position(0));
    size_t end = begin;
    while (end < s.size() && !(s[end] == '\n' && s[end - 1] != '\\')) end++;
    for (size_t i = begin; i < end; i++)
      if (s[i] != '\n') s[i] = ' ';
  }
  return s;
}

int LineOf(const std::string& s, size_t pos) {
  return 1 + static_cast<int>(std::count(s.begin(), s.begin() + pos, '\n'));
}

// Returns the text before `pos`, trailing whitespace dropped.
std::string Before(const std::string& s, size_t pos) {
  while (pos > 0 && std::isspace(static_cast<unsigned char>(s[pos - 1]))) pos--;
  return s.substr(0, pos);
}

void ScanSource(const std::string& file, const std::string& source, Scan* out) {
  const std::string s = DropCheckMacroDefinitions(Strip(source));
  // Functions that only format an error (they cannot fail) are not call sites.
  static const std::set<std::string> kFormatters = {"cudaGetErrorString",    "cudaGetErrorName",
                                                    "cublasGetStatusString", "cublasGetStatusName",
                                                    "ncclGetErrorString",    "ncclGetLastError"};
  static const std::regex call(R"(\b(cuda|cublas|nccl)[A-Z]\w*\s*\()");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), call); it != std::sregex_iterator(); ++it) {
    std::string name = it->str(0);
    name = name.substr(0, name.find_first_of(" \t\n("));
    if (kFormatters.count(name)) continue;
    out->calls++;
    const std::string family = it->str(1) == "cuda" ? "CUDA" : it->str(1) == "cublas" ? "CUBLAS" : "NCCL";
    const std::string before = Before(s, static_cast<size_t>(it->position(0)));
    if (!EndsWith(before, "VERITY_" + family + "_CALL(") && !EndsWith(before, "VERITY_" + family + "_CALL_LOG("))
      out->unchecked.push_back(file + ":" + std::to_string(LineOf(s, it->position(0))) + ": " + name +
                               " outside VERITY_" + family + "_CALL");
  }
  for (size_t at = s.find("<<<"); at != std::string::npos; at = s.find("<<<", at + 3)) {
    out->launches++;
    // The launch's argument list: from the '(' after ">>>" to its matching ')'.
    size_t i = s.find(">>>", at);
    i = i == std::string::npos ? s.size() : s.find('(', i);
    int depth = 0;
    for (; i < s.size(); i++) {
      if (s[i] == '(') depth++;
      if (s[i] == ')' && --depth == 0) break;
    }
    size_t j = i + 1;
    while (j < s.size() && std::isspace(static_cast<unsigned char>(s[j]))) j++;
    bool ok = j < s.size() && s[j] == ';';
    for (j++; ok && j < s.size() && std::isspace(static_cast<unsigned char>(s[j]));) j++;
    ok = ok && s.compare(j, 25, "VERITY_CUDA_LAUNCH_CHECK(") == 0;
    if (!ok)
      out->unchecked.push_back(file + ":" + std::to_string(LineOf(s, at)) +
                               ": kernel launch not followed by VERITY_CUDA_LAUNCH_CHECK");
  }
}

TEST(CudaChecks, ScannerFindsUncheckedCallsAndLaunches) {
  Scan bad;
  ScanSource("fixture.cu",
             "Status F() {\n"
             "  cudaMemcpy(d, h, n, cudaMemcpyHostToDevice);\n"  // bare call
             "  const cudaError_t e = cudaGetLastError();\n"     // assigned, not checked by the macro
             "  VERITY_CUBLAS_CALL(cudaMalloc(&p, n), ctx);\n"   // the wrong family's macro
             "  cublasSgemv(h, CUBLAS_OP_T, 1, 1, &a, w, 1, x, 1, &b, y, 1);\n"
             "  ncclAllReduce(a, b, n, ncclFloat, ncclSum, comm, s);\n"
             "  Kernel<<<grid, block, 0, s>>>(out, in);\n"  // launch without its check
             "  return OkStatus();\n"
             "}\n",
             &bad);
  EXPECT_EQ(bad.calls, 5);
  EXPECT_EQ(bad.launches, 1);
  ASSERT_EQ(bad.unchecked.size(), 6u);
  EXPECT_NE(bad.unchecked[0].find("fixture.cu:2: cudaMemcpy outside VERITY_CUDA_CALL"), std::string::npos);
  EXPECT_NE(bad.unchecked[5].find("fixture.cu:7: kernel launch not followed"), std::string::npos);

  Scan good;
  ScanSource("fixture.cu",
             "// cudaFree(p); in a comment is no call\n"
             "Status F() {\n"
             "  VERITY_CUDA_CALL(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice), \"cudaMemcpy(x)\");\n"
             "  VERITY_CUDA_CALL_LOG(cudaFree(p), ctx);\n"
             "  VERITY_CUBLAS_CALL(\n      cublasSgemv(h, CUBLAS_OP_T, 1, 1, &a, w, 1, x, 1, &b, y, 1), ctx);\n"
             "  Kernel<T><<<Grid(p), Block(p), 0, s>>>(f(a), b);\n"
             "  VERITY_CUDA_LAUNCH_CHECK(p.kernel, ctx);\n"
             "  return Status::Error(cudaGetErrorString(e));\n"
             "}\n",
             &good);
  EXPECT_EQ(good.calls, 3);
  EXPECT_EQ(good.launches, 1);
  EXPECT_TRUE(good.unchecked.empty()) << good.unchecked[0];
}

TEST(CudaChecks, EveryCudaAndNcclCallAndLaunchIsChecked) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(test::SourceDir());
  Scan scan;
  int files = 0;
  auto scan_file = [&](const fs::path& p) {
    ScanSource(fs::relative(p, root).string(), test::ReadFile(p.string()), &scan);
    files++;
  };
  // The CUDA backend: every source file.
  for (const auto& e : fs::directory_iterator(root / "kernels" / "cuda")) {
    const std::string ext = e.path().extension().string();
    if (ext == ".cu" || ext == ".cc" || ext == ".h" || ext == ".cuh") scan_file(e.path());
  }
  // The NCCL collective and the shared CUDA check (the code outside
  // kernels/cuda/ that calls CUDA or NCCL).
  for (const char* f : {"base/cuda_check.h", "parallel/nccl.cc", "parallel/nccl_check.h"}) scan_file(root / f);
  std::string list;
  for (const auto& u : scan.unchecked) list += "\n  " + u;
  std::printf("cuda checks: %d call sites, %d launches, %zu unchecked (%d files)%s\n", scan.calls, scan.launches,
              scan.unchecked.size(), files, list.c_str());
  EXPECT_GE(files, 8);
  EXPECT_GT(scan.calls, 0);
  EXPECT_GT(scan.launches, 0);
  EXPECT_TRUE(scan.unchecked.empty()) << list;
}

}  // namespace
}  // namespace verity
