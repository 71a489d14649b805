// The CUDA backend. CudaBackend.*: on any machine, `--backend cuda` without a
// usable device (or in a build without CUDA) fails with exit 1 and a clear
// message. CudaDevice.*: on a GPU only (scripts/device-check.sh runs them and
// fails if any is skipped): every kernel against the CPU reference, attention
// past 64k positions, windows and Gemma's steps, the forward pass of every
// family, and a failure turning into an error.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/slots.h"
#include "tests/float_values.h"
#include "kernels/cpu/backends.h"
#include "kernels/cpu/simd.h"
#include "kernels/kernels.h"
#include "tests/test_util.h"

#if defined(VERITY_HAVE_CUDA)
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/kernel_profile.h"
#include "kernels/cuda/launch_plan.h"
#include "kernels/cuda/q8_layout.h"
#include "kernels/cuda/block_rows.h"
#include "kernels/cuda/kquant_layout.h"
#include "kernels/cuda/model_copies.h"
#include "kernels/cuda/q8_upload.h"
#include "engine/weights.h"
#include "formats/quantize.h"
#include "kernels/cuda/rows.h"
#endif

namespace verity {
namespace {

TEST(CudaBackend, WithoutADeviceTheCommandsExitOneWithAClearMessage) {
  auto made = kernels::MakeBackend("cuda");
  if (made.ok()) GTEST_SKIP() << "a CUDA device is present: the CudaDevice tests cover it";
  const std::string why = made.status().message();
#if defined(VERITY_HAVE_CUDA)
  EXPECT_TRUE(why.find("no usable CUDA device") != std::string::npos ||
              why.find("no CUDA device found") != std::string::npos)
      << why;
#else
  EXPECT_NE(why.find("built without CUDA"), std::string::npos) << why;
#endif
  const std::string m = test::Model("stories260K.bin");
  const std::string cmds[] = {
      " generate --model " + m + " --tokenizer " + test::Model("tok512.bin") + " --steps 8 --backend cuda",
      " logits --model " + m + " --ids 1,2,3 --out " + test::TempDir("cuda") + "/l.bin --backend cuda",
      " bench --model " + m + " --steps 8 --backend cuda --min-seconds 0", " parity --model " + m + " --backend cuda"};
  for (const std::string& c : cmds) {
    auto r = test::Shell(test::VerityBin() + c);
    EXPECT_EQ(r.exit_code, 1) << c << "\n" << r.err;  // 1: an error, never a signal
    EXPECT_NE(r.err.find("verity: error: "), std::string::npos) << c << "\n" << r.err;
    EXPECT_NE(r.err.find("--backend cuda: "), std::string::npos) << c << "\n" << r.err;
    EXPECT_EQ(r.out, "") << c;
  }
  std::printf("cuda backend: %zu commands refused without a device: %s\n", std::size(cmds), why.c_str());
}

// The verity binary links no CUDA, cuBLAS or NCCL library: those live in the
// run-time plugins it dlopens on demand (docs/cuda.md), so CPU runs never pay
// their ~150 MiB of resident memory.
TEST(CudaPlugin, VerityLinksNoCudaOrNcclLibrary) {
  auto r = test::Shell("ldd " + test::VerityBin());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int libraries = 0, cuda = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("=>") == std::string::npos) continue;
    libraries++;
    std::string lower = line;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.find("cuda") != std::string::npos || lower.find("cublas") != std::string::npos ||
        lower.find("nccl") != std::string::npos) {
      cuda++;
      ADD_FAILURE() << "verity links " << line;
    }
  }
  std::printf("cuda plugin: ldd verity: %d shared libraries checked, %d CUDA/cuBLAS/NCCL\n", libraries, cuda);
  EXPECT_GT(libraries, 3);  // the check read a real ldd listing (libstdc++, libc, sqlite, ...)
}

// Runs `verity generate --backend cuda` with VERITY_PLUGIN_DIR=dir.
test::CommandResult GenerateWithPluginDir(const std::string& dir) {
  return test::Shell("VERITY_PLUGIN_DIR=" + dir + " " + test::VerityBin() + " generate --model " +
                     test::Model("stories260K.bin") + " --tokenizer " + test::Model("tok512.bin") +
                     " --steps 8 --backend cuda");
}

TEST(CudaPlugin, AMissingPluginIsANamedErrorNotACrash) {
  const std::string empty = test::TempDir("cuda-plugin-missing");
  auto r = GenerateWithPluginDir(empty);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "");
#if defined(VERITY_HAVE_CUDA)
  EXPECT_NE(r.err.find("verity: error: --backend cuda: plugin libverity_cuda.so not found (VERITY_PLUGIN_DIR=" + empty +
                       "): tried " + empty + "/libverity_cuda.so"),
            std::string::npos)
      << r.err;
#else
  EXPECT_NE(r.err.find("built without CUDA"), std::string::npos) << r.err;
#endif
  std::printf("cuda plugin: missing plugin refused: %s", r.err.c_str());
}

TEST(CudaPlugin, AnUnloadablePluginNamesTheFileAndDlerror) {
#if !defined(VERITY_HAVE_CUDA)
  GTEST_SKIP() << "built without CUDA: no plugin is ever loaded (AMissingPlugin checks the refusal)";
#endif
  const std::string dir = test::TempDir("cuda-plugin-broken");
  test::WriteFile(dir + "/libverity_cuda.so", "not an ELF shared object\n");
  auto r = GenerateWithPluginDir(dir);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "");
  // dlerror() says why, e.g. "invalid ELF header" or "file too short".
  EXPECT_NE(r.err.find("verity: error: --backend cuda: plugin libverity_cuda.so: dlopen(" + dir +
                       "/libverity_cuda.so) failed: " + dir + "/libverity_cuda.so: "),
            std::string::npos)
      << r.err;
  std::printf("cuda plugin: unloadable plugin refused: %s", r.err.c_str());
}

#if defined(VERITY_HAVE_CUDA)
namespace cu = kernels::cuda;

bool HaveDevice() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}
#define REQUIRE_DEVICE() \
  if (!HaveDevice()) GTEST_SKIP() << "no CUDA device"

// The profile's table (VERITY_CUDA_PROFILE=1; its arithmetic runs without a
// device): a kind's first call and every call that uploaded are set apart,
// the rest make its mean; shares, per-step time and GB/s from the rest.
TEST(CudaProfile, FirstCallsAndUploadsAreSetApart) {
  cu::ProfileTable t;
  EXPECT_EQ(t.Text(0), "");
  for (int layer = 0; layer < 4; layer++) t.Add("matmul rows=8 cols=8 T=32 dtype=bf16", 900.0, 128e6, true);
  for (int layer = 0; layer < 4; layer++) t.Add("matmul rows=8 cols=8 T=32 dtype=bf16", 0.1, 128e6, false);
  t.Add("attention", 5.0, 0, false);  // its first call: apart, uploading nothing
  t.Add("attention", 0.2, 0, false);
  t.Add("attention", 0.4, 0, false);
  const std::string text = t.Text(2);
  std::printf("cuda profile:\n%s", text.c_str());
  auto row = [&](const std::string& label) {
    const size_t at = text.find("| " + label + "\n");
    EXPECT_NE(at, std::string::npos) << label << " in\n" << text;
    const size_t begin = text.rfind("verity: cuda profile:", at);
    return at == std::string::npos ? std::string() : text.substr(begin, at - begin);
  };
  const std::string matmul = row("matmul rows=8 cols=8 T=32 dtype=bf16"), attention = row("attention");
  // calls | us/call | us/step | apart: calls, us/call | MB/call | GB/s
  EXPECT_NE(matmul.find("|       4 |    100.00 |    200.0 |    4,  900000.0 |  128.000 |  1280.0 "), std::string::npos)
      << matmul;
  EXPECT_NE(attention.find("|       2 |    300.00 |    300.0 |    1,    5000.0 |"), std::string::npos) << attention;
  EXPECT_NE(text.find("1.000 ms of device time in 2 kinds of call (and 3605.000 ms apart: first calls and uploads), "
                      "2 steps, decode or batched (500.0 us a step)"),
            std::string::npos)
      << text;
  EXPECT_LT(text.find("| attention\n"), text.find("| matmul"))
      << "the larger share first (the uploads' time is not the matmul's)";
}

// A device copy of a host vector, freed at scope exit.
template <class T>
struct Dev {
  T* p = nullptr;
  size_t n = 0;
  explicit Dev(const std::vector<T>& h) : n(h.size()) {
    EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  explicit Dev(size_t count) : Dev(std::vector<T>(count)) {}
  ~Dev() { cudaFree(p); }
  std::vector<T> Get() const {
    std::vector<T> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) { return RandomNormal(n, seed, scale); }

const cu::DeviceLimits kLim;

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); i++) {
    const double e = std::fabs(static_cast<double>(got[i]) - want[i]) / (1.0 + std::fabs(want[i]));
    ASSERT_TRUE(std::isfinite(got[i])) << what << " [" << i << "]";
    worst = std::max(worst, e);
  }
  std::printf("cuda device: %s: %zu values, worst relative error %.3g\n", what.c_str(), got.size(), worst);
  EXPECT_LE(worst, tol) << what;
}

// out[t * rows + i] = the dot of row i (decoded from its dtype) with x row t,
// summed in double: the exact product the kernels' f32 sums approximate. The
// reference backend sums in f32 one column after another, and at 4096 columns
// that order is itself ~1.2e-4 (relative to 1 + |value|) from the exact sum,
// where the GPU's 32 interleaved lane sums are ~5e-5 from it (measured on an
// H200, 2026-11-30): comparing the two would test the reference's rounding.
std::vector<float> ExactMatmul(const kernels::Weights& w, const std::vector<float>& x, int T) {
  std::vector<float> row(w.cols), out(static_cast<size_t>(T) * w.rows);
  for (int i = 0; i < w.rows; i++) {
    kernels::DecodeRow(w, i, row.data());
    for (int t = 0; t < T; t++) {
      double s = 0;
      for (int j = 0; j < w.cols; j++) s += static_cast<double>(row[j]) * x[static_cast<size_t>(t) * w.cols + j];
      out[static_cast<size_t>(t) * w.rows + i] = static_cast<float>(s);
    }
  }
  return out;
}

// A random [rows x cols] matrix stored as `t`: the host view, and the bytes
// the backend uploads (q8_0 in the device layout of q8_layout.h: quants, then scales).
struct Encoded {
  std::vector<unsigned char> host, device;
  kernels::Weights w;
  Encoded(kernels::DType t, int rows, int cols) : host(kernels::RowBytes(t, cols) * rows) {
    const std::vector<float> wf = Random(static_cast<size_t>(rows) * cols, rows + cols);
    kernels::EncodeF32(t, wf.data(), rows, cols, host.data());
    w = {t, host.data(), rows, cols};
    device = host;
    if (t == kernels::DType::kQ8_0) {  // plain blocks, then the device layout (q8_layout.h)
      std::vector<unsigned char> plain(host.size());
      kernels::UnpackQ8_0Rows(w, plain.data());
      cu::q8::Repack(plain.data(), int64_t{rows} * cols, device.data());
    }
  }
};

// Backend state holding Random(s.floats(), seed); a backend's state brought
// to the host (Download: the wait for every call queued before it).
void FillRandom(kernels::Backend& k, kernels::StateBuffer& s, uint32_t seed) {
  const std::vector<float> v = Random(s.floats(), seed);
  k.Upload(s.data(), v.data(), v.size());
}
std::unique_ptr<kernels::StateBuffer> RandomState(kernels::Backend& k, size_t floats, uint32_t seed) {
  auto s = k.AllocateState(floats);
  FillRandom(k, *s, seed);
  return s;
}
std::vector<float> Downloaded(kernels::Backend& k, kernels::StateBuffer& s) {
  std::vector<float> v(s.floats());
  k.Download(v.data(), s.data(), v.size());
  return v;
}

TEST(CudaDevice, MatvecAndBatchedMatmulMatchTheExactProductForEveryDtype) {
  REQUIRE_DEVICE();
  for (kernels::DType t : {kernels::DType::kF32, kernels::DType::kBF16, kernels::DType::kQ8_0})
    for (auto [rows, cols] : {std::pair{64, 288}, {1000, 4096}, {32000, 64}}) {
      const Encoded e(t, rows, cols);
      const kernels::Weights& w = e.w;
      const std::vector<unsigned char>& device_bytes = e.device;
      const int T = 13;
      const std::vector<float> x = Random(static_cast<size_t>(T) * cols, 9), want = ExactMatmul(w, x, T);
      Dev<unsigned char> dw(device_bytes);
      Dev<float> dx(x), dout(static_cast<size_t>(T) * rows);
      auto plan = cu::PlanMatvec(t, rows, cols, kLim);
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      ASSERT_TRUE(cu::LaunchMatvec(*plan, t, dout.p, dw.p, dx.p, rows, cols, 0, "test").ok());
      std::vector<float> got = dout.Get();
      got.resize(rows);
      ExpectClose(
          got, std::vector<float>(want.begin(), want.begin() + rows), 1e-4,
          std::string("matvec ") + kernels::DTypeName(t) + " " + std::to_string(rows) + "x" + std::to_string(cols));
      auto bplan = cu::PlanMatmulBatch(t, rows, cols, T, kLim);
      ASSERT_TRUE(bplan.ok());
      ASSERT_TRUE(cu::LaunchMatmulBatch(*bplan, t, dout.p, dw.p, dx.p, rows, cols, T, 0, "test").ok());
      ExpectClose(dout.Get(), want, 1e-4, std::string("matmul_batch ") + kernels::DTypeName(t));
    }
}

TEST(CudaDevice, RmsnormRopeSwiGLUArgmaxAndMoeMatchTheReference) {
  REQUIRE_DEVICE();
  const int dim = 4096, hs = 128, rows = 3;
  // RMSNorm (block sum reorders the sum of squares: float rounding).
  std::vector<float> x = Random(static_cast<size_t>(rows) * dim, 1), w = Random(dim, 2), want(x.size());
  for (int r = 0; r < rows; r++) kernels::Rmsnorm(&want[r * dim], &x[r * dim], w.data(), dim, 1e-5f);
  Dev<float> dx(x), dw(w), dout(x.size());
  ASSERT_TRUE(
      cu::LaunchRmsnorm(cu::PlanRmsnorm(rows, dim, kLim).value(), dout.p, dx.p, dw.p, rows, dim, 1e-5f, 0, "t").ok());
  ExpectClose(dout.Get(), want, 1e-5, "rmsnorm");
  // RoPE, both layouts: the same table and unfused products: bit-exact.
  for (bool inter : {true, false}) {
    const int pos = 70001;
    std::vector<float> v = Random(dim, 3), wantv = v, cs(hs);
    std::vector<float> inv_freq(hs / 2);
    kernels::RopeBaseInverseFrequencies(500000.0f, hs, inv_freq.data());
    kernels::RopeReference(wantv.data(), dim, hs, pos, inv_freq.data(), inter);
    for (int i = 0; i < hs / 2; i++) {
      const float val = static_cast<float>(pos) * cu::ew::RopeInvFreq(i, hs, 500000.0f);
      cs[2 * i] = cosf(val);
      cs[2 * i + 1] = sinf(val);
    }
    Dev<float> dv(v), dcs(cs);
    ASSERT_TRUE(cu::LaunchRope(cu::PlanRope(1, dim, hs, kLim).value(), dv.p, dcs.p, 1, dim, hs, inter, 0, "t").ok());
    std::vector<float> got = dv.Get();
    EXPECT_EQ(std::memcmp(got.data(), wantv.data(), dim * sizeof(float)), 0) << "rope interleaved=" << inter;
  }
  // SwiGLU (device expf: within its ulp bound).
  std::vector<float> h = Random(100000, 4, 3.0f), h2 = Random(100000, 5), wanth = h;
  kernels::SwiGLUReference(wanth.data(), h2.data(), static_cast<int>(h.size()));
  Dev<float> dh(h), dh2(h2);
  ASSERT_TRUE(cu::LaunchSwiGLU(cu::PlanSwiGLU(h.size(), kLim).value(), dh.p, dh2.p, h.size(), 0, "t").ok());
  ExpectClose(dh.Get(), wanth, 1e-6, "swiglu");
  // Argmax with ties (the first maximum).
  std::vector<float> logits(128256, 1.0f);
  logits[77777] = logits[99999] = 5.0f;
  Dev<float> dl(logits);
  Dev<int> di(1);
  ASSERT_TRUE(cu::LaunchArgmax(cu::PlanArgmax(logits.size(), kLim).value(), dl.p, logits.size(), di.p, 0, "t").ok());
  EXPECT_EQ(di.Get()[0], 77777);
  // MoE routing: the same choices as the host function, weights to expf's bound.
  const int n = 8, k = 2, tokens = 5;
  std::vector<float> router = Random(static_cast<size_t>(n) * tokens, 6);
  router[3] = router[5];  // a tie
  Dev<float> dr(router), dwts(static_cast<size_t>(k) * tokens);
  Dev<int> dc(static_cast<size_t>(k) * tokens);
  ASSERT_TRUE(
      cu::LaunchMoeTopK(cu::PlanMoeTopK(tokens, n, k, kLim).value(), dr.p, tokens, n, k, dc.p, dwts.p, 0, "t").ok());
  std::vector<int> chosen = dc.Get();
  std::vector<float> weights = dwts.Get(), want_w(weights.size());
  for (int t = 0; t < tokens; t++) {
    std::vector<int> c(k);
    cu::ew::MoeTopK(&router[t * n], n, k, c.data(), &want_w[t * k]);
    for (int j = 0; j < k; j++) EXPECT_EQ(chosen[t * k + j], c[j]) << t;
  }
  ExpectClose(weights, want_w, 1e-6, "moe weights");
}

TEST(CudaDevice, AttentionMatchesTheReferencePast64kPositions) {
  REQUIRE_DEVICE();
  const int heads = 8, kv_heads = 2, hs = 64, kv_dim = kv_heads * hs;
  for (int n : {1, 1025, 65537, 70000}) {
    std::vector<float> q = Random(heads * hs, n), k = Random(static_cast<size_t>(n) * kv_dim, n + 1, 0.3f),
                       v = Random(static_cast<size_t>(n) * kv_dim, n + 2), scores(static_cast<size_t>(heads) * n),
                       want(heads * hs);
    kernels::AttentionArgs a{want.data(), q.data(), k.data(), v.data(), kv_dim, scores.data(),
                             n - 1,       heads,    kv_heads, hs,       n};
    for (int h = 0; h < heads; h++) kernels::AttendOneHead(a, h);
    Dev<float> dq(q), dk(k), dv(v), dout(heads * hs);
    cu::AttentionDeviceArgs d{dout.p, dq.p, dk.p, dv.p, kv_dim, heads * hs, n - 1, 1, heads, kv_heads, hs};
    auto plan = cu::PlanAttention(heads, kv_heads, hs, 1, n, kLim);
    ASSERT_TRUE(plan.ok());
    ASSERT_TRUE(cu::LaunchAttention(*plan, d, 0, "t").ok());
    ExpectClose(dout.Get(), want, 1e-4, "attention decode over " + std::to_string(n) + " positions");
  }
  // A prefill block: queries at positions 100..163, each over its own past.
  const int n = 164, T = 64, pos0 = 100;
  std::vector<float> q = Random(static_cast<size_t>(T) * heads * hs, 1), k = Random(static_cast<size_t>(n) * kv_dim, 2),
                     v = Random(static_cast<size_t>(n) * kv_dim, 3), scores(static_cast<size_t>(heads) * n),
                     want(q.size());
  for (int t = 0; t < T; t++) {
    kernels::AttentionArgs a{&want[t * heads * hs],
                             &q[t * heads * hs],
                             k.data(),
                             v.data(),
                             kv_dim,
                             scores.data(),
                             pos0 + t,
                             heads,
                             kv_heads,
                             hs,
                             n};
    for (int h = 0; h < heads; h++) kernels::AttendOneHead(a, h);
  }
  Dev<float> dq(q), dk(k), dv(v), dout(q.size());
  cu::AttentionDeviceArgs d{dout.p, dq.p, dk.p, dv.p, kv_dim, heads * hs, pos0, T, heads, kv_heads, hs};
  ASSERT_TRUE(cu::LaunchAttention(cu::PlanAttention(heads, kv_heads, hs, T, n, kLim).value(), d, 0, "t").ok());
  ExpectClose(dout.Get(), want, 1e-4, "attention prefill block");
}

// The backend's AttentionBlock of T query rows q over the caches kc and v
// (host vectors, uploaded for the call) as `shape` describes them (its
// pointers are filled here); the output rows brought back.
std::vector<float> BlockOnDevice(kernels::Backend& k, const std::vector<float>& q, const std::vector<float>& kc,
                                 const std::vector<float>& v, kernels::AttentionArgs shape, int T) {
  auto dq = k.AllocateState(q.size()), dk = k.AllocateState(kc.size()), dv = k.AllocateState(v.size()),
       dout = k.AllocateState(q.size());
  k.Upload(dq->data(), q.data(), q.size());
  k.Upload(dk->data(), kc.data(), kc.size());
  k.Upload(dv->data(), v.data(), v.size());
  shape.out = dout->data(), shape.q = dq->data(), shape.key_cache = dk->data(), shape.value_cache = dv->data();
  k.AttentionBlock(shape, T);
  std::vector<float> got(q.size());
  k.Download(got.data(), dout->data(), got.size());
  return got;
}

// A prefill block's attention as products (the backend's GemmAttention:
// scores by strided batched GEMMs per KV head, the causal softmax, the values
// by GEMMs), against run.c's attention row by row: GQA, a block from position
// 0, one over an earlier past, and a block of 512 (the device's prefill pass).
// In f32 (a block whose products were f32) and in TF32 (a block whose
// products ran on tensor cores: its activations already rounded to bf16).
TEST(CudaDevice, PrefillAttentionAsGemmsMatchesTheReference) {
  REQUIRE_DEVICE();
  for (bool tf32 : {false, true}) {
    auto k = kernels::MakeBackend("cuda").value();
    if (tf32) {  // a bf16 block product first, as a prefill block's q/k/v are
      const Encoded w(kernels::DType::kBF16, 64, 64);
      auto x = k->AllocateState(16 * 64), y = k->AllocateState(16 * 64);
      k->MatmulBatch(y->data(), x->data(), w.w, 16);
    }
    const int heads = 8, hs = 64, qw = heads * hs;
    for (int kv_heads : {2, 8})  // grouped and one KV head a query head
      // {0, 17}, {3, 17}: a head's scores (T x n floats) start 4-byte aligned only
      for (auto [pos0, T] : {std::pair{0, 16}, {0, 17}, {3, 17}, {300, 100}, {0, 512}, {1000, 512}}) {
        const int kv_dim = kv_heads * hs;
        const int n = pos0 + T;
        std::vector<float> q = Random(static_cast<size_t>(T) * qw, 1 + T),
                           kc = Random(static_cast<size_t>(n) * kv_dim, 2, 0.3f),
                           v = Random(static_cast<size_t>(n) * kv_dim, 3), scores(static_cast<size_t>(heads) * n),
                           want(q.size());
        for (int t = 0; t < T; t++) {
          kernels::AttentionArgs a{&want[t * qw], &q[t * qw], kc.data(), v.data(), kv_dim, scores.data(),
                                   pos0 + t,      heads,      kv_heads,  hs,       n};
          for (int h = 0; h < heads; h++) kernels::AttendOneHead(a, h);
        }
        const std::vector<float> got = BlockOnDevice(
            *k, q, kc, v, {nullptr, nullptr, nullptr, nullptr, kv_dim, scores.data(), pos0, heads, kv_heads, hs, n}, T);
        ASSERT_TRUE(k->status().ok()) << k->status().message();
        // TF32 rounds q, k, the weights and v to 10 mantissa bits (2^-11
        // relative): a score of 64 products moves by ~2^-11 of its size, a
        // weight by as much, an output by ~1e-3 of 1 + |value|.
        ExpectClose(got, want, tf32 ? 5e-3 : 1e-5,
                    std::string(tf32 ? "TF32" : "f32") + " prefill attention as GEMMs, " + std::to_string(kv_heads) +
                        " KV heads, " + std::to_string(T) + " rows from position " + std::to_string(pos0));
      }
  }
}

// The attention's window and Gemma's score scale and soft-cap (issue 44) on
// every device path: a decoded row (the split kernel), a short block (the
// tiled kernel) and a long one (GEMMs and the causal softmax), against run.c's
// attention of the same AttentionArgs (Windowed, as every CPU attention).
TEST(CudaDevice, WindowsAndGemmaScoresMatchTheReference) {
  REQUIRE_DEVICE();
  struct Scoring {
    int window;
    float scale_dim, softcap;
  };
  const int heads = 4, kv_heads = 2, hs = 32, kv_dim = kv_heads * hs, qw = heads * hs;
  auto k = kernels::MakeBackend("cuda").value();
  ASSERT_TRUE(k->attends_windows() && k->runs_gemma());
  for (const Scoring sc : {Scoring{0, 0.0f, 0.0f}, Scoring{37, 0.0f, 0.0f}, Scoring{0, 24.0f, 50.0f},
                           Scoring{0, 0.0f, 5.0f}, Scoring{37, 48.0f, 5.0f}, Scoring{300, 24.0f, 50.0f}})
    for (auto [pos0, T] : {std::pair{0, 1}, {36, 1}, {299, 1}, {600, 1}, {0, 8}, {290, 8}, {0, 64}, {500, 64}}) {
      const int n = pos0 + T;
      std::vector<float> q = Random(static_cast<size_t>(T) * qw, 1 + T, 3.0f),
                         kc = Random(static_cast<size_t>(n) * kv_dim, 2),
                         v = Random(static_cast<size_t>(n) * kv_dim, 3), scores(static_cast<size_t>(heads) * n),
                         want(q.size());
      for (int t = 0; t < T; t++) {
        kernels::AttentionArgs a{&want[t * qw], &q[t * qw], kc.data(), v.data(), kv_dim,    scores.data(), pos0 + t,
                                 heads,         kv_heads,   hs,        n,        sc.window, sc.scale_dim,  sc.softcap};
        for (int h = 0; h < heads; h++) kernels::AttendOneHead(kernels::Windowed(a), h);
      }
      const std::vector<float> got = BlockOnDevice(*k, q, kc, v,
                                                   {nullptr, nullptr, nullptr, nullptr, kv_dim, scores.data(), pos0,
                                                    heads, kv_heads, hs, n, sc.window, sc.scale_dim, sc.softcap},
                                                   T);
      ASSERT_TRUE(k->status().ok()) << k->status().message();
      ExpectClose(got, want, 1e-4,
                  "attention window " + std::to_string(sc.window) + " scale_dim " + std::to_string(sc.scale_dim) +
                      " softcap " + std::to_string(sc.softcap) + ", " + std::to_string(T) + " rows from position " +
                      std::to_string(pos0));
    }
}

// Gemma's steps between the products on the device: GeGLU, the embedding's
// scale and the final soft-cap, against the host defaults (GeGLUReference,
// x * s, SoftCap); tanhf on the device is within CUDA's ulp bound of the host's.
TEST(CudaDevice, GeGLUScaleAndSoftCapMatchTheHost) {
  REQUIRE_DEVICE();
  auto k = kernels::MakeBackend("cuda").value();
  auto host = kernels::MakeBackend("reference").value();
  const int n = 5000;
  std::vector<float> h = Random(n, 11, 4.0f), h2 = Random(n, 12), logits = Random(n, 13, 40.0f);
  auto dh = k->AllocateState(n), dh2 = k->AllocateState(n), dl = k->AllocateState(n), dx = k->AllocateState(n);
  k->Upload(dh->data(), h.data(), n);
  k->Upload(dh2->data(), h2.data(), n);
  k->Upload(dl->data(), logits.data(), n);
  k->Upload(dx->data(), h2.data(), n);
  k->GeGLU(dh->data(), dh2->data(), n);
  k->SoftCapInPlace(dl->data(), 30.0f, n);
  k->ScaleInPlace(dx->data(), 8.0f, n);
  std::vector<float> geglu = h, capped = logits, scaled = h2;
  host->GeGLU(geglu.data(), h2.data(), n);
  host->SoftCapInPlace(capped.data(), 30.0f, n);
  host->ScaleInPlace(scaled.data(), 8.0f, n);
  ExpectClose(Downloaded(*k, *dh), geglu, 4e-6, "GeGLU");  // a 2-ulp tanhf moves one value past 1e-6
  ExpectClose(Downloaded(*k, *dl), capped, 1e-6, "final soft-cap 30");
  ExpectClose(Downloaded(*k, *dx), scaled, 0.0, "embedding scale 8");
  ASSERT_TRUE(k->status().ok()) << k->status().message();
}

// Every family beyond Llama (issue 44) through the whole device forward:
// each synthetic model (untied, so its greedy text varies; every window
// shorter than the context parity walks) against the reference on the same
// weights, f32 and bf16 (decode: the activations stay f32, and bf16's steps
// replay as CUDA graphs), at the f32 bar: top-1 1, mean KL <= 1e-6. Gemma's
// query_pre_attn_scalar is 24, not head_dim's 32, so a path that ignored it
// would fail; a Mistral with a window of 300 in 512 positions has windowed
// decodes over two of the split kernel's chunks.
TEST(CudaDevice, EveryFamilyAgreesWithTheReference) {
  REQUIRE_DEVICE();
  const std::string dir = test::TempDir("cuda-families"), v = test::VerityBin();
  const std::pair<const char*, const char*> families[] = {{"qwen2", ""},
                                                          {"qwen3", ""},
                                                          {"phi3", ""},
                                                          {"mistral", ""},
                                                          {"mistral", ",\"sliding_window\":300"},
                                                          {"gemma2", ",\"query_pre_attn_scalar\":24"},
                                                          {"gemma3", ",\"query_pre_attn_scalar\":24"}};
  int n = 0;
  for (const auto& [family, extra] : families) {
    const std::string model = dir + "/" + std::to_string(n++) + "-" + family;
    auto synth = test::Shell(v + " synth --like " + family + " --out " + model +
                             " --config '{\"shared_classifier\":false" + extra + "}'");
    ASSERT_EQ(synth.exit_code, 0) << family << ": " << synth.err;
    for (const char* dtype : {"f32", "bf16"}) {
      auto r = test::Shell(v + " parity --model " + model + " --backend cuda --json --dtype " + dtype +
                           " --reference-dtype same");
      std::printf("cuda device: %s%s %s parity: %s", family, extra, dtype, r.err.c_str());
      ASSERT_EQ(r.exit_code, 0) << family << extra << " " << dtype << ": " << r.out << r.err;
      const auto j = nlohmann::json::parse(r.out);
      EXPECT_EQ(j["worst"]["top1"], 1.0) << family << extra << " " << dtype;
      EXPECT_LE(j["worst"]["mean_kl"].get<double>(), 1e-6) << family << extra << " " << dtype;
    }
  }
}

TEST(CudaDevice, ABadLaunchIsAnErrorNamingTheKernel) {
  REQUIRE_DEVICE();
  cu::LaunchPlan bad = cu::PlanSwiGLU(1, kLim).value();
  bad.block.x = 4096;  // past every device's limit: what Validate exists to stop
  Dev<float> a(1), b(1);
  Status s = cu::LaunchSwiGLU(bad, a.p, b.p, 1, 0, "layer 7 swiglu");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("layer 7 swiglu: launch of kernel swiglu failed"), std::string::npos) << s.message();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // the error was consumed, not left for the next call
}

TEST(CudaDevice, ForwardAgreesWithTheReferenceAndAFailureIsAnError) {
  REQUIRE_DEVICE();
  for (kernels::DType t : {kernels::DType::kF32, kernels::DType::kBF16, kernels::DType::kQ8_0}) {
    auto model = LoadModel(test::Model("stories260K.bin"), t);
    ASSERT_TRUE(model.ok()) << model.status().message();
    Transformer ref(**model, kernels::MakeBackend("reference").value());
    Transformer gpu(**model, kernels::MakeBackend("cuda").value());
    const std::vector<int> ids = {1, 403, 407, 261, 30, 9, 500, 2};
    auto a = TeacherForcedLogits(ref, ids), b = TeacherForcedLogits(gpu, ids);
    ASSERT_TRUE(b.ok()) << b.status().message();
    ExpectClose(*b, *a, 1e-3, std::string("stories260K logits ") + kernels::DTypeName(t));
    // The greedy pick on the device: run.c's argmax of the same logits.
    Transformer picker(**model, kernels::MakeBackend("cuda").value());
    for (size_t p = 0; p + 1 < ids.size(); p++) {
      const float* l = gpu.Forward(ids[p], static_cast<int>(p));
      const int want = static_cast<int>(std::max_element(l, l + (*model)->config.vocab_size) - l);
      EXPECT_EQ(picker.ForwardGreedy(ids[p], static_cast<int>(p)), want) << kernels::DTypeName(t) << " position " << p;
    }
    ASSERT_TRUE(picker.status().ok()) << picker.status().message();
    // The prompt as one prefill: the same last row.
    const float* p = gpu.Prefill(ids.data(), static_cast<int>(ids.size()), 0);
    ASSERT_TRUE(gpu.status().ok());
    std::vector<float> last(p, p + (*model)->config.vocab_size);
    ExpectClose(last, std::vector<float>(a->end() - last.size(), a->end()), 1e-3, "prefill last row");
  }
  // A call the device cannot plan (heads not a multiple of kv_heads) fails the backend:
  // status names the kernel, the output is NaN, and every later call's too.
  auto k = kernels::MakeBackend("cuda").value();
  ASSERT_FALSE(k->state_on_host());
  k->BeginLayer(5);
  auto q = k->AllocateState(6 * 8), cache = k->AllocateState(8 * 4), out = k->AllocateState(6 * 8);
  std::vector<float> scores(6 * 4), host(6 * 8, 0.0f);
  kernels::AttentionArgs a{out->data(), q->data(), cache->data(), cache->data(), 8 * 4, scores.data(), 0, 6, 4, 8, 4};
  k->Attention(a);
  ASSERT_FALSE(k->status().ok());
  EXPECT_NE(k->status().message().find("kernel attention_decode_split"), std::string::npos) << k->status().message();
  EXPECT_NE(k->status().message().find("layer 5 attention"), std::string::npos) << k->status().message();
  k->Download(host.data(), out->data(), host.size());
  EXPECT_TRUE(std::isnan(host[0]));
  auto hb = k->AllocateState(16), hb2 = k->AllocateState(16);
  k->SwiGLU(hb->data(), hb2->data(), 16);
  std::vector<float> got(16, 0.0f);
  k->Download(got.data(), hb->data(), 16);
  EXPECT_TRUE(std::isnan(got[15]));  // later calls do not run on a failed backend
}

// A failed backend leaves the process as it found it (issue 42): after each
// kind of failure a backend can have, unrelated device work runs (a plain
// launch on the legacy stream, a fresh backend's product), no error is left
// for the next launch check, no capture is open and the current device is the
// one before. On 2026-12-04 the refused device memset of a failed backend's
// host state left cudaErrorInvalidValue behind, and the next test's first
// launch reported it as its own.
void ExpectProcessClean(int device_before, const std::string& after) {
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << after << ": an error was left for the next launch check";
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusActive;
  EXPECT_EQ(cudaStreamIsCapturing(cudaStreamLegacy, &capture), cudaSuccess) << after;
  EXPECT_EQ(capture, cudaStreamCaptureStatusNone) << after << ": a capture is open";
  int device = -1;
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, device_before) << after << ": the current device moved";
  const Encoded e(kernels::DType::kBF16, 64, 288);
  const std::vector<float> x = Random(288, 3), want = ExactMatmul(e.w, x, 1);
  Dev<unsigned char> dw(e.device);
  Dev<float> dx(x), dout(64);
  const Status launched = cu::LaunchRows(cu::PlanRows(kernels::DType::kBF16, 64, 288, 1, kLim).value(),
                                         kernels::DType::kBF16, dout.p, dw.p, dx.p, 64, 288, 1, 0, "unrelated work");
  ASSERT_TRUE(launched.ok()) << after << ": " << launched.message();
  ExpectClose(dout.Get(), want, 1e-4, "a plain launch after " + after);
  auto fresh = kernels::MakeBackend("cuda").value();
  auto in = fresh->AllocateState(288), out = fresh->AllocateState(64);
  fresh->Upload(in->data(), x.data(), x.size());
  fresh->Matmul(out->data(), in->data(), e.w);
  ExpectClose(Downloaded(*fresh, *out), want, 1e-4, "a fresh backend's product after " + after);
  EXPECT_TRUE(fresh->status().ok()) << after << ": " << fresh->status().message();
}

TEST(CudaDevice, AFailedBackendLeavesTheProcessAsItFoundIt) {
  REQUIRE_DEVICE();
  int device = -1;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  // An attention the device cannot plan, then calls on the host state a
  // failed backend hands out (the sequence that broke the next test).
  {
    auto k = kernels::MakeBackend("cuda").value();
    k->BeginLayer(5);
    auto q = k->AllocateState(48), cache = k->AllocateState(32), out = k->AllocateState(48);
    std::vector<float> scores(24), host(48, 0.0f);
    k->Attention({out->data(), q->data(), cache->data(), cache->data(), 32, scores.data(), 0, 6, 4, 8, 4});
    ASSERT_FALSE(k->status().ok());
    auto hb = k->AllocateState(16), hb2 = k->AllocateState(16);
    k->SwiGLU(hb->data(), hb2->data(), 16);
    std::vector<float> got(16, 0.0f);
    k->Download(got.data(), hb->data(), 16);
    EXPECT_TRUE(std::isnan(got[0]) && std::isnan(got[15])) << "a failed backend's host state is poisoned too";
  }
  ExpectProcessClean(device, "a refused plan and calls on a failed backend's host state");
  // An allocation the device cannot hold (16 TiB).
  {
    auto k = kernels::MakeBackend("cuda").value();
    auto huge = k->AllocateState(size_t{1} << 42);
    ASSERT_FALSE(k->status().ok());
    EXPECT_NE(k->status().message().find("state of"), std::string::npos) << k->status().message();
  }
  ExpectProcessClean(device, "an allocation refused");
  // A failure inside a recorded decode step (its calls kept, then run as issued).
  {
    auto k = kernels::MakeBackend("cuda").value();
    auto q = k->AllocateState(48), cache = k->AllocateState(32), out = k->AllocateState(48);
    std::vector<float> scores(24), host(48, 0.0f);
    for (int step = 0; step < 3; step++) {
      k->BeginDecodeStep(1, 0);
      k->Attention({out->data(), q->data(), cache->data(), cache->data(), 32, scores.data(), 0, 6, 4, 8, 4});
      k->EndDecodeStep();
    }
    ASSERT_FALSE(k->status().ok());
    k->Download(host.data(), out->data(), host.size());
    EXPECT_TRUE(std::isnan(host[0]));
  }
  ExpectProcessClean(device, "a failure inside a recorded step");
}

// The 16-byte kernel (decode and batched decode): close to the exact product,
// and row t of a batch of 13 is bit for bit the product of x_t alone, the
// lone products launched as dependent launches that ask L2 for nothing, 2 KB,
// an odd share or the whole of each row first (a prefetch changes no bit).
TEST(CudaDevice, RowsKernelIsExactEnoughAndBatchInvariant) {
  REQUIRE_DEVICE();
  for (kernels::DType t : {kernels::DType::kF32, kernels::DType::kBF16, kernels::DType::kQ8_0})
    for (auto [rows, cols] : {std::pair{64, 288}, {1000, 4096}, {5632, 2048}}) {
      const std::string what =
          std::string("rows ") + kernels::DTypeName(t) + " " + std::to_string(rows) + "x" + std::to_string(cols);
      const Encoded e(t, rows, cols);
      const kernels::Weights& w = e.w;
      const std::vector<unsigned char>& device_bytes = e.device;
      const int T = 13;
      const std::vector<float> x = Random(static_cast<size_t>(T) * cols, 10), want = ExactMatmul(w, x, T);
      Dev<unsigned char> dw(device_bytes);
      Dev<float> dx(x), dbatch(static_cast<size_t>(T) * rows), done(rows);
      ASSERT_TRUE(cu::VectorizedRows(t, dw.p, dx.p, cols)) << what;
      ASSERT_TRUE(cu::LaunchRows(cu::PlanRows(t, rows, cols, T, kLim).value(), t, dbatch.p, dw.p, dx.p, rows, cols, T,
                                 0, "test")
                      .ok());
      const std::vector<float> batch = dbatch.Get();
      ExpectClose(batch, want, 1e-4, what);
      const int64_t row_bytes = t == kernels::DType::kQ8_0 ? cols : static_cast<int64_t>(kernels::RowBytes(t, cols));
      const int64_t prefetch[] = {0, std::min<int64_t>(row_bytes, cu::kRowsPrefetchFloor), row_bytes / 32 * 16,
                                  row_bytes};
      int major = 0;
      ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
      for (int v = 0; v < T; v++) {
        cu::LaunchPlan plan = cu::PlanRows(t, rows, cols, 1, kLim).value();
        plan.dependent_launch = major >= 9;  // as the backend sets it
        plan.prefetch_bytes = prefetch[v % 4];
        ASSERT_TRUE(
            cu::LaunchRows(plan, t, done.p, dw.p, dx.p + static_cast<size_t>(v) * cols, rows, cols, 1, 0, "test").ok());
        const std::vector<float> one = done.Get();
        EXPECT_EQ(std::memcmp(one.data(), batch.data() + static_cast<size_t>(v) * rows, rows * sizeof(float)), 0)
            << what << ": vector " << v << " alone (prefetching " << plan.prefetch_bytes
            << " B a row) differs from its row of the batch";
      }
    }
}

// The tensor-core rows kernel (mma_rows.cu, VERITY_CUDA_BATCH_MMA): close to
// the exact product (x enters as hi + lo bf16, 16 significant bits), and a
// vector's outputs are the same bits whatever vectors share its launch and
// wherever it sits among them (alone, first, last, past the first group of
// 32); stacked q/k/v targets, the residual add and SwiGLU give the bits of
// the plain products they stand for.
// For weights stored as `t` (bf16, or q8_0 in the device layout); adds the
// launches checked for invariance to *invariant.
void TensorCoreRowsFor(kernels::DType t, long* invariant) {
  // One launch, waited for; false (with the failure reported) if it failed.
  auto launch = [t](cu::RowsEpilogue epi, const cu::RowsTargets& tg, const float* x, int cols, int n) {
    const int rows = tg.begin[tg.count];
    const auto plan = cu::PlanRowsMma(t, rows, cols, n, epi == cu::RowsEpilogue::kSwiGLU, kLim);
    const Status st = plan.ok() ? cu::LaunchRowsMma(plan.value(), t, epi, tg, x, cols, n, 0, "test") : plan.status();
    EXPECT_TRUE(st.ok()) << st.message();
    const cudaError_t done = cudaDeviceSynchronize();
    EXPECT_EQ(done, cudaSuccess) << cudaGetErrorString(done);
    return st.ok() && done == cudaSuccess;
  };
  auto one = [](const void* w, float* out, int rows) {
    cu::RowsTargets tg;
    tg.count = 1, tg.begin[1] = rows, tg.w[0] = w, tg.out[0] = out;
    return tg;
  };
  for (auto [rows, cols] : {std::pair{64, 288}, {1000, 4096}, {5632, 2048}, {2048, 5632}}) {
    const std::string what =
        std::string("rows_mma ") + kernels::DTypeName(t) + " " + std::to_string(rows) + "x" + std::to_string(cols);
    const Encoded e(t, rows, cols);
    const int T = 40;  // two vector groups
    const std::vector<float> x = Random(static_cast<size_t>(T) * cols, 12), want = ExactMatmul(e.w, x, T);
    Dev<unsigned char> dw(e.device);
    Dev<float> dx(x), dbatch(static_cast<size_t>(T) * rows), dsome(static_cast<size_t>(T) * rows);
    ASSERT_TRUE(launch(cu::RowsEpilogue::kStore, one(dw.p, dbatch.p, rows), dx.p, cols, T));
    const std::vector<float> batch = dbatch.Get();
    ExpectClose(batch, want, 1e-4, what);
    // Vector v alone, and as the last of the first v + 1 vectors.
    for (int v : {0, 1, 7, 8, 31, 32, 39})
      for (int n : {1, v + 1}) {
        const float* xs = n == 1 ? dx.p + static_cast<size_t>(v) * cols : dx.p;
        ASSERT_TRUE(launch(cu::RowsEpilogue::kStore, one(dw.p, dsome.p, rows), xs, cols, n));
        const std::vector<float> some = dsome.Get();
        const size_t at = static_cast<size_t>(n == 1 ? 0 : v) * rows;
        EXPECT_EQ(std::memcmp(some.data() + at, batch.data() + static_cast<size_t>(v) * rows, rows * sizeof(float)), 0)
            << what << ": vector " << v << " in a launch of " << n << " differs from its row of 40";
        ++*invariant;
      }
  }
  // q/k/v stacked, the residual add and SwiGLU against plain launches.
  const int dim = 2048, kv = 256, ffn = 5632, n = 5;
  const Encoded wq(t, dim, dim), wk(t, kv, dim), wv(t, kv, dim), w1(t, ffn, dim), w3(t, ffn, dim);
  Dev<unsigned char> dq(wq.device), dk(wk.device), dv(wv.device), d1(w1.device), d3(w3.device);
  const std::vector<float> x = Random(static_cast<size_t>(n) * dim, 13), r0 = Random(static_cast<size_t>(n) * dim, 14);
  const size_t N = n;
  Dev<float> dx(x), q(N * dim), k(N * kv), v(N * kv), q2(N * dim), k2(N * kv), v2(N * kv);
  Dev<float> g(N * ffn), u(N * ffn), gu(N * ffn), r(r0), proj(N * dim);
  cu::RowsTargets qkv;
  qkv.count = 3, qkv.begin[1] = dim, qkv.begin[2] = dim + kv, qkv.begin[3] = dim + 2 * kv;
  qkv.w[0] = dq.p, qkv.w[1] = dk.p, qkv.w[2] = dv.p, qkv.out[0] = q.p, qkv.out[1] = k.p, qkv.out[2] = v.p;
  ASSERT_TRUE(launch(cu::RowsEpilogue::kStore, qkv, dx.p, dim, n));
  ASSERT_TRUE(launch(cu::RowsEpilogue::kStore, one(dq.p, q2.p, dim), dx.p, dim, n));
  ASSERT_TRUE(launch(cu::RowsEpilogue::kStore, one(dk.p, k2.p, kv), dx.p, dim, n));
  ASSERT_TRUE(launch(cu::RowsEpilogue::kStore, one(dv.p, v2.p, kv), dx.p, dim, n));
  const std::string dt = kernels::DTypeName(t);
  EXPECT_EQ(q.Get(), q2.Get()) << dt << ": q stacked with k and v";
  EXPECT_EQ(k.Get(), k2.Get()) << dt << ": k stacked with q and v";
  EXPECT_EQ(v.Get(), v2.Get()) << dt << ": v stacked with q and k";
  cu::RowsTargets swiglu = one(d1.p, gu.p, ffn);
  swiglu.w[1] = d3.p;
  ASSERT_TRUE(launch(cu::RowsEpilogue::kSwiGLU, swiglu, dx.p, dim, n));
  ASSERT_TRUE(launch(cu::RowsEpilogue::kStore, one(d1.p, g.p, ffn), dx.p, dim, n));
  ASSERT_TRUE(launch(cu::RowsEpilogue::kStore, one(d3.p, u.p, ffn), dx.p, dim, n));
  // SwiGLU of the plain products by the device's own element-wise kernel
  // (its expf is the device's, within 2 ulp of the host's).
  ASSERT_TRUE(cu::LaunchSwiGLU(cu::PlanSwiGLU(static_cast<int64_t>(N) * ffn, kLim).value(), g.p, u.p,
                               static_cast<int64_t>(N) * ffn, 0, "test")
                  .ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> hg = g.Get(), hgu = gu.Get();
  for (size_t i = 0; i < hgu.size(); i++)
    ASSERT_EQ(cu::ew::FloatToBits(hgu[i]), cu::ew::FloatToBits(hg[i])) << dt << ": SwiGLU [" << i << "]";
  ASSERT_TRUE(launch(cu::RowsEpilogue::kAdd, one(dq.p, r.p, dim), dx.p, dim, n));
  ASSERT_TRUE(launch(cu::RowsEpilogue::kStore, one(dq.p, proj.p, dim), dx.p, dim, n));
  const std::vector<float> hr = r.Get(), hp = proj.Get();
  for (size_t i = 0; i < hr.size(); i++)
    ASSERT_EQ(cu::ew::FloatToBits(hr[i]), cu::ew::FloatToBits(r0[i] + hp[i])) << dt << ": residual add [" << i << "]";
}

TEST(CudaDevice, TensorCoreRowsAreExactEnoughAndBatchInvariant) {
  REQUIRE_DEVICE();
  long invariant = 0;
  for (kernels::DType t : {kernels::DType::kBF16, kernels::DType::kQ8_0}) {
    TensorCoreRowsFor(t, &invariant);
    if (HasFatalFailure()) return;
  }
  std::printf(
      "cuda device: tensor-core rows (bf16, q8_0): %ld launches of a vector among others give its bits; stacked "
      "q/k/v, SwiGLU and the residual add give the plain products' bits\n",
      invariant);
}

// The fused calls give what the separate calls they stand for give (the
// Backend:: defaults, run on the same device), bit for bit: q/k/v in one
// launch, gate/up with SwiGLU, a projection with its residual add, for one
// vector and for a batched step's rows, in bf16 and q8_0.
TEST(CudaDevice, FusedProductsGiveTheSeparateCallsBits) {
  REQUIRE_DEVICE();
  auto k = kernels::MakeBackend("cuda").value();
  using Target = kernels::Backend::MatmulTarget;
  const int dim = 2048, kv = 256, ffn = 5632;
  for (kernels::DType t : {kernels::DType::kBF16, kernels::DType::kQ8_0}) {
    const Encoded wq(t, dim, dim), wk(t, kv, dim), wv(t, kv, dim), w1(t, ffn, dim), w3(t, ffn, dim), w2(t, dim, ffn);
    for (int n : {1, 5}) {
      const std::string what = std::string(kernels::DTypeName(t)) + " n=" + std::to_string(n);
      auto state = [&](size_t floats, uint32_t seed) { return RandomState(*k, floats, seed); };
      auto get = [&](kernels::StateBuffer& s) { return Downloaded(*k, s); };
      const size_t N = n;
      auto x = state(N * dim, 1), h = state(N * ffn, 2);
      auto a = state(N * dim, 3), b = state(N * kv, 4), c = state(N * kv, 5);
      auto a2 = state(N * dim, 3), b2 = state(N * kv, 4), c2 = state(N * kv, 5);
      const Target sep[] = {{a->data(), &wq.w}, {b->data(), &wk.w}, {c->data(), &wv.w}};
      const Target fused[] = {{a2->data(), &wq.w}, {b2->data(), &wk.w}, {c2->data(), &wv.w}};
      k->Backend::MatmulSharedRows(x->data(), n, sep, 3);
      k->MatmulSharedRows(x->data(), n, fused, 3);
      EXPECT_EQ(get(*a), get(*a2)) << what << ": q in one launch";
      EXPECT_EQ(get(*b), get(*b2)) << what << ": k in one launch";
      EXPECT_EQ(get(*c), get(*c2)) << what << ": v in one launch";
      if (n == 1) {
        k->MatmulShared(x->data(), 1, fused, 3);
        EXPECT_EQ(get(*b), get(*b2)) << what << ": k of a decode step's MatmulShared";
      }
      const bool independent = n > 1;  // a decode step's own form at n = 1
      auto g = state(N * ffn, 6), u = state(N * ffn, 7), g2 = state(N * ffn, 6), u2 = state(N * ffn, 7);
      k->Backend::MatmulSwiGLU(x->data(), n, independent, {g->data(), &w1.w}, {u->data(), &w3.w});
      k->MatmulSwiGLU(x->data(), n, independent, {g2->data(), &w1.w}, {u2->data(), &w3.w});
      EXPECT_EQ(get(*g), get(*g2)) << what << ": gate/up with SwiGLU";
      auto r = state(N * dim, 8), r2 = state(N * dim, 8), scratch = state(N * dim, 9);
      k->Backend::MatmulAddInPlace(r->data(), scratch->data(), h->data(), w2.w, n, independent);
      k->MatmulAddInPlace(r2->data(), scratch->data(), h->data(), w2.w, n, independent);
      EXPECT_EQ(get(*r), get(*r2)) << what << ": down projection with its residual add";
    }
  }
  ASSERT_TRUE(k->status().ok()) << k->status().message();
}

// A decoded position's rotate-and-cache in one launch (the position read on
// the device, replayed as a graph) and a batched step's (positions and slots
// uploaded) give the per-row calls' bits: rotated q, the cached key and
// value, the attention output (one launch for every row of the batched step,
// each row split over its context).
TEST(CudaDevice, RotateAndCacheGivesTheSeparateCallsBits) {
  REQUIRE_DEVICE();
  auto k = kernels::MakeBackend("cuda").value();
  const int heads = 8, kv_heads = 2, hs = 64, seq = 600, slots = 3, n = 3;  // 3 chunks of the split attention
  const int qw = heads * hs, kw = kv_heads * hs;
  std::vector<float> inv_freq(hs / 2);
  for (int i = 0; i < hs / 2; i++) inv_freq[i] = std::pow(10000.0f, -2.0f * i / hs);
  const size_t slot_floats = static_cast<size_t>(seq) * kw;
  // One set of buffers (a recorded step's signature holds its pointers, so
  // the same step replays), given fresh inputs before every run.
  auto q = k->AllocateState(static_cast<size_t>(n) * qw), key = k->AllocateState(static_cast<size_t>(n) * kw);
  auto value = k->AllocateState(static_cast<size_t>(n) * kw), att = k->AllocateState(static_cast<size_t>(n) * qw);
  auto kc = k->AllocateState(slots * slot_floats), vc = k->AllocateState(slots * slot_floats);
  std::vector<float> scores(static_cast<size_t>(heads) * seq);
  const kernels::AttendArgs a{att->data(), q->data(),     key->data(),     value->data(), kc->data(), vc->data(), kw,
                              slot_floats, scores.data(), inv_freq.data(), false,         heads,      kv_heads,   hs,
                              seq};
  auto fill = [&](kernels::StateBuffer& s, uint32_t seed) { FillRandom(*k, s, seed); };
  auto get = [&](kernels::StateBuffer& s) { return Downloaded(*k, s); };
  struct Run {
    std::vector<float> q, att, keys, values;
  };
  auto run = [&](auto step) {
    fill(*q, 1), fill(*key, 2), fill(*value, 3), fill(*att, 4), fill(*kc, 5), fill(*vc, 6);
    step();
    return Run{get(*q), get(*att), get(*kc), get(*vc)};
  };
  auto same = [](const Run& x, const Run& y, const std::string& what) {
    EXPECT_EQ(x.q, y.q) << what << ": rotated q";
    EXPECT_EQ(x.keys, y.keys) << what << ": key cache";
    EXPECT_EQ(x.values, y.values) << what << ": value cache";
    EXPECT_EQ(x.att, y.att) << what << ": attention";
  };
  // A decoded position (one row, slot 0), four times: as issued, recorded,
  // replayed twice. The batched step below grows the attention scratch, which
  // drops the graph; the closing line still counts it as recorded.
  const int pos = 300;
  const Run separate = run([&] { k->Backend::AttendBlock(a, pos, 1); });
  for (int i = 0; i < 4; i++) {
    const Run fused = run([&] {
      k->BeginDecodeStep(7, pos);
      k->AttendBlock(a, pos, 1);
      k->EndDecodeStep();
    });
    same(separate, fused, "decode step " + std::to_string(i));
  }
  // A batched step: three rows in slots 2, 0, 1 at their own positions.
  const int rpos[n] = {0, 599, 257}, rslot[n] = {2, 0, 1};
  const Run rows_separate = run([&] { k->Backend::AttendRows(a, rpos, rslot, n); });
  const Run rows_fused = run([&] { k->AttendRows(a, rpos, rslot, n); });
  same(rows_separate, rows_fused, "batched rows");
  ASSERT_TRUE(k->status().ok()) << k->status().message();
  // The backend's closing line: the decode steps did replay a recorded graph.
  q.reset(), key.reset(), value.reset(), att.reset(), kc.reset(), vc.reset();
  testing::internal::CaptureStderr();
  k.reset();
  const std::string said = testing::internal::GetCapturedStderr();
  std::printf("cuda device: %s", said.c_str());
  EXPECT_NE(said.find("(1 recorded)"), std::string::npos) << said;
  EXPECT_EQ(said.find(" 0 decode steps launched as recorded graphs"), std::string::npos) << said;
}

// A batched step's greedy picks on the device: one block a row, each row's
// largest value, ties to the lower index (run.c's argmax), as the host's.
TEST(CudaDevice, ArgmaxRowsPickEachRowsLargest) {
  REQUIRE_DEVICE();
  auto k = kernels::MakeBackend("cuda").value();
  const int rows = 33, n = 32000;
  std::vector<float> host = Random(static_cast<size_t>(rows) * n, 31);
  host[5 * n + 17] = host[5 * n + 900] = 1e6f;  // a tie: the lower index wins
  host[32 * n + n - 1] = 1e6f;                  // the last value of the last row
  auto state = k->AllocateState(host.size());
  k->Upload(state->data(), host.data(), host.size());
  std::vector<int> got(rows, -1);
  k->ArgmaxRows(state->data(), rows, n, got.data());
  for (int r = 0; r < rows; r++)
    EXPECT_EQ(got[r], kernels::ArgmaxReference(host.data() + static_cast<size_t>(r) * n, n)) << "row " << r;
  EXPECT_EQ(got[5], 17);
  EXPECT_EQ(got[32], n - 1);
  EXPECT_EQ(k->Argmax(state->data() + static_cast<size_t>(5) * n, n), 17) << "one row alone";
  ASSERT_TRUE(k->status().ok()) << k->status().message();
}

// A backend made for device d runs on device d % count (a tensor-parallel
// rank's, as the NCCL collective places ranks), its state there, and its
// calls make that device current on whatever thread calls them.
TEST(CudaDevice, ABackendRunsOnTheDeviceItIsGiven) {
  REQUIRE_DEVICE();
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  const Encoded e(kernels::DType::kBF16, 16, 8);
  const std::vector<float> want = ExactMatmul(e.w, x, 1);
  for (int d : {0, 1, count, count + 1}) {
    auto k = kernels::MakeBackend("cuda", d);
    ASSERT_TRUE(k.ok()) << k.status().message();
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);  // another device current on this thread: the backend's calls move it
    auto in = (*k)->AllocateState(8), out = (*k)->AllocateState(16);
    cudaPointerAttributes at{};
    ASSERT_EQ(cudaPointerGetAttributes(&at, in->data()), cudaSuccess);
    EXPECT_EQ(at.device, d % count) << "device " << d << " of " << count;
    (*k)->Upload(in->data(), x.data(), x.size());
    (*k)->Matmul(out->data(), in->data(), e.w);
    std::vector<float> got(16);
    (*k)->Download(got.data(), out->data(), got.size());
    ExpectClose(got, want, 1e-5, "a product on device " + std::to_string(d % count));
    ASSERT_TRUE((*k)->status().ok()) << (*k)->status().message();
  }
  auto negative = kernels::MakeBackend("cuda", -1);
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("device -1"), std::string::npos) << negative.status().message();
}

// The steps between the products on the device: embedding rows, residual
// adds, an expert's weighted share and the averaging fault's division.
TEST(CudaDevice, EmbedAddAxpyAndDivideMatchTheHost) {
  REQUIRE_DEVICE();
  auto k = kernels::MakeBackend("cuda").value();
  auto host = kernels::MakeBackend("reference").value();
  const int dim = 4096, vocab = 50, n = 3;
  const std::vector<float> table = Random(static_cast<size_t>(vocab) * dim, 21);
  const int tokens[n] = {49, 0, 17};
  auto x = k->AllocateState(static_cast<size_t>(n) * dim), y = k->AllocateState(static_cast<size_t>(n) * dim);
  std::vector<float> want(static_cast<size_t>(n) * dim), got(want.size());
  host->Embed(want.data(), table.data(), vocab, dim, tokens, n);
  k->Embed(x->data(), table.data(), vocab, dim, tokens, n);
  k->Download(got.data(), x->data(), got.size());
  EXPECT_EQ(got, want) << "embedding rows are copies";
  const std::vector<float> other = Random(want.size(), 22);
  k->Upload(y->data(), other.data(), other.size());
  host->AddInPlace(want.data(), other.data(), want.size());
  k->AddInPlace(x->data(), y->data(), want.size());
  k->Download(got.data(), x->data(), got.size());
  EXPECT_EQ(got, want) << "a residual add is one rounding";
  host->Axpy(want.data(), 0.375f, other.data(), dim);
  k->Axpy(x->data(), 0.375f, y->data(), dim);
  host->DivideInPlace(want.data(), 3.0f, want.size());
  k->DivideInPlace(x->data(), 3.0f, want.size());
  k->Download(got.data(), x->data(), got.size());
  ExpectClose(got, want, 1e-6, "axpy (fused on the device) then divide");
  ASSERT_TRUE(k->status().ok()) << k->status().message();
}

// Batched decode on the device (a server's continuous batching): each slot's
// row of a step is bit for bit its decode alone, in every dtype.
// A batched step's rows against each sequence decoded alone: the model at
// `model_path` loaded as `t`, each prompt prefilled into its slot, 8 steps.
void SlotStepsOf(const std::string& model_path, kernels::DType t, const std::vector<std::vector<int>>& prompts,
                 const std::string& what) {
  {
    auto model = LoadModel(model_path, t);
    ASSERT_TRUE(model.ok()) << model.status().message();
    // 8 steps: the first of each slot's decode runs as issued, the second is
    // recorded as a CUDA graph, the rest replay it (bf16, q8_0; f32's cuBLAS
    // steps run as issued): every one must be the batched step's row.
    const int V = (*model)->config.vocab_size, slots = static_cast<int>(prompts.size()), steps = 8;
    auto batched = SlotDecoder::Create(**model, kernels::MakeBackend("cuda").value(), slots);
    ASSERT_TRUE(batched.ok()) << batched.status().message();
    std::vector<std::vector<float>> alone(slots);
    std::vector<int> pos(slots), token(slots), slot(slots);
    for (int s = 0; s < slots; s++) {
      Transformer one(**model, kernels::MakeBackend("cuda").value());
      const int n = static_cast<int>(prompts[s].size());
      one.Prefill(prompts[s].data(), n, 0);
      for (int k = 0; k < steps; k++) {
        const float* l = one.Forward((7 * k + s) % V, n + k);
        alone[s].insert(alone[s].end(), l, l + V);
      }
      ASSERT_TRUE(one.status().ok()) << one.status().message();
      (*batched)->Prefill(s, prompts[s].data(), n, 0);
      pos[s] = n;
    }
    std::vector<float> rows(static_cast<size_t>(slots) * V);
    for (int k = 0; k < steps; k++) {
      for (int i = 0; i < slots; i++) {
        slot[i] = (i + k) % slots;  // the order changes every step
        token[i] = (7 * k + slot[i]) % V;
      }
      std::vector<int> at(slots);
      for (int i = 0; i < slots; i++) at[i] = pos[slot[i]] + k;
      (*batched)->Step(slot.data(), token.data(), at.data(), slots, rows.data());
      ASSERT_TRUE((*batched)->status().ok()) << (*batched)->status().message();
      for (int i = 0; i < slots; i++)
        EXPECT_EQ(std::memcmp(rows.data() + static_cast<size_t>(i) * V,
                              alone[slot[i]].data() + static_cast<size_t>(k) * V, V * sizeof(float)),
                  0)
            << what << " " << kernels::DTypeName(t) << " slot " << slot[i] << " step " << k
            << " differs from its decode alone";
    }
    std::printf("cuda device: %s %s: %d slots x %d steps, every row its decode alone bit for bit\n", what.c_str(),
                kernels::DTypeName(t), slots, steps);
  }
}

TEST(CudaDevice, SlotStepsAreBatchInvariant) {
  REQUIRE_DEVICE();
  for (kernels::DType t : {kernels::DType::kF32, kernels::DType::kBF16, kernels::DType::kQ8_0})
    SlotStepsOf(test::Model("stories260K.bin"), t, {{1, 403, 407}, {1, 9, 30, 261, 500}, {1, 77}}, "stories260K");
  // A Gemma 2 (windows of 32 on alternate layers, its scale and soft-caps,
  // GeGLU), prompts past the window: every row's windowed layers start past 0.
  const std::string gemma = test::TempDir("slots-gemma2") + "/gemma2";
  auto synth = test::Shell(test::VerityBin() + " synth --like gemma2 --out " + gemma +
                           " --config '{\"shared_classifier\":false,\"query_pre_attn_scalar\":24}'");
  ASSERT_EQ(synth.exit_code, 0) << synth.err;
  std::vector<std::vector<int>> prompts(3);
  for (int s = 0; s < 3; s++)
    for (int p = 0; p < 33 + 9 * s; p++)
      prompts[s].push_back(p == 0 ? 2 : static_cast<int>((3 + 7919L * (p + s)) % 320));
  SlotStepsOf(gemma, kernels::DType::kBF16, prompts, "gemma2 synth");
}

// KL(softmax(a) || softmax(b)) of two rows of n logits, in double.
double RowKl(const float* a, const float* b, int n) {
  auto softmax = [n](const float* v) {
    const double mx = *std::max_element(v, v + n);
    std::vector<double> e(n);
    double z = 0;
    for (int i = 0; i < n; i++) z += e[i] = std::exp(v[i] - mx);
    for (double& x : e) x /= z;
    return e;
  };
  const std::vector<double> p = softmax(a), q = softmax(b);
  double kl = 0;
  for (int i = 0; i < n; i++)
    if (p[i] > 0) kl += p[i] * std::log(p[i] / std::max(q[i], 1e-300));
  return kl;
}
bool SameArgmax(const float* a, const float* b, int n) {
  return std::max_element(a, a + n) - a == std::max_element(b, b + n) - b;
}

// Sets (or, given nullptr, unsets) an environment variable for a scope (a
// backend reads its switches when it is made).
struct ScopedEnv {
  std::string name, before;
  bool was_set;
  ScopedEnv(const char* n, const char* value) : name(n), was_set(std::getenv(n) != nullptr) {
    if (was_set) before = std::getenv(n);
    value ? setenv(n, value, 1) : unsetenv(n);
  }
  ~ScopedEnv() { was_set ? setenv(name.c_str(), before.c_str(), 1) : unsetenv(name.c_str()); }
};

// A synthetic Llama of 4 layers whose every product has whole 32-column
// steps (dim 512, FFN 1376, 8 heads of 64, 4 KV heads, 4096 tokens), written
// as a llama2.c file and loaded as `t`.
std::unique_ptr<Model> SynthMmaShaped(kernels::DType t, const std::string& name) {
  const std::string path = test::TempDir(name) + "/synth-" + kernels::DTypeName(t) + ".bin";
  ModelConfig c;
  c.dim = 512, c.hidden_dim = 1376, c.n_layers = 4, c.n_heads = 8, c.n_kv_heads = 4, c.vocab_size = 4096;
  c.seq_len = c.max_positions = 256, c.head_dim = 64, c.rope_theta = 10000.0f, c.norm_eps = 1e-5f;
  c.shared_classifier = false;
  EXPECT_TRUE(WriteSyntheticLlama2c(c, 17, path).ok());
  auto model = LoadModel(path, t);
  EXPECT_TRUE(model.ok()) << model.status().message();
  return model.ok() ? std::move(*model) : nullptr;
}

// Batched steps on tensor cores (VERITY_CUDA_BATCH_MMA=1): each sequence's
// row of a step of 3 is bit for bit its row when it steps alone (a step of
// one), whatever the order; against its decode steps (the CUDA-core
// kernel's sums) the parity cost of x's 16 bits, printed and bounded (every
// row's KL <= 1e-5, the same argmax).
void TensorCoreSlotStepsFor(kernels::DType t) {
  const ScopedEnv mma("VERITY_CUDA_BATCH_MMA", "1");
  const std::unique_ptr<Model> model = SynthMmaShaped(t, "mma-slots");
  ASSERT_TRUE(model);
  const int V = model->config.vocab_size, slots = 3, steps = 8;
  const std::vector<std::vector<int>> prompts = {{1, 403, 407, 9}, {1, 9, 30, 261, 500, 17, 3}, {1, 77}};
  auto token_of = [&](int s, int k) { return (7 * k + s) % V; };
  // Each sequence alone: its decode steps, and its steps of one row.
  std::vector<std::vector<float>> decode(slots), alone(slots);
  auto single = SlotDecoder::Create(*model, kernels::MakeBackend("cuda").value(), slots);
  ASSERT_TRUE(single.ok()) << single.status().message();
  for (int s = 0; s < slots; s++) {
    Transformer one(*model, kernels::MakeBackend("cuda").value());
    const int n = static_cast<int>(prompts[s].size());
    one.Prefill(prompts[s].data(), n, 0);
    (*single)->Prefill(s, prompts[s].data(), n, 0);
    std::vector<float> row(V);
    for (int k = 0; k < steps; k++) {
      const float* l = one.Forward(token_of(s, k), n + k);
      decode[s].insert(decode[s].end(), l, l + V);
      const int tok = token_of(s, k), at = n + k;
      (*single)->Step(&s, &tok, &at, 1, row.data());
      alone[s].insert(alone[s].end(), row.begin(), row.end());
    }
    ASSERT_TRUE(one.status().ok()) << one.status().message();
    ASSERT_TRUE((*single)->status().ok()) << (*single)->status().message();
  }
  auto batched = SlotDecoder::Create(*model, kernels::MakeBackend("cuda").value(), slots);
  ASSERT_TRUE(batched.ok()) << batched.status().message();
  for (int s = 0; s < slots; s++) (*batched)->Prefill(s, prompts[s].data(), static_cast<int>(prompts[s].size()), 0);
  std::vector<float> rows(static_cast<size_t>(slots) * V);
  double worst = 0;
  int same_top = 0;
  for (int k = 0; k < steps; k++) {
    std::vector<int> slot(slots), token(slots), at(slots);
    for (int i = 0; i < slots; i++) {
      slot[i] = (i + k) % slots;  // the order changes every step
      token[i] = token_of(slot[i], k);
      at[i] = static_cast<int>(prompts[slot[i]].size()) + k;
    }
    (*batched)->Step(slot.data(), token.data(), at.data(), slots, rows.data());
    ASSERT_TRUE((*batched)->status().ok()) << (*batched)->status().message();
    for (int i = 0; i < slots; i++) {
      const float* row = rows.data() + static_cast<size_t>(i) * V;
      const size_t at_k = static_cast<size_t>(k) * V;
      EXPECT_EQ(std::memcmp(row, alone[slot[i]].data() + at_k, V * sizeof(float)), 0)
          << "slot " << slot[i] << " step " << k << ": its row of 3 differs from its step alone";
      worst = std::max(worst, RowKl(decode[slot[i]].data() + at_k, row, V));
      same_top += SameArgmax(decode[slot[i]].data() + at_k, row, V);
    }
  }
  std::printf(
      "cuda device: tensor-core slot steps, %s: %d rows of 3-row steps, each its step alone bit for bit; against "
      "the decode steps worst KL %.3g, top-1 %d of %d\n",
      kernels::DTypeName(t), slots * steps, worst, same_top, slots * steps);
  EXPECT_LE(worst, 1e-5) << kernels::DTypeName(t);
  EXPECT_EQ(same_top, slots * steps) << kernels::DTypeName(t);
}

// VERITY_CUDA_PROFILE=1 on a fresh backend: two identical prompts, the first
// uploading every matrix it uses. Every product's row of the table sets its
// uploading calls apart: as many apart as in its mean (on 2026-12-04 a prompt
// profile's GEMMs read ~10 GB/s, every layer's upload after the first in
// their mean).
TEST(CudaDevice, TheProfileSetsEachMatrixsUploadApart) {
  REQUIRE_DEVICE();
  const std::unique_ptr<Model> model = SynthMmaShaped(kernels::DType::kBF16, "profile");
  ASSERT_TRUE(model);
  std::string said;
  {
    const ScopedEnv profile("VERITY_CUDA_PROFILE", "1");
    auto gpu = std::make_unique<Transformer>(*model, kernels::MakeBackend("cuda").value());
    std::vector<int> ids(100);
    for (size_t i = 0; i < ids.size(); i++) ids[i] = static_cast<int>((3 + 7919 * i) % model->config.vocab_size);
    for (int run = 0; run < 2; run++) gpu->Prefill(ids.data(), static_cast<int>(ids.size()), 0);
    ASSERT_TRUE(gpu->status().ok()) << gpu->status().message();
    testing::internal::CaptureStderr();
    gpu.reset();
    said = testing::internal::GetCapturedStderr();
  }
  std::printf("cuda device: %s", said.c_str());
  int products = 0;
  std::istringstream lines(said);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("matmul rows=") == std::string::npos || line.rfind("verity: cuda profile:", 0) != 0) continue;
    std::vector<std::string> f;
    std::stringstream fields(line);
    for (std::string x; std::getline(fields, x, '|');) f.push_back(x);
    ASSERT_GE(f.size(), 9u) << line;
    const long calls = std::stol(f[2]), apart = std::stol(f[5]);
    EXPECT_GT(calls, 0) << line;
    EXPECT_EQ(apart, calls) << "the first prompt's calls each uploaded their matrix: " << line;
    products++;
  }
  EXPECT_GE(products, 3) << said;
}

// Weight matrices uploaded through the pinned staging buffers
// (staged_upload.h) read back from the device as the whole matrix's bytes
// (q8_0: its device layout), for buffers from under a row to the default
// 64 MB, matrices taking turns in them; and a backend's weights go that way,
// as its closing line says (none from pageable memory).
TEST(CudaDevice, StagedUploadsGiveTheDeviceTheWholeMatrixsBytes) {
  REQUIRE_DEVICE();
  using kernels::DType;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  int checked = 0;
  for (size_t staging : {size_t{1}, size_t{3000}, size_t{1} << 20, kernels::cuda::ModelCopies::kStagingBytes}) {
    kernels::cuda::ModelCopies copies(
        stream, [] {}, staging);
    std::vector<std::vector<unsigned char>> hosts;
    std::vector<std::pair<kernels::Weights, const void*>> sent;
    for (DType t : {DType::kF32, DType::kBF16, DType::kQ8_0})
      for (auto [rows, cols] : {std::pair{37, 288}, {1, 32}, {300, 512}}) {
        std::vector<float> src(static_cast<size_t>(rows) * cols);
        for (size_t i = 0; i < src.size(); i++) src[i] = std::sin(0.37f * static_cast<float>(i) + rows) * 3.0f;
        hosts.emplace_back(kernels::RowBytes(t, cols) * rows);
        kernels::EncodeF32(t, src.data(), rows, cols, hosts.back().data());
        const kernels::Weights w{t, hosts.back().data(), rows, cols};
        auto dev = copies.Weights(w);
        ASSERT_TRUE(dev.ok()) << dev.status().message();
        sent.push_back({w, *dev});
      }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    for (const auto& [w, dev] : sent) {
      std::vector<unsigned char> want(static_cast<const unsigned char*>(w.data),
                                      static_cast<const unsigned char*>(w.data) + w.bytes());
      if (w.dtype == DType::kQ8_0) kernels::cuda::q8::RepackMatrix(w, want.data(), 1);
      std::vector<unsigned char> got(w.bytes(), 0);
      ASSERT_EQ(cudaMemcpy(got.data(), dev, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_TRUE(got == want) << w.rows << "x" << w.cols << " dtype " << kernels::DTypeName(w.dtype)
                               << " staged through " << staging << " bytes";
      checked++;
    }
    const std::string said = copies.Summary();
    EXPECT_NE(said.find("9 staged through 2 pinned buffers"), std::string::npos) << said;
    EXPECT_EQ(said.find("pageable"), std::string::npos) << said;
  }
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  const std::unique_ptr<Model> model = SynthMmaShaped(DType::kQ8_0, "staged");
  ASSERT_TRUE(model);
  auto gpu = std::make_unique<Transformer>(*model, kernels::MakeBackend("cuda").value());
  const int ids[] = {1, 403, 407, 9};
  gpu->Prefill(ids, 4, 0);
  ASSERT_TRUE(gpu->status().ok()) << gpu->status().message();
  testing::internal::CaptureStderr();
  gpu.reset();
  const std::string closing = testing::internal::GetCapturedStderr();
  std::string uploads;
  std::istringstream lines(closing);
  for (std::string line; std::getline(lines, line);)
    if (line.find(" weight matrices, ") != std::string::npos) uploads = line;
  EXPECT_NE(uploads.find(" staged through 2 pinned buffers of "), std::string::npos) << closing;
  EXPECT_EQ(uploads.find("from pageable memory"), std::string::npos) << closing;
  std::printf("cuda staged uploads: %d matrices read back byte for byte at 4 staging sizes; a q8_0 backend: %s\n",
              checked, uploads.c_str());
}

TEST(CudaDevice, TensorCoreSlotStepsAreBatchInvariantAndCloseToDecode) {
  REQUIRE_DEVICE();
  for (kernels::DType t : {kernels::DType::kBF16, kernels::DType::kQ8_0}) TensorCoreSlotStepsFor(t);
}

// A bf16 prefill block runs as a tensor-core GEMM on activations rounded to
// bf16: its parity cost against the reference on the same bf16 weights, over
// the prompt's last row and 8 positions decoded from the cache it wrote.
// A synthetic model's prefill (100 rows: GEMMs) and 8 positions decoded from
// the cache it wrote, on the device and on the reference with the same
// weights stored as `t`: the worst and mean KL and the top-1 agreement,
// printed as `what` and bounded (worst KL <= 1e-2, at most 2 top-1 flips).
void PrefillParity(kernels::DType t, const std::string& what) {
  const std::unique_ptr<Model> model = SynthMmaShaped(t, "gemm");
  ASSERT_TRUE(model);
  Transformer ref(*model, kernels::MakeBackend("reference").value());
  Transformer gpu(*model, kernels::MakeBackend("cuda").value());
  const int prompt = 100, V = model->config.vocab_size;  // 100 rows >= the GEMM's 16
  std::vector<int> ids(prompt + 8);
  for (size_t i = 0; i < ids.size(); i++) ids[i] = static_cast<int>((3 + 7919 * i) % V);
  std::vector<std::vector<float>> a, b;
  const float* l = ref.Prefill(ids.data(), prompt, 0);
  a.emplace_back(l, l + V);
  l = gpu.Prefill(ids.data(), prompt, 0);
  b.emplace_back(l, l + V);
  for (int p = prompt; p < prompt + 8; p++) {
    l = ref.Forward(ids[p], p);
    a.emplace_back(l, l + V);
    l = gpu.Forward(ids[p], p);
    b.emplace_back(l, l + V);
  }
  ASSERT_TRUE(gpu.status().ok()) << gpu.status().message();
  double worst = 0, sum = 0;
  int top1 = 0;
  for (size_t r = 0; r < a.size(); r++) {
    const double kl = RowKl(a[r].data(), b[r].data(), V);
    worst = std::max(worst, kl);
    sum += kl;
    top1 += SameArgmax(a[r].data(), b[r].data(), V);
  }
  std::printf("cuda device: %s: worst KL %.3g, mean KL %.3g, top-1 %d of %zu rows\n", what.c_str(), worst,
              sum / a.size(), top1, a.size());
  EXPECT_LE(worst, 1e-2) << what;
  EXPECT_GE(top1, static_cast<int>(a.size()) - 2) << what;
}

TEST(CudaDevice, Bf16PrefillGemmStatesItsParityCost) {
  REQUIRE_DEVICE();
  PrefillParity(kernels::DType::kBF16, "bf16 prefill GEMM (activations in bf16) vs the reference on bf16 weights");
}

// VERITY_CUDA_PREFILL_BLOCK: the backend takes the block it names (32: the
// 100-row prompt above in passes of 32, 32, 32 and 4, the last below the
// GEMM's 16 rows), with the same parity bound as one pass; a value that is
// not a multiple of 16 in range stops the backend from starting, by name.
TEST(CudaDevice, PrefillBlockSizeIsTakenAndKeepsParity) {
  REQUIRE_DEVICE();
  const ScopedEnv unset("VERITY_CUDA_PREFILL_BLOCK", nullptr);  // the default below is the build's
  {
    const ScopedEnv block("VERITY_CUDA_PREFILL_BLOCK", "32");
    EXPECT_EQ(kernels::MakeBackend("cuda").value()->prefill_block(), 32);
    PrefillParity(kernels::DType::kBF16, "bf16 prefill in passes of 32 rows vs the reference");
    PrefillParity(kernels::DType::kQ8_0, "q8_0 prefill in passes of 32 rows vs the reference");
  }
  EXPECT_EQ(kernels::MakeBackend("cuda").value()->prefill_block(), 512) << "the default";
  const ScopedEnv bad("VERITY_CUDA_PREFILL_BLOCK", "100");
  auto refused = kernels::MakeBackend("cuda");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("VERITY_CUDA_PREFILL_BLOCK='100'"), std::string::npos)
      << refused.status().message();
}

// A decode step's norms in their products' launch (VERITY_CUDA_NORM_FUSED=1,
// LaunchRowsNormed): the normed row and every product bit for bit the
// separate calls' (the Backend:: defaults on the same device: RmsnormRows,
// then the fused products), q/k/v and gate/up with SwiGLU, for a decode
// step and a batched step of one row, in bf16 and q8_0, at narrow widths
// (128: a norm of 4 warps, fewer than a rows block's 8; 288: 9 warps) and
// the 1B's and 7B's (1024 threads: 32 warps, 4 for each real one), with
// row counts that leave the last block's warps idle after the norm's
// barriers. Then a synthetic model's decode steps, recorded ones included,
// give the same logits with the switch and without.
TEST(CudaDevice, NormedProductsGiveTheSeparateCallsBits) {
  REQUIRE_DEVICE();
  const ScopedEnv fused("VERITY_CUDA_NORM_FUSED", "1");
  auto k = kernels::MakeBackend("cuda").value();
  using Target = kernels::Backend::MatmulTarget;
  auto state = [&](size_t floats, uint32_t seed) { return RandomState(*k, floats, seed); };
  auto get = [&](kernels::StateBuffer& s) { return Downloaded(*k, s); };
  int checked = 0;
  for (kernels::DType t : {kernels::DType::kBF16, kernels::DType::kQ8_0})
    for (int dim : {128, 288, 2048, 4096}) {
      const int kv = 65, ffn = 524;  // dim + 130 and 524 stacked rows: the last block's warps partly idle
      const Encoded wq(t, dim, dim), wk(t, kv, dim), wv(t, kv, dim), w1(t, ffn, dim), w3(t, ffn, dim);
      const std::vector<float> weight = Random(static_cast<size_t>(dim), 7);
      for (bool independent : {false, true}) {
        const std::string what = std::string(kernels::DTypeName(t)) + " dim=" + std::to_string(dim) +
                                 (independent ? " (a batched step of one row)" : " (a decode step)");
        auto x = state(dim, 1), xb = state(dim, 2), xb2 = state(dim, 3);
        auto a = state(dim, 4), b = state(kv, 5), c = state(kv, 6), a2 = state(dim, 4), b2 = state(kv, 5),
             c2 = state(kv, 6);
        const Target sep[] = {{a->data(), &wq.w}, {b->data(), &wk.w}, {c->data(), &wv.w}};
        const Target one[] = {{a2->data(), &wq.w}, {b2->data(), &wk.w}, {c2->data(), &wv.w}};
        k->Backend::NormMatmulShared({xb->data(), x->data(), weight.data(), dim, 1e-5f}, 1, independent, sep, 3);
        k->NormMatmulShared({xb2->data(), x->data(), weight.data(), dim, 1e-5f}, 1, independent, one, 3);
        EXPECT_EQ(get(*xb), get(*xb2)) << what << ": the normed row";
        EXPECT_EQ(get(*a), get(*a2)) << what << ": q";
        EXPECT_EQ(get(*b), get(*b2)) << what << ": k";
        EXPECT_EQ(get(*c), get(*c2)) << what << ": v";
        auto g = state(ffn, 7), u = state(ffn, 8), g2 = state(ffn, 7), u2 = state(ffn, 8), xb3 = state(dim, 9);
        k->Backend::NormMatmulSwiGLU({xb->data(), x->data(), weight.data(), dim, 1e-6f}, 1, independent,
                                     {g->data(), &w1.w}, {u->data(), &w3.w});
        k->NormMatmulSwiGLU({xb3->data(), x->data(), weight.data(), dim, 1e-6f}, 1, independent, {g2->data(), &w1.w},
                            {u2->data(), &w3.w});
        EXPECT_EQ(get(*xb), get(*xb3)) << what << ": the FFN's normed row";
        EXPECT_EQ(get(*g), get(*g2)) << what << ": gate/up with SwiGLU";
        checked++;
      }
    }
  ASSERT_TRUE(k->status().ok()) << k->status().message();
  std::printf("cuda device: %d normed launches (q/k/v and gate/up each) gave the separate calls' bits\n", checked);
  testing::internal::CaptureStderr();
  k.reset();
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("verity: cuda: " + std::to_string(2 * checked) + " norms run in their products' launches"),
            std::string::npos)
      << "every fused call above ran normed: " << said;
  const std::unique_ptr<Model> model = SynthMmaShaped(kernels::DType::kBF16, "normed");
  ASSERT_TRUE(model);
  const int V = model->config.vocab_size, steps = 12;
  std::vector<float> logits[2];
  for (int on : {0, 1}) {
    const ScopedEnv e("VERITY_CUDA_NORM_FUSED", on ? "1" : "0");
    Transformer gpu(*model, kernels::MakeBackend("cuda").value());
    for (int p = 0; p < steps; p++) {
      const float* l = gpu.Forward(static_cast<int>((5 + 31 * p) % V), p);
      logits[on].insert(logits[on].end(), l, l + V);
    }
    ASSERT_TRUE(gpu.status().ok()) << gpu.status().message();
  }
  EXPECT_EQ(logits[0], logits[1]) << "a decode step's logits with its norms in the products' launches and without";
}

// A decode step's q8_0 products on int16 x (VERITY_CUDA_Q8_INT16=1,
// kernels/cuda/q8_int.h): each is simd::MatVecQ8_0's bits, x quantized on
// the device as simd::QuantizeX does, at widths with and without blocks
// past the last group of 8 (288, 800), 130 rows (a block's warps partly
// idle), and x holding a NaN (every product NaN, as on the CPU); the fused
// forms (q/k/v, SwiGLU, the residual add, the normed launches) give the
// separate calls' bits; a batched step's rows keep the f32-x kernel's bits
// (the switch off), a batched step's normed launch of one row too; the
// backend's closing line counts the launches.
TEST(CudaDevice, Q8IntRowsGiveTheFastKernelsBits) {
  REQUIRE_DEVICE();
  const ScopedEnv normed("VERITY_CUDA_NORM_FUSED", "1");
  std::unique_ptr<kernels::Backend> off;
  {
    const ScopedEnv e("VERITY_CUDA_Q8_INT16", "0");
    off = kernels::MakeBackend("cuda").value();
  }
  const ScopedEnv on("VERITY_CUDA_Q8_INT16", "1");
  auto k = kernels::MakeBackend("cuda").value();
  using Target = kernels::Backend::MatmulTarget;
  long products = 0;
  for (int cols : {64, 96, 288, 544, 800, 2048, 4096, 11008}) {
    const int rows = 130;
    const Encoded w(kernels::DType::kQ8_0, rows, cols);
    for (bool nan : {false, true}) {
      std::vector<float> x = Random(static_cast<size_t>(cols), cols, 1.5f);
      if (nan) x[static_cast<size_t>(cols) / 2] = NAN;
      kernels::simd::QuantizedX xq;
      kernels::simd::QuantizeX(x.data(), cols, &xq);
      std::vector<float> want(rows);
      kernels::simd::MatVecQ8_0(w.host.data(), xq, want.data(), 0, rows);
      auto dx = k->AllocateState(static_cast<size_t>(cols)), out = k->AllocateState(rows);
      k->Upload(dx->data(), x.data(), x.size());
      k->Matmul(out->data(), dx->data(), w.w);
      EXPECT_EQ(FloatBits(Downloaded(*k, *out)), FloatBits(want))
          << cols << " columns" << (nan ? ", x holding a NaN" : "") << ": simd::MatVecQ8_0's bits";
      products += rows;
      // A batched step of one row: the f32-x kernel, as with the switch off.
      auto dx0 = off->AllocateState(static_cast<size_t>(cols)), out0 = off->AllocateState(rows);
      off->Upload(dx0->data(), x.data(), x.size());
      off->MatmulRows(out0->data(), dx0->data(), w.w, 1);
      k->MatmulRows(out->data(), dx->data(), w.w, 1);
      EXPECT_EQ(FloatBits(Downloaded(*k, *out)), FloatBits(Downloaded(*off, *out0)))
          << cols << ": a batched step's row";
    }
  }
  auto state = [&](size_t floats, uint32_t seed) { return RandomState(*k, floats, seed); };
  auto get = [&](kernels::StateBuffer& s) { return Downloaded(*k, s); };
  for (auto [dim, ffn] : {std::pair{288, 768}, {2048, 5632}, {4096, 11008}}) {
    const kernels::DType t = kernels::DType::kQ8_0;
    const int kv = 65;
    const Encoded wq(t, dim, dim), wk(t, kv, dim), wv(t, kv, dim), w1(t, ffn, dim), w3(t, ffn, dim), w2(t, dim, ffn);
    const std::vector<float> weight = Random(static_cast<size_t>(dim), 7);
    const std::string what = "q8_0 int16 x, dim " + std::to_string(dim);
    auto x = state(dim, 1), h = state(ffn, 2), xb = state(dim, 3), xb2 = state(dim, 3);
    auto a = state(dim, 4), b = state(kv, 5), c = state(kv, 6), a2 = state(dim, 4), b2 = state(kv, 5),
         c2 = state(kv, 6);
    const Target sep[] = {{a->data(), &wq.w}, {b->data(), &wk.w}, {c->data(), &wv.w}};
    const Target one[] = {{a2->data(), &wq.w}, {b2->data(), &wk.w}, {c2->data(), &wv.w}};
    k->Backend::MatmulShared(x->data(), 1, sep, 3);
    k->MatmulShared(x->data(), 1, one, 3);
    EXPECT_EQ(get(*a), get(*a2)) << what << ": q of q/k/v in one launch";
    EXPECT_EQ(get(*c), get(*c2)) << what << ": v of q/k/v in one launch";
    auto g = state(ffn, 8), u = state(ffn, 9), g2 = state(ffn, 8), u2 = state(ffn, 9);
    k->Backend::MatmulSwiGLU(x->data(), 1, false, {g->data(), &w1.w}, {u->data(), &w3.w});
    k->MatmulSwiGLU(x->data(), 1, false, {g2->data(), &w1.w}, {u2->data(), &w3.w});
    EXPECT_EQ(get(*g), get(*g2)) << what << ": gate/up with SwiGLU";
    auto r = state(dim, 10), r2 = state(dim, 10), scratch = state(dim, 11);
    k->Backend::MatmulAddInPlace(r->data(), scratch->data(), h->data(), w2.w, 1, false);
    k->MatmulAddInPlace(r2->data(), scratch->data(), h->data(), w2.w, 1, false);
    EXPECT_EQ(get(*r), get(*r2)) << what << ": down with its residual add";
    k->Backend::NormMatmulShared({xb->data(), x->data(), weight.data(), dim, 1e-5f}, 1, false, sep, 3);
    k->NormMatmulShared({xb2->data(), x->data(), weight.data(), dim, 1e-5f}, 1, false, one, 3);
    EXPECT_EQ(get(*xb), get(*xb2)) << what << ": the normed row";
    EXPECT_EQ(get(*a), get(*a2)) << what << ": q of the normed launch";
    EXPECT_EQ(get(*b), get(*b2)) << what << ": k of the normed launch";
    k->Backend::NormMatmulSwiGLU({xb->data(), x->data(), weight.data(), dim, 1e-6f}, 1, false, {g->data(), &w1.w},
                                 {u->data(), &w3.w});
    k->NormMatmulSwiGLU({xb2->data(), x->data(), weight.data(), dim, 1e-6f}, 1, false, {g2->data(), &w1.w},
                        {u2->data(), &w3.w});
    EXPECT_EQ(get(*g), get(*g2)) << what << ": gate/up with SwiGLU of the normed launch";
    // A batched step of one row keeps the batched rows' bits (f32 x), normed or not.
    k->Backend::NormMatmulShared({xb->data(), x->data(), weight.data(), dim, 1e-5f}, 1, true, sep, 3);
    k->NormMatmulShared({xb2->data(), x->data(), weight.data(), dim, 1e-5f}, 1, true, one, 3);
    EXPECT_EQ(get(*a), get(*a2)) << what << ": q of a batched step's normed launch";
    EXPECT_EQ(get(*c), get(*c2)) << what << ": v of a batched step's normed launch";
  }
  ASSERT_TRUE(k->status().ok()) << k->status().message();
  ASSERT_TRUE(off->status().ok()) << off->status().message();
  std::printf("cuda device: %ld q8_0 decode products on int16 x were simd::MatVecQ8_0's bits\n", products);
  testing::internal::CaptureStderr();
  k.reset();
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("q8_0 product launches on int16 x"), std::string::npos) << said;
  off.reset();
}

// The flash-style prefill attention (flash_attention.cu, VERITY_CUDA_FLASH_PREFILL=1):
// launched directly for every head size it takes, MHA and GQA, blocks from
// position 0 and over a past (one past 20k positions), a sliding window,
// Gemma's scale and soft-cap, against run.c's attention row by row (TF32
// rounds q, k, v and the weights: ~1e-3 of the values' scale, as the
// simulation in cuda_flash_test says); a launch it cannot take refused by
// name; then a synthetic model's prefill through the backend with it.
TEST(CudaDevice, FlashPrefillAttentionMatchesTheReference) {
  REQUIRE_DEVICE();
  struct Case {
    int hs, heads, kv_heads, pos0, T, window;
    float scale_dim, softcap;
  };
  for (const Case c : {Case{64, 8, 2, 0, 16, 0, 0, 0}, Case{64, 8, 8, 0, 17, 0, 0, 0}, Case{128, 8, 2, 3, 100, 0, 0, 0},
                       Case{96, 6, 3, 300, 130, 0, 0, 0}, Case{128, 4, 1, 0, 512, 0, 0, 0},
                       Case{128, 4, 2, 20000, 64, 0, 0, 0}, Case{64, 8, 2, 250, 70, 200, 0, 0},
                       Case{64, 4, 2, 90, 40, 37, 24.0f, 50.0f}, Case{96, 4, 4, 0, 65, 0, 48.0f, 5.0f}}) {
    const int kv_dim = c.kv_heads * c.hs, qw = c.heads * c.hs, n = c.pos0 + c.T;
    const std::vector<float> q = Random(static_cast<size_t>(c.T) * qw, c.hs + c.T, 2.0f),
                             kc = Random(static_cast<size_t>(n) * kv_dim, n, 0.5f),
                             v = Random(static_cast<size_t>(n) * kv_dim, n + 1);
    std::vector<float> want(q.size()), scores(static_cast<size_t>(c.heads) * n);
    for (int t = 0; t < c.T; t++) {
      kernels::AttentionArgs a{&want[static_cast<size_t>(t) * qw],
                               &q[static_cast<size_t>(t) * qw],
                               kc.data(),
                               v.data(),
                               kv_dim,
                               scores.data(),
                               c.pos0 + t,
                               c.heads,
                               c.kv_heads,
                               c.hs,
                               n,
                               c.window,
                               c.scale_dim,
                               c.softcap};
      for (int h = 0; h < c.heads; h++) kernels::AttendOneHead(kernels::Windowed(a), h);
    }
    Dev<float> dq(q), dk(kc), dv(v), dout(std::vector<float>(q.size(), NAN));  // an output not written stays NaN
    cu::AttentionDeviceArgs d{dout.p, dq.p, dk.p, dv.p, kv_dim, qw, c.pos0, c.T, c.heads, c.kv_heads, c.hs};
    d.window = c.window, d.scale_dim = c.scale_dim, d.softcap = c.softcap;
    ASSERT_TRUE(cu::FlashAttentionTakes(d));
    const Status st =
        cu::LaunchFlashAttention(cu::PlanFlashAttention(c.heads, c.kv_heads, c.hs, c.T, kLim).value(), d, 0, "test");
    ASSERT_TRUE(st.ok()) << st.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ExpectClose(dout.Get(), want, 3e-3,
                "flash prefill attention head_size " + std::to_string(c.hs) + ", " + std::to_string(c.heads) + "/" +
                    std::to_string(c.kv_heads) + " heads, " + std::to_string(c.T) + " rows from position " +
                    std::to_string(c.pos0) + ", window " + std::to_string(c.window) + ", softcap " +
                    std::to_string(c.softcap));
  }
  Dev<float> buf(64 * 80);
  cu::AttentionDeviceArgs odd{buf.p, buf.p, buf.p, buf.p, 80, 80, 0, 16, 1, 1, 80};
  EXPECT_FALSE(cu::FlashAttentionTakes(odd));
  const Status refused = cu::LaunchFlashAttention(cu::PlanFlashAttention(1, 1, 64, 16, kLim).value(), odd, 0, "test");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("head_size 80"), std::string::npos) << refused.message();
  const ScopedEnv flash("VERITY_CUDA_FLASH_PREFILL", "1");
  testing::internal::CaptureStderr();
  PrefillParity(kernels::DType::kBF16, "bf16 prefill GEMM with flash attention vs the reference on bf16 weights");
  const std::string said = testing::internal::GetCapturedStderr();
  std::fputs(said.c_str(), stdout);
  // The backend says which path each prompt block's attention took: flash, every layer's.
  EXPECT_NE(said.find("prompt blocks' attention: 4 as flash tiles, 0 as GEMMs, 0 tiled"), std::string::npos) << said;
}

// The worst of |got - want| / (1 + |want|) over a set of launches, printed once.
struct Worst {
  double err = 0;
  size_t values = 0;
  void Add(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); i++) {
      ASSERT_TRUE(std::isfinite(got[i])) << what << " [" << i << "]";
      err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]) / (1.0 + std::fabs(want[i])));
    }
    values += got.size();
  }
};

// The split decode attention (flash-decoding: chunks of kDecodeChunk
// positions, partials combined by the last block of a head) against the
// reference at the chunks' edges, for MHA and GQA, heads of 64 and 128 (the
// vector shapes), 256, and 8 and 96 (the masked shape). At every position:
// the position read on the device gives the eager bits, and three more
// launches (each finding the counters its predecessor put back to zero) give
// them again; the counters end at zero.
TEST(CudaDevice, SplitDecodeAttentionMatchesTheReferenceAtChunkEdges) {
  REQUIRE_DEVICE();
  const int C = cu::kDecodeChunk;
  struct Case {
    int heads, kv_heads, hs, seq_len;
  };
  for (const Case c :
       {Case{8, 8, 64, 4 * C + 17}, Case{8, 2, 64, 4 * C + 17}, Case{8, 8, 128, 3 * C}, Case{8, 2, 128, 3 * C},
        Case{4, 1, 256, 2 * C + 1}, Case{8, 4, 8, 3 * C}, Case{6, 3, 96, 3 * C}, Case{8, 2, 64, 70001}}) {
    const std::string what = "split decode attention heads=" + std::to_string(c.heads) +
                             " kv_heads=" + std::to_string(c.kv_heads) + " head_size=" + std::to_string(c.hs) +
                             " seq_len=" + std::to_string(c.seq_len);
    const int kv_dim = c.kv_heads * c.hs, q_dim = c.heads * c.hs;
    const std::vector<float> k = Random(static_cast<size_t>(c.seq_len) * kv_dim, c.hs + 1, 0.3f),
                             v = Random(static_cast<size_t>(c.seq_len) * kv_dim, c.hs + 2);
    auto plan = cu::PlanDecodeAttention(c.heads, c.kv_heads, c.hs, c.seq_len, kLim);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    Dev<float> dk(k), dv(v), dout(q_dim), partials(static_cast<size_t>(cu::DecodeAttentionPartialFloats(*plan, c.hs)));
    Dev<unsigned int> counters(static_cast<size_t>(c.heads));
    Dev<int> dpos(1);
    const cu::DecodeAttentionScratch scratch{partials.p, counters.p};
    std::vector<int> positions = {0, 1, C - 1, C, C + 1, 2 * C + 5, c.seq_len - 1};
    if (c.seq_len > 65536) positions = {0, 65535, 65536, 70000};
    Worst worst;
    int launched = 0;
    for (int pos : positions) {
      if (pos >= c.seq_len) continue;
      launched++;
      const std::vector<float> q = Random(q_dim, pos + 7);
      std::vector<float> scores(static_cast<size_t>(c.heads) * c.seq_len), want(q_dim);
      kernels::AttentionArgs a{want.data(), q.data(), k.data(),   v.data(), kv_dim,   scores.data(),
                               pos,         c.heads,  c.kv_heads, c.hs,     c.seq_len};
      for (int h = 0; h < c.heads; h++) kernels::AttendOneHead(a, h);
      Dev<float> dq(q);
      cu::AttentionDeviceArgs d{dout.p, dq.p, dk.p, dv.p, kv_dim, q_dim, pos, 1, c.heads, c.kv_heads, c.hs};
      ASSERT_TRUE(cu::LaunchDecodeAttention(*plan, d, scratch, 0, "t").ok());
      const std::vector<float> eager = dout.Get();
      worst.Add(eager, want, what + " pos=" + std::to_string(pos));
      // The position read on the device (a recorded step), then relaunched.
      ASSERT_EQ(cudaMemcpy(dpos.p, &pos, sizeof pos, cudaMemcpyHostToDevice), cudaSuccess);
      d.pos0 = 0;
      d.pos0_at = dpos.p;
      for (int again = 0; again < 4; again++) {
        ASSERT_EQ(cudaMemset(dout.p, 0, q_dim * sizeof(float)), cudaSuccess);
        ASSERT_TRUE(cu::LaunchDecodeAttention(*plan, d, scratch, 0, "t").ok());
        const std::vector<float> got = dout.Get();
        ASSERT_EQ(std::memcmp(got.data(), eager.data(), q_dim * sizeof(float)), 0)
            << what << " pos=" << pos << ": launch " << again
            << " with the position on the device differs from the eager one";
      }
      for (unsigned int n : counters.Get()) ASSERT_EQ(n, 0u) << what << " pos=" << pos << ": a counter was left set";
    }
    std::printf(
        "cuda device: %s: %zu values at %d positions, worst relative error %.3g, pos0_at and 4 relaunches "
        "bit-identical\n",
        what.c_str(), worst.values, launched, worst.err);
    EXPECT_LE(worst.err, 1e-4) << what;
  }
  // A position past the capacity launched for (the recorded step of a
  // context longer than seq_len, which the engine never makes) is NaN, not a
  // read past the scratch.
  const int hs = 64;
  auto plan = cu::PlanDecodeAttention(2, 2, hs, C, kLim).value();
  Dev<float> big(std::vector<float>(static_cast<size_t>(2 * C) * 2 * hs, 0.5f)), dq(2 * hs), dout(2 * hs),
      partials(static_cast<size_t>(cu::DecodeAttentionPartialFloats(plan, hs)));
  Dev<unsigned int> counters(2);
  const int past = C + 3;
  Dev<int> dpos(std::vector<int>{past});
  cu::AttentionDeviceArgs d{dout.p, dq.p, big.p, big.p, 2 * hs, 2 * hs, 0, 1, 2, 2, hs, dpos.p};
  ASSERT_TRUE(cu::LaunchDecodeAttention(plan, d, {partials.p, counters.p}, 0, "t").ok());
  for (float x : dout.Get()) ASSERT_TRUE(std::isnan(x)) << "a position past the capacity gives NaN";
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

void RecordedDecodeAttention(int C, int window, float scale_dim, float softcap) {
  const int heads = 8, kv_heads = 2, hs = 128, seq_len = 3 * C + 40;
  const int kv_dim = kv_heads * hs, q_dim = heads * hs;
  const std::vector<float> k = Random(static_cast<size_t>(seq_len) * kv_dim, 31, 0.3f),
                           v = Random(static_cast<size_t>(seq_len) * kv_dim, 32);
  struct Side {
    std::unique_ptr<kernels::Backend> b;
    std::unique_ptr<kernels::StateBuffer> kc, vc, q, out;
  };
  auto make = [&]() {
    Side s{kernels::MakeBackend("cuda").value(), nullptr, nullptr, nullptr, nullptr};
    s.kc = s.b->AllocateState(k.size());
    s.vc = s.b->AllocateState(v.size());
    s.q = s.b->AllocateState(q_dim);
    s.out = s.b->AllocateState(q_dim);
    s.b->Upload(s.kc->data(), k.data(), k.size());
    s.b->Upload(s.vc->data(), v.data(), v.size());
    return s;
  };
  Side rec = make(), eager = make();
  std::vector<float> scores(static_cast<size_t>(heads) * seq_len), want(q_dim), a_bits(q_dim), b_bits(q_dim);
  Worst worst;
  const std::vector<int> positions = {0, 1, C - 1, C, C + 1, 2 * C + 7, 3 * C, seq_len - 1};
  for (int pos : positions) {
    const std::vector<float> q = Random(q_dim, 100 + pos);
    auto args = [&](Side& s) {
      return kernels::AttentionArgs{s.out->data(), s.q->data(), s.kc->data(), s.vc->data(), kv_dim,
                                    scores.data(), pos,         heads,        kv_heads,     hs,
                                    seq_len,       window,      scale_dim,    softcap};
    };
    rec.b->Upload(rec.q->data(), q.data(), q.size());
    eager.b->Upload(eager.q->data(), q.data(), q.size());
    rec.b->BeginDecodeStep(0, pos);
    rec.b->Attention(args(rec));
    rec.b->EndDecodeStep();
    eager.b->Attention(args(eager));
    rec.b->Download(a_bits.data(), rec.out->data(), q_dim);
    eager.b->Download(b_bits.data(), eager.out->data(), q_dim);
    ASSERT_TRUE(rec.b->status().ok()) << rec.b->status().message();
    ASSERT_TRUE(eager.b->status().ok()) << eager.b->status().message();
    EXPECT_EQ(std::memcmp(a_bits.data(), b_bits.data(), q_dim * sizeof(float)), 0)
        << "position " << pos << ": the recorded step's attention differs from the eager one";
    kernels::AttentionArgs a{want.data(), q.data(), k.data(), v.data(), kv_dim, scores.data(), pos,
                             heads,       kv_heads, hs,       seq_len,  window, scale_dim,     softcap};
    for (int h = 0; h < heads; h++) kernels::AttendOneHead(kernels::Windowed(a), h);
    worst.Add(a_bits, want, "recorded attention pos=" + std::to_string(pos));
  }
  std::printf(
      "cuda device: recorded decode attention (GQA 8/2, head_size 128, seq_len %d, window %d, scale_dim %g, softcap "
      "%g): %zu positions bit-identical to eager, worst relative error %.3g\n",
      seq_len, window, scale_dim, softcap, positions.size(), worst.err);
  EXPECT_LE(worst.err, 1e-4);
}

// Through the backend: a decoded position's attention recorded as a CUDA
// graph (the first bracketed step runs as issued, the second is captured,
// the rest replay it with the position read on the device) gives the bits of
// the same call made eagerly on another backend, across chunk edges; plainly,
// and with a window longer than a chunk, Gemma's score scale and a soft-cap
// (the window's first position found on the device at every replay).
TEST(CudaDevice, RecordedDecodeAttentionGivesTheEagerBits) {
  REQUIRE_DEVICE();
  const int C = cu::kDecodeChunk;
  for (const auto& [window, scale_dim, softcap] : {std::tuple{0, 0.0f, 0.0f}, std::tuple{C + 3, 48.0f, 5.0f}})
    RecordedDecodeAttention(C, window, scale_dim, softcap);
}

// A q8_0 prefill block (16 or more rows) runs as a tensor-core GEMM on bf16
// copies of the weights (dequantized on the device) and of the activations.
// Its cost against the exact (double) product of the q8_0 weights, measured
// relative to sum_j |w_ij x_tj| (the scale of a dot product's rounding):
//   bf16 keeps 8 significant bits, so rounding each weight and each
//   activation is a relative error of at most u = 2^-9 apiece; a product of
//   two bf16 values is exact in f32 (16 bits), so each term is off by at most
//   (1+u)^2 - 1 = 2u + u^2 of itself. The f32 accumulation of `cols` terms,
//   in any order and split cuBLAS picks, loses less than 2 ulp (2 * 2^-23)
//   of the running magnitude, itself at most the sum of the magnitudes, per
//   term added: 2^-23 for rounding to nearest (2^-24) or truncating, and as
//   much again for a tensor core that aligns each product to the largest
//   exponent and truncates it (Fasi et al., "Numerical behavior of NVIDIA
//   tensor cores", 2021). So
//     |got - exact| <= (2u + u^2 + 2 cols 2^-23 (1 + u)^2) sum_j |w_ij x_tj|,
//   4.9e-3 at 4096 columns, 4.0e-3 at 288. A wrong scale, block or layout
//   is off by O(1) of that sum. The roundings' signs are random, so the
//   measure is far inside the bound: a CPU simulation of the two roundings
//   on these shapes (numpy, exact sums) gave a median of 4e-5 (4096
//   columns) to 1.4e-4 (288) and a worst of 2.1e-4 to 8.3e-4. Any value
//   above 1e-6 shows the bf16 path ran (the f32 kernels are ~1e-8 here).
TEST(CudaDevice, Q8_0PrefillGemmStatesItsParityCost) {
  REQUIRE_DEVICE();
  const double u = std::ldexp(1.0, -9), u32 = std::ldexp(1.0, -23);
  for (auto [rows, cols] : {std::pair{1000, 4096}, {2048, 1376}, {64, 288}}) {
    auto k = kernels::MakeBackend("cuda").value();  // one per matrix: its weight cache is keyed by the host pointer
    const Encoded e(kernels::DType::kQ8_0, rows, cols);
    const double bound = 2 * u + u * u + 2.0 * cols * u32 * (1 + u) * (1 + u);
    for (int T : {16, 100}) {
      const std::vector<float> x = Random(static_cast<size_t>(T) * cols, 40 + T), want = ExactMatmul(e.w, x, T);
      auto dx = k->AllocateState(x.size()), dout = k->AllocateState(static_cast<size_t>(T) * rows);
      k->Upload(dx->data(), x.data(), x.size());
      k->MatmulBatch(dout->data(), dx->data(), e.w, T);
      std::vector<float> got(static_cast<size_t>(T) * rows), row(cols);
      k->Download(got.data(), dout->data(), got.size());
      ASSERT_TRUE(k->status().ok()) << k->status().message();
      double worst = 0, worst_plain = 0;
      for (int i = 0; i < rows; i++) {
        kernels::DecodeRow(e.w, i, row.data());
        for (int t = 0; t < T; t++) {
          double mag = 0;
          for (int j = 0; j < cols; j++)
            mag += std::fabs(static_cast<double>(row[j]) * x[static_cast<size_t>(t) * cols + j]);
          const size_t at = static_cast<size_t>(t) * rows + i;
          ASSERT_TRUE(std::isfinite(got[at]));
          const double err = std::fabs(static_cast<double>(got[at]) - want[at]);
          worst = std::max(worst, err / mag);
          worst_plain = std::max(worst_plain, err / (1.0 + std::fabs(want[at])));
        }
      }
      std::printf(
          "cuda device: q8_0 prefill GEMM %dx%d T=%d (weights and activations in bf16) vs the exact product: "
          "worst error %.3g of sum|w x| (bound %.3g), %.3g relative to 1+|value|\n",
          rows, cols, T, worst, bound, worst_plain);
      EXPECT_LE(worst, bound);
      EXPECT_GT(worst, 1e-6) << "no bf16 rounding seen: the GEMM path did not run";
    }
  }
  // What it costs a model: the same measure as the bf16 prefill's.
  PrefillParity(kernels::DType::kQ8_0,
                "q8_0 prefill GEMM (weights and activations in bf16) vs the reference on q8_0 weights");
}
// llama.cpp's Q4_K and Q6_K blocks (issue 43; block_rows.h), read where they
// lie: the blocks kernel close to the exact product of the dequantized
// weights and batch invariant (row t of 13 vectors is vector t alone, bit
// for bit), through the backend for a decode step, batched rows and a
// prefill block (bf16 GEMM on the expanded weights: the q8_0 GEMM's bound).
TEST(CudaDevice, KQuantProductsMatchTheExactProductAndAreBatchInvariant) {
  REQUIRE_DEVICE();
  const double u = std::ldexp(1.0, -9), u32 = std::ldexp(1.0, -23);
  for (uint32_t type : {cu::kq::kQ4_K, cu::kq::kQ6_K})
    for (auto [rows, cols] : {std::pair{64, 256}, {1000, 4096}, {2048, 768}}) {
      const std::string what = std::string("block ") + (type == cu::kq::kQ4_K ? "Q4_K " : "Q6_K ") +
                               std::to_string(rows) + "x" + std::to_string(cols);
      const std::vector<float> wf = Random(static_cast<size_t>(rows) * cols, rows + cols);
      std::string blocks;
      ASSERT_TRUE(quants::Quantize(type, wf.data(), static_cast<int64_t>(wf.size()), &blocks, what).ok());
      const kernels::Weights w{kernels::DType::kBlock, blocks.data(), rows, cols, BlockFormatOf(type)};
      ASSERT_NE(w.block, nullptr);
      const int T = 13;
      const std::vector<float> x = Random(static_cast<size_t>(T) * cols, 11), want = ExactMatmul(w, x, T);
      Dev<unsigned char> dw(std::vector<unsigned char>(blocks.begin(), blocks.end()));
      Dev<float> dx(x), dbatch(static_cast<size_t>(T) * rows), done(rows);
      ASSERT_TRUE(cu::LaunchBlockRows(cu::PlanBlockRows(type, rows, cols, T, kLim).value(), type, dbatch.p, dw.p, dx.p,
                                      rows, cols, T, 0, "test")
                      .ok());
      const std::vector<float> batch = dbatch.Get();
      ExpectClose(batch, want, 1e-4, what);
      for (int v = 0; v < T; v++) {
        ASSERT_TRUE(cu::LaunchBlockRows(cu::PlanBlockRows(type, rows, cols, 1, kLim).value(), type, done.p, dw.p,
                                        dx.p + static_cast<size_t>(v) * cols, rows, cols, 1, 0, "test")
                        .ok());
        const std::vector<float> one = done.Get();
        EXPECT_EQ(std::memcmp(one.data(), batch.data() + static_cast<size_t>(v) * rows, rows * sizeof(float)), 0)
            << what << ": vector " << v << " alone differs from its row of the batch";
      }
      // Through the backend: a decode step, batched rows, a prefill block.
      auto k = kernels::MakeBackend("cuda").value();
      ASSERT_TRUE(k->runs_block_type(type));
      for (int n : {1, T, 100}) {
        const std::vector<float> xn = Random(static_cast<size_t>(n) * cols, 50 + n), wantn = ExactMatmul(w, xn, n);
        auto sx = k->AllocateState(xn.size()), sout = k->AllocateState(static_cast<size_t>(n) * rows);
        k->Upload(sx->data(), xn.data(), xn.size());
        if (n == T) {
          k->MatmulRows(sout->data(), sx->data(), w, n);
        } else {
          k->MatmulBatch(sout->data(), sx->data(), w, n);
        }
        const std::vector<float> got = Downloaded(*k, *sout);
        ASSERT_TRUE(k->status().ok()) << k->status().message();
        if (n < 16) {
          ExpectClose(got, wantn, 1e-4, what + " backend n=" + std::to_string(n));
          continue;
        }
        std::vector<float> row(cols);
        double worst = 0;
        for (int i = 0; i < rows; i++) {
          kernels::DecodeRow(w, i, row.data());
          for (int t = 0; t < n; t++) {
            double mag = 0;
            for (int j = 0; j < cols; j++)
              mag += std::fabs(static_cast<double>(row[j]) * xn[static_cast<size_t>(t) * cols + j]);
            const size_t at = static_cast<size_t>(t) * rows + i;
            worst = std::max(worst, std::fabs(static_cast<double>(got[at]) - wantn[at]) / mag);
          }
        }
        const double bound = 2 * u + u * u + 2.0 * cols * u32 * (1 + u) * (1 + u);
        std::printf("cuda device: %s prefill GEMM T=%d: worst error %.3g of sum|w x| (bound %.3g)\n", what.c_str(), n,
                    worst, bound);
        EXPECT_LE(worst, bound) << what;
        EXPECT_GT(worst, 1e-6) << what << ": no bf16 rounding seen: the GEMM path did not run";
      }
    }
  auto k = kernels::MakeBackend("cuda").value();
  EXPECT_FALSE(k->runs_block_type(13)) << "Q5_K has no CUDA kernel: a model holding it must be refused at load";
}

// ---- CudaBench: timings, not verdicts (run by name: scripts/device-check.sh's
// profile step; never in the CudaDevice.* suite). Each prints a line; the only
// failures are launches that fail or forms that disagree in their bits.

// Weights of a rows-kernel product on the device as `copies` copies, so that a
// run cycling through them streams from HBM, not from the 50 MB L2: bf16 of
// small exponents, or q8_0 (device layout) of random quants and scales 1/64.
struct StreamedWeights {
  Dev<unsigned char> bytes;
  size_t each;
  StreamedWeights(kernels::DType t, int rows, int cols, int copies)
      : bytes(Fill(t, rows, cols, copies)), each(kernels::RowBytes(t, cols) * rows) {}
  static std::vector<unsigned char> Fill(kernels::DType t, int rows, int cols, int copies) {
    const size_t each = kernels::RowBytes(t, cols) * rows;
    std::vector<unsigned char> h(each * copies);
    uint64_t state = 0x9e3779b97f4a7c15ull;
    auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull, state >> 33; };
    if (t == kernels::DType::kBF16) {
      for (size_t i = 0; i + 1 < h.size(); i += 2) {
        const uint32_t r = static_cast<uint32_t>(next());
        const uint16_t v = static_cast<uint16_t>(((r & 1) << 15) | ((120 + r % 8) << 7) | ((r >> 3) & 0x7f));
        std::memcpy(&h[i], &v, 2);
      }
    } else {  // each copy: its quants, then its scales (q8_layout.h)
      const float scale = 1.0f / 64;
      const int64_t n = int64_t{rows} * cols;
      for (int c = 0; c < copies; c++) {
        unsigned char* at = h.data() + each * c;
        for (int64_t i = 0; i < n; i++) at[i] = static_cast<unsigned char>(next());
        for (int64_t b = 0; b < n / 32; b++) std::memcpy(at + n + 4 * b, &scale, 4);
      }
    }
    return h;
  }
  const void* copy(int i) const { return bytes.p + each * i; }
};

// Every decode-step form of the rows kernel (kRowsForms) on the 7B and 1B
// products, bf16 and q8_0: device time a launch and the weights' GB/s, and
// every form's output the bits of form 0.
TEST(CudaBench, RowsForms) {
  REQUIRE_DEVICE();
  struct Shape {
    const char* name;
    int rows, cols;
    cu::RowsEpilogue epi;
  };
  const Shape shapes[] = {
      {"7B qkv", 3 * 4096, 4096, cu::RowsEpilogue::kStore},   {"7B o", 4096, 4096, cu::RowsEpilogue::kAdd},
      {"7B gate/up", 11008, 4096, cu::RowsEpilogue::kSwiGLU}, {"7B down", 4096, 11008, cu::RowsEpilogue::kAdd},
      {"7B head", 32000, 4096, cu::RowsEpilogue::kStore},     {"1B qkv", 2048 + 512, 2048, cu::RowsEpilogue::kStore},
      {"1B o", 2048, 2048, cu::RowsEpilogue::kAdd},           {"1B gate/up", 5632, 2048, cu::RowsEpilogue::kSwiGLU},
      {"1B down", 2048, 5632, cu::RowsEpilogue::kAdd},        {"1B head", 32000, 2048, cu::RowsEpilogue::kStore}};
  cudaEvent_t e0, e1;
  ASSERT_EQ(cudaEventCreate(&e0), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e1), cudaSuccess);
  for (kernels::DType t : {kernels::DType::kBF16, kernels::DType::kQ8_0})
    for (const Shape& sh : shapes) {
      const bool swiglu = sh.epi == cu::RowsEpilogue::kSwiGLU;
      const size_t each = kernels::RowBytes(t, sh.cols) * sh.rows * (swiglu ? 2 : 1);
      const int copies = static_cast<int>(std::max<size_t>(2, (size_t{400} << 20) / each + 1)) * (swiglu ? 2 : 1);
      const StreamedWeights w(t, sh.rows, sh.cols, copies);
      const std::vector<float> x = Random(sh.cols, 5, 0.5f);
      Dev<float> dx(x), out(sh.rows);
      std::vector<float> first;
      std::string line = std::string("cuda bench: rows ") + kernels::DTypeName(t) + " " + sh.name + " " +
                         std::to_string(sh.rows) + "x" + std::to_string(sh.cols) + ":";
      for (int form = 0; form < cu::kRowsFormCount; form++) {
        const cu::LaunchPlan plan = cu::PlanRows(t, sh.rows, sh.cols, 1, kLim, form).value();
        auto launch = [&](int i) {
          cu::RowsTargets tg;
          tg.count = 1;
          tg.begin[1] = sh.rows;
          tg.w[0] = w.copy(swiglu ? 2 * (i % (copies / 2)) : i % copies);
          if (swiglu) tg.w[1] = w.copy(2 * (i % (copies / 2)) + 1);
          tg.out[0] = out.p;
          return cu::LaunchRowsFused(plan, t, sh.epi == cu::RowsEpilogue::kAdd ? cu::RowsEpilogue::kStore : sh.epi, tg,
                                     dx.p, sh.cols, 1, 0, "bench");
        };
        ASSERT_TRUE(launch(0).ok());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const std::vector<float> got = out.Get();
        if (form == 0) first = got;
        EXPECT_EQ(std::memcmp(got.data(), first.data(), got.size() * sizeof(float)), 0)
            << sh.name << " form " << form << " differs from form 0";
        const int n = 40;
        for (int i = 1; i <= 4; i++) ASSERT_TRUE(launch(i).ok());  // warm
        ASSERT_EQ(cudaEventRecord(e0, 0), cudaSuccess);
        for (int i = 0; i < n; i++) ASSERT_TRUE(launch(i).ok());
        ASSERT_EQ(cudaEventRecord(e1, 0), cudaSuccess);
        ASSERT_EQ(cudaEventSynchronize(e1), cudaSuccess);
        float ms = 0;
        ASSERT_EQ(cudaEventElapsedTime(&ms, e0, e1), cudaSuccess);
        const double us = 1e3 * ms / n, gb_s = static_cast<double>(each) / (us * 1e-6) / 1e9;
        char part[160];
        std::snprintf(part, sizeof part, " | form %d (%d row/warp, unroll %d) %.2f us %.0f GB/s", form,
                      cu::kRowsForms[form].rows_per_warp, cu::kRowsForms[form].unroll, us, gb_s);
        line += part;
      }
      std::printf("%s\n", line.c_str());
    }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

// A batched step's products on the CUDA cores (the rows kernel's batched
// form) and on the tensor cores (mma_rows.cu), 8 and 32 vectors, bf16 and q8_0, on
// the 1B's and 7B's shapes, the weights streamed past L2 (StreamedWeights):
// us a launch, the weights' GB/s, and us per vector against a decode
// step's (one vector, form 0). For VERITY_CUDA_BATCH_MMA's default.
TEST(CudaBench, BatchedRowsOnTensorCores) {
  REQUIRE_DEVICE();
  struct Shape {
    const char* name;
    int rows, cols;
  };
  const Shape shapes[] = {{"1B qkv", 2048 + 512, 2048}, {"1B o", 2048, 2048},       {"1B up", 5632, 2048},
                          {"1B down", 2048, 5632},      {"7B qkv", 3 * 4096, 4096}, {"7B down", 4096, 11008}};
  cudaEvent_t e0, e1;
  ASSERT_EQ(cudaEventCreate(&e0), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&e1), cudaSuccess);
  for (kernels::DType t : {kernels::DType::kBF16, kernels::DType::kQ8_0})
    for (const Shape& sh : shapes) {
      const size_t each = kernels::RowBytes(t, sh.cols) * sh.rows;
      const int copies = static_cast<int>(std::max<size_t>(2, (size_t{400} << 20) / each + 1));
      const StreamedWeights w(t, sh.rows, sh.cols, copies);
      const std::vector<float> x = Random(static_cast<size_t>(32) * sh.cols, 5, 0.5f);
      Dev<float> dx(x), out(static_cast<size_t>(32) * sh.rows);
      // Mean us of 40 launches of `plan` (after 4 to warm), each on the next copy.
      auto time = [&](const cu::LaunchPlan& plan, bool mma, int n) {
        auto launch = [&](int i) {
          cu::RowsTargets tg;
          tg.count = 1, tg.begin[1] = sh.rows, tg.w[0] = w.copy(i % copies), tg.out[0] = out.p;
          return mma ? cu::LaunchRowsMma(plan, t, cu::RowsEpilogue::kStore, tg, dx.p, sh.cols, n, 0, "bench")
                     : cu::LaunchRowsFused(plan, t, cu::RowsEpilogue::kStore, tg, dx.p, sh.cols, n, 0, "bench");
        };
        for (int i = 0; i < 4; i++) EXPECT_TRUE(launch(i).ok());
        EXPECT_EQ(cudaEventRecord(e0, 0), cudaSuccess);
        for (int i = 0; i < 40; i++) EXPECT_TRUE(launch(i).ok());
        EXPECT_EQ(cudaEventRecord(e1, 0), cudaSuccess);
        EXPECT_EQ(cudaEventSynchronize(e1), cudaSuccess);
        float ms = 0;
        EXPECT_EQ(cudaEventElapsedTime(&ms, e0, e1), cudaSuccess);
        return 1e3 * ms / 40;
      };
      const double one = time(cu::PlanRows(t, sh.rows, sh.cols, 1, kLim).value(), false, 1);
      std::string line = std::string("cuda bench: batched rows ") + kernels::DTypeName(t) + " " + sh.name + " " +
                         std::to_string(sh.rows) + "x" + std::to_string(sh.cols) + ": 1 vector " +
                         std::to_string(one).substr(0, 6) + " us";
      for (int n : {8, 32}) {
        const double cores = time(cu::PlanRows(t, sh.rows, sh.cols, n, kLim).value(), false, n);
        const double tensor = time(cu::PlanRowsMma(t, sh.rows, sh.cols, n, false, kLim).value(), true, n);
        char part[200];
        std::snprintf(part, sizeof part,
                      " | %d vectors: CUDA cores %.1f us, tensor cores %.1f us (%.0f GB/s, %.2fx the cores; a vector "
                      "%.3fx a decode step's time)",
                      n, cores, tensor, static_cast<double>(each) / (tensor * 1e-6) / 1e9, cores / tensor,
                      tensor / n / one);
        line += part;
      }
      std::printf("%s\n", line.c_str());
    }
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
}

// A prompt block's products as the backend runs them (MatmulBatch: the
// activations to bf16, then cuBLAS's GEMM), against the same rows as
// independent vectors (MatmulRows: the CUDA-core rows kernel, and the
// tensor-core one under VERITY_CUDA_BATCH_MMA=1), for 16 to 512 rows on
// the 1B's and 7B's widest shapes: us a call by the wall clock (20 calls,
// then a download waits for them), host overhead included, the weights
// uploaded before the clock starts: where a prompt block should stop being
// a GEMM. (The profile of 2026-12-04 put a 32-row GEMM at ~10 GB/s: each
// layer's upload counted in its mean, which the profile now sets apart.)
TEST(CudaBench, PromptBlockProductsByRows) {
  REQUIRE_DEVICE();
  const kernels::DType t = kernels::DType::kBF16;
  for (auto [rows, cols] : {std::pair{5632, 2048}, {11008, 4096}}) {
    const Encoded e(t, rows, cols);
    for (bool mma : {false, true}) {
      const ScopedEnv env("VERITY_CUDA_BATCH_MMA", mma ? "1" : "0");
      auto k = kernels::MakeBackend("cuda").value();
      std::string line = "cuda bench: prompt block " + std::to_string(rows) + "x" + std::to_string(cols) +
                         (mma ? " (rows on tensor cores)" : " (rows on CUDA cores)") + ":";
      for (int T : {16, 32, 64, 128, 512}) {
        auto x = RandomState(*k, static_cast<size_t>(T) * cols, 3);
        auto out = k->AllocateState(static_cast<size_t>(T) * rows);
        std::vector<float> one(1);
        auto time = [&](bool as_rows) {
          for (int i = 0; i < 3; i++)  // warm: the upload, cuBLAS's kernels, the plans
            as_rows ? k->MatmulRows(out->data(), x->data(), e.w, T) : k->MatmulBatch(out->data(), x->data(), e.w, T);
          k->Download(one.data(), out->data(), 1);
          const auto t0 = std::chrono::steady_clock::now();
          for (int i = 0; i < 20; i++)
            as_rows ? k->MatmulRows(out->data(), x->data(), e.w, T) : k->MatmulBatch(out->data(), x->data(), e.w, T);
          k->Download(one.data(), out->data(), 1);
          return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 20;
        };
        const double gemm = time(false), as_rows = time(true);
        char part[160];
        std::snprintf(part, sizeof part, " | T=%d GEMM %.1f us (%.1f TFLOP/s), as rows %.1f us", T, gemm,
                      2.0 * rows * cols * T / (gemm * 1e-6) / 1e12, as_rows);
        line += part;
      }
      ASSERT_TRUE(k->status().ok()) << k->status().message();
      std::printf("%s\n", line.c_str());
    }
  }
}

#endif  // VERITY_HAVE_CUDA

}  // namespace
}  // namespace verity
