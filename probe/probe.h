// The machine probes: the two loops that say what this CPU can do, written
// once with Google Highway and dispatched at run time to the best instruction
// set the CPU runs (base/simd_targets.h's set, under the kernels' cap when
// those are linked too). The roofline (measure/roofline.h, the ledger's) and
// the kernel benchmarks (the engine's) both measure with these, so "the read
// bandwidth" means one loop everywhere. Below both products: base and Highway
// only.
#ifndef VERITY_PROBE_PROBE_H_
#define VERITY_PROBE_PROBE_H_

#include <cstddef>
#include <cstdint>

namespace verity::probe {

// Reads every byte of data once with the widest loads the CPU has, into
// independent accumulators, and returns their sum (every 64-bit word, then
// each trailing byte), so no load can be elided: the read-bandwidth probe.
// Any alignment and length.
uint64_t StreamRead(const void* data, size_t bytes);

// Runs `iters` steps of kFmaChains independent chains of acc = acc * m + c,
// one vector per chain, with the widest FMA the CPU has (SSE2 and SSE4 have
// none: a multiply and an add, still 2 flops); the chains converge without
// overflow or denormals. Returns a value depending on every chain. Each step
// does kFmaChains * FmaLanes() * 2 flops.
inline constexpr int kFmaChains = 12;  // covers the FMA latency times the FMA ports of current cores
float FmaChains(int64_t iters);

// Floats per vector in FmaChains on this CPU.
int FmaLanes();

// The instruction set the probes run (Highway's name: "AVX3_DL", "AVX2", ...).
const char* ProbeTarget();

}  // namespace verity::probe

#endif  // VERITY_PROBE_PROBE_H_
