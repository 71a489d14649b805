// What a ModelConfig implies for the engine: the RoPE table and the checked
// construction of a Transformer (whose KV cache the context sizes).
#include <unistd.h>

#include <cmath>
#include <new>

#include "engine/engine.h"

namespace verity {

std::vector<float> RopeInverseFrequencies(const ModelConfig& c) {
  const int half = c.head_dim / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  kernels::RopeBaseInverseFrequencies(c.rope_theta, c.head_dim, inv.data());
  const RopeScaling& s = c.rope_scaling;
  for (int i = 0; i < half; i++) {
    double f = inv[i];
    if (static_cast<int>(c.rope_freq_factors.size()) == half) f /= c.rope_freq_factors[i];
    if (s.type == RopeScalingType::kLinear) {
      f /= s.factor;
    } else if (s.type == RopeScalingType::kLlama3) {
      // Hugging Face's _compute_llama3_parameters: short wavelengths (high
      // frequencies) are kept, long ones slowed by `factor`, the band between
      // interpolated linearly in original / wavelength.
      const double wavelen = 2.0 * M_PI / f;
      const double high_wavelen = s.original_max_positions / s.high_freq_factor;
      const double low_wavelen = s.original_max_positions / s.low_freq_factor;
      if (wavelen > low_wavelen) {
        f /= s.factor;
      } else if (!(wavelen < high_wavelen)) {
        const double smooth =
            (s.original_max_positions / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }
    }
    inv[i] = static_cast<float>(f);
  }
  return inv;
}

std::vector<float> RopeLocalInverseFrequencies(const ModelConfig& c) {
  if (c.rope_local_theta <= 0.0f) return {};
  std::vector<float> inv(static_cast<size_t>(c.head_dim / 2));
  kernels::RopeBaseInverseFrequencies(c.rope_local_theta, c.head_dim, inv.data());
  return inv;
}

Result<std::unique_ptr<Transformer>> Transformer::Create(const Model& model,
                                                         std::unique_ptr<kernels::Backend> backend) {
  VERITY_RETURN_IF_ERROR(CheckBackendRunsModel(model, *backend));
  const ModelConfig& c = model.config;
  // The context decides the KV cache; one larger than this machine's memory is
  // refused before it is allocated (with overcommit it would be killed later).
  const double kv_bytes = 2.0 * 4.0 * c.n_layers * static_cast<double>(c.seq_len) * c.kv_dim() +
                          4.0 * c.n_heads * static_cast<double>(c.seq_len);
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const double physical = pages > 0 && page > 0 ? static_cast<double>(pages) * page : 0.0;
  auto mib = [](double b) { return std::to_string(static_cast<long long>(std::ceil(b / (1 << 20)))) + " MiB"; };
  if (physical > 0 && kv_bytes > physical)
    return Status::Error(model.source + ": a context of " + std::to_string(c.seq_len) + " positions needs a " +
                         mib(kv_bytes) + " KV cache (" + std::to_string(c.n_layers) + " layers x kv_dim " +
                         std::to_string(c.kv_dim()) + " x K and V), more than this machine's " + mib(physical) +
                         " of memory; choose a smaller --ctx");
  try {
    return std::unique_ptr<Transformer>(new Transformer(model, std::move(backend)));
  } catch (const std::bad_alloc&) {
    return Status::Error(model.source + ": cannot allocate the buffers for a context of " + std::to_string(c.seq_len) +
                         " positions (KV cache " + mib(kv_bytes) + "); choose a smaller --ctx");
  }
}

}  // namespace verity
