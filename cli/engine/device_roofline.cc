// `verity roofline --backend cuda`: the GPU's measurement, which the ledger's
// roofline command (cli/ledger/roofline_command.cc) is handed by `verity`.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/engine/commands.h"
#include "kernels/cuda/device_roofline.h"
#include "measure/roofline.h"

namespace verity::cli {

// Device 0 measured, in the roofline record: one point each ("threads" 1 is
// the device), FMA throughput as its bf16 tensor-core GFLOP/s.
Result<measure::Roofline> MeasureCudaRooflineRecord(int buffer_mb, int repetitions, const std::string& fingerprint) {
  kernels::cuda::DeviceRooflineOptions o;
  o.buffer_bytes = static_cast<uint64_t>(buffer_mb) << 20;
  o.repetitions = repetitions;
  VERITY_ASSIGN_OR_RETURN(const kernels::cuda::DeviceMeasurement m, kernels::MeasureCudaRoofline(o));
  if (m.read_gb_s.empty() || m.bf16_tflops.empty()) return Status::Error("roofline --backend cuda: nothing was timed");
  std::vector<double> gflops;
  for (double t : m.bf16_tflops) gflops.push_back(t * 1e3);
  measure::Roofline r = measure::DeviceRooflineRecord(
      fingerprint,
      nlohmann::json{{"device", m.name},
                     {"uuid", m.uuid},
                     {"sm", std::to_string(m.sm_major) + "." + std::to_string(m.sm_minor)},
                     {"sms", m.sms},
                     {"nominal_gb_s", m.nominal_gb_s},
                     {"gemm_n", m.gemm_n}}
          .dump(),
      "cuda sm_" + std::to_string(m.sm_major) + std::to_string(m.sm_minor) + " (bf16 tensor cores)", m.buffer_bytes,
      repetitions, m.read_gb_s, gflops);
  std::fprintf(stderr,
               "verity: %s: read %.1f GB/s best of %zu passes over %llu MiB = %.1f%% of its nominal %.1f GB/s; "
               "bf16 GEMM %dx%dx%d %.1f TFLOP/s best\n",
               m.name.c_str(), r.read[0].best, m.read_gb_s.size(),
               static_cast<unsigned long long>(m.buffer_bytes >> 20),
               m.nominal_gb_s > 0 ? 100.0 * r.read[0].best / m.nominal_gb_s : 0.0, m.nominal_gb_s, m.gemm_n, m.gemm_n,
               m.gemm_n, r.fma[0].best / 1e3);
  return r;
}

}  // namespace verity::cli
