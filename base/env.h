// The one place that reads VERITY_* environment switches. Nothing else in the
// project calls getenv; each switch, its meaning and its default are listed here.
#pragma once

#include <string>

namespace verity::env {

// VERITY_THREADS: worker threads for the fast CPU path, and the threads a load
// converts weights on (base/host_parallel.h). Default: hardware cores.
int Threads();
// VERITY_PARITY_MODE: "standard" (default) or "deep" (more depths and wider windows).
bool ParityDeep();
// VERITY_LEDGER: the ledger when --ledger is not given: a SQLite file, or a
// postgresql:// (postgres://) URL naming a PostgreSQL database. Default: ./verity.db.
std::string LedgerPath();
// VERITY_BENCH_TIMEOUT_S: per-run timeout for bench and parity commands. Default: 600.
int CommandTimeoutSeconds();
// VERITY_WORKTREES: cache folder for ref builds. Default: <repo>/.verity/worktrees.
std::string WorktreeCache(const std::string& repo_root);
// VERITY_LEDGER_KEY: secret key for the ledger's seal chain. When set, new seals
// are HMAC-SHA256 under it (nobody without the key can forge them) and `ledger
// verify` needs it to check them; the key itself is never stored. Default: empty,
// plain SHA-256 seals. The first non-empty value read is kept for the life of the
// process and removed from the environment, so the bench and parity commands a
// submission runs (the code under test) never inherit it.
std::string LedgerKey();
// VERITY_LOCK_DIR: where the per-box measurement lock files live (shared by
// every ledger on the machine). Default: /tmp.
std::string LockDir();
// VERITY_BOX_LABEL: a name added to this machine's box identity (the box
// detail's "label"), so machines whose hardware and kernel read the same keep
// their own boxes and frontiers; tests use it to play several bench boxes on
// one machine. It does not split the machine: one measurement lock, and a
// step counted under one label is not counted again under another (issue 41).
// Default: empty, no label (the identity as before).
std::string BoxLabel();
// VERITY_CACHE_DIR: where measurements of this machine are cached (the
// roofline, per box fingerprint). Default: $HOME/.cache/verity, or
// /tmp/verity-cache when HOME is unset or empty.
std::string CacheDir();
// VERITY_PLUGIN_DIR: the one directory searched for the run-time plugins
// (libverity_cuda.so, libverity_nccl.so; base/plugin.h). Default: empty, meaning
// the verity executable's directory, then the build tree's.
std::string PluginDir();
// PATH: the directories `verity gbench` searches for a benchmark binary named
// without a '/', as a shell would. Default: empty (the current directory only).
std::string ExecutableSearchPath();
// VERITY_STREAM_PREFETCH: "nta", "t0" or "off": how bf16 and q8_0 decode
// prefetch their weight rows (non-temporally 8 KB ahead, prefetcht0 1 KB
// ahead, or not; kernels/cpu/prefetch.h). Default: empty, meaning the CPU
// decides (t0 on AMD family 19h, nta on other AMD, off elsewhere: what was
// measured to pay). Any other value is ignored with a note. Speed only: the
// results are the same bits either way.
std::string StreamPrefetch();
// VERITY_BENCH_CHUNK_MACS (kernels_bench only): multiply-adds per pool chunk
// in the thread benchmarks, to try another split. Default: 16384 (the engine's).
int BenchChunkMacs();
// OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_RANK (set by OpenMPI's mpirun),
// else PMI_SIZE and PMI_RANK (set by Hydra's mpiexec, MPICH's and Intel MPI's,
// and other PMI launchers): the MPI launch this process is one process of, so
// that an engine command never runs a whole in-process tensor-parallel group
// in every process (cli/tp_flags.cc). Slurm's own SLURM_* counts are not read:
// a batch script, or a shell in an allocation, sees them as one process.
// Default (neither set): size 0, no launcher.
struct MpiLauncher {
  int size = 0;          // processes the launcher started; 0: none; -1: `value` is not a count >= 1
  int rank = 0;          // this process's rank among them (0 when not given)
  std::string variable;  // where size came from, e.g. "OMPI_COMM_WORLD_SIZE"
  std::string value;     // that variable's text
};
MpiLauncher MpiLauncherWorld();
// VERITY_CUDA_PROFILE: "1" makes the CUDA backend time every call it runs on
// the device (two events each), run every decode step as issued (no graphs),
// and print a table of device time, calls and achieved GB/s per kind of call
// when it closes (kernels/cuda/kernel_profile.h). Default: off. Speed only:
// the results are the same bits (a recorded step gives the eager bits).
bool CudaProfile();
// VERITY_CUDA_PDL: "0" launches the CUDA decode products without programmatic
// dependent launch (docs/cuda.md, "Dependent launches"), to measure what it
// gives. Default: on, where the device has it (sm_90 and later). Speed only:
// the same bits either way.
bool CudaDependentLaunch();
// VERITY_CUDA_L2_PREFETCH: "0" makes a dependent rows launch ask L2 for the
// first 2 KB of each weight row before its wait (the size asked before
// 2026-12-07), instead of whole rows where the launch's weights fit in half the L2
// (docs/cuda.md, "Whole rows into L2"). Changes no bit; for measuring.
bool CudaL2Prefetch();
// VERITY_CUDA_BATCH_MMA: "1" runs a batched step's bf16 and q8_0 products (Step's
// rows: MatmulRows and the fused rows calls) on tensor cores
// (kernels/cuda/mma_rows.cu, docs/cuda.md). Default: off, so a batched row
// keeps the bits of its own decode step; with it, a row's bits still do
// not depend on the other rows of its step, but differ from the decode
// step's (x enters the tensor cores to 16 significant bits).
bool CudaBatchMma();
// VERITY_CUDA_NORM_FUSED: "1" makes the CUDA backend normalize a decode
// step's input in the launch of the products that read it (q/k/v, and the
// FFN's gate and up: docs/cuda.md), one launch fewer for each norm. The
// same bits as the separate calls. Default: off until a device has run it.
bool CudaNormFused();
// VERITY_CUDA_FLASH_PREFILL: "1" runs a prefill block's attention as
// flash-style tiles on the tensor cores (kernels/cuda/flash_attention.cu,
// docs/cuda.md) where its products ran on them (bf16, q8_0 and block
// weights) and its head size is 64, 96 or 128: no scores in memory, so no
// context falls back to the tiled kernel. TF32 inputs, as the GEMM attention
// it replaces, but its own order of sums: other bits. Default: off until a
// device has run it.
bool CudaFlashPrefill();
// VERITY_CUDA_Q8_INT16: "1" multiplies a decode step's q8_0 products (one
// sequence's, not a batched step's) with x quantized to int16 per 32
// columns, the CPU fast kernel's arithmetic (kernels/cuda/q8_int.h): its
// bits, where the default multiplies with f32 x. Default: off until a
// device has run it.
bool CudaQ8Int16();
// VERITY_CUDA_PREFILL_BLOCK: positions per prefill pass on the CUDA backend
// (Backend::prefill_block), a multiple of 16 from 16 to 8192. A pass's
// products are GEMMs of that many rows: more rows fill more of the tensor
// cores and launch less often (docs/cuda.md, "Prefill"). Default: empty,
// meaning 512; a value outside that set makes the backend refuse to start,
// naming it. Speed, and the prefill's bits (another split of the prompt).
std::string CudaPrefillBlock();
// Its values, one rule for the backend that takes it (kernels/cuda's
// PrefillBlockFromText) and the bench records that name it (protocol/).
constexpr bool IsCudaPrefillBlock(long long n) { return n >= 16 && n <= 8192 && n % 16 == 0; }
inline constexpr char kCudaPrefillBlockRule[] = "a multiple of 16 from 16 to 8192";
// VERITY_SIMD_TARGET: the best Highway target the CPU kernels may dispatch to,
// e.g. "AVX2" (then AVX2 or a lesser target the CPU runs: SSE4, EMU128), in
// every binary, applied before main() (kernels/cpu/simd.h). To step around a
// bad target, and for the suite to run each target the host supports. A name
// the build does not hold ends the process with exit 2. Default: empty, the
// best this CPU runs.
std::string SimdTarget();

}  // namespace verity::env
