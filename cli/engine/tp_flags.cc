// --tp and --tp-backend: the wiring every engine command shares to run on
// tensor-parallel ranks (engine/tp_forward.h) instead of one Transformer.
#include <cstdio>

#include "base/env.h"
#include "cli/engine/commands.h"
#include "engine/tp_forward.h"

namespace verity::cli {

void AddTpFlags(CLI::App* sub, TpFlags* f) {
  sub->add_option("--tp", f->tp, "tensor-parallel ranks (docs/tensor-parallel.md); 1 = one Transformer")
      ->capture_default_str();
  sub->add_option("--tp-backend", f->backend,
                  "collective for --tp: inproc (threads), mpi (one process per rank: mpirun -np N; as root add "
                  "--allow-run-as-root), nccl (in-process ranks, one GPU each) or mpi-nccl (one process per rank "
                  "under mpirun, NCCL between their GPUs). Default: inproc, or mpi under an MPI launcher of more "
                  "than one process (where inproc and nccl are refused)")
      ->check(CLI::IsMember({"inproc", "mpi", "nccl", "mpi-nccl"}));
}

Result<TpFlags> ResolveTp(const TpFlags& f) {
  TpFlags r = f;
  const env::MpiLauncher l = env::MpiLauncherWorld();
  if (l.size < 0)
    return Status::Error(l.variable + "='" + l.value +
                         "' is not a process count (set by an MPI launcher, it decides "
                         "--tp-backend)");
  if (l.size <= 1) {
    if (r.backend.empty()) r.backend = "inproc";
    return r;
  }
  const std::string n = std::to_string(l.size);
  const std::string under =
      "running under an MPI launcher with " + n + " processes (" + l.variable + "=" + l.value + ")";
  if (r.backend.empty()) {
    r.backend = "mpi";
    if (l.rank == 0)
      std::fprintf(stderr, "verity: --tp-backend not given, %s: using --tp-backend mpi\n", under.c_str());
    return r;
  }
  if (r.backend == "inproc" || r.backend == "nccl")
    return Status::Error("--tp-backend " + r.backend + ": " + under + ": each would run all " + std::to_string(r.tp) +
                         " ranks itself, the output " + n + " times over; use --tp-backend " +
                         (r.backend == "nccl" ? "mpi-nccl" : "mpi") + " --tp " + n +
                         " (one rank per process), or run verity without the launcher");
  return r;
}

Result<TpRun> OpenTp(const TpFlags& f, const std::string& kernels_name) {
  TpOptions o;
  o.tp = f.tp;
  o.collective = f.backend;
  o.kernels = kernels_name;
  VERITY_ASSIGN_OR_RETURN(auto kern, kernels::MakeBackend(kernels_name));  // a bad name fails before set-up
  TpRun run;
  VERITY_ASSIGN_OR_RETURN(run.group, TpGroup::Open(o));
  return run;
}

int WithDecoder(const TpFlags& flags, const std::string& model_path, const std::string& kernels_name,
                kernels::DType dtype, int ctx, const std::function<int(Decoder&, const Model&)>& body) {
  auto resolved = ResolveTp(flags);
  if (!resolved.ok()) return Fail(resolved.status());
  const TpFlags& f = *resolved;
  if (!f.on()) {
    auto kern = kernels::MakeBackend(kernels_name);
    if (!kern.ok()) return Fail(kern.status());
    auto model = LoadModel(model_path, dtype, ctx);
    if (!model.ok()) return Fail(model.status());
    auto t = Transformer::Create(**model, std::move(kern.value()));
    if (!t.ok()) return Fail(t.status());
    return body(**t, **model);
  }
  // The collectives (and the f32 reduce check, and the all-reduce check)
  // come before any weight is loaded.
  auto run = OpenTp(f, kernels_name);
  if (!run.ok()) return Fail(run.status());
  TpGroup& g = *run->group;
  auto model = LoadModel(model_path, dtype, ctx);
  Status agreed = g.Agree(model.ok() ? OkStatus() : model.status());
  if (!agreed.ok()) return g.leader() ? Fail(agreed) : 1;
  if (!g.leader()) {
    // An MPI follower: its rank's share of every step, no output of its own.
    Status s = g.Serve(**model);
    return s.ok() ? 0 : 1;
  }
  auto dec = g.Start(**model);
  if (!dec.ok()) return Fail(dec.status());
  const int code = body(**dec, **model);
  Status guard = (*dec)->Finish();
  if (!guard.ok()) return Fail(guard);
  return code;
}

}  // namespace verity::cli
