// An A/A on this box; see calibrate.h.
#include "ledger/calibrate.h"

#include "ledger/record.h"
#include "ledger/units.h"
#include "measure/box_lock.h"
#include "measure/measure.h"

namespace verity::ledger {

Result<NoiseProfile> Calibrate(Ledger& l, const CalibrateRequest& req, const MeasureOptions& opt) {
  if (req.cmd.empty()) return Status::Error("calibrate: --cmd is required");
  if (req.rounds < 5 || req.rounds > 200)
    return Status::Error("calibrate: --rounds " + std::to_string(req.rounds) + " is outside [5, 200]");
  if (auto unit = UnitOf(req.metric); !unit.ok())
    return Status::Error("calibrate: --metric: " + unit.status().message());
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };
  const measure::Box box = measure::ThisBox();
  Db& d = l.db();
  int64_t box_id = 0;
  VERITY_RETURN_IF_ERROR(d.Transaction([&]() -> Status {
    VERITY_ASSIGN_OR_RETURN(box_id, EnsureBox(d, box));
    return OkStatus();
  }));
  std::string workload;
  bool first = true;
  auto take = [&]() -> Result<double> {
    measure::CommandOutput out = measure::RunCommand(req.cmd, opt.timeout_s);
    VERITY_ASSIGN_OR_RETURN(auto s, measure::ParseBench(out, req.metric, "calibrate command", req.cmd));
    if (first) workload = s.workload;
    else if (s.workload != workload)
      return Status::Error("calibrate: the command measured workload '" + s.workload + "' after '" + workload + "'");
    first = false;
    return s.value;
  };
  VERITY_ASSIGN_OR_RETURN(auto lock, measure::BoxLock::Acquire(opt.lock_dir, box.Machine(), say));
  say("calibrating box " + box.fingerprint.substr(0, 16) + ": warm-up, then " + std::to_string(req.rounds) +
      " A/A rounds (the same command as base and head)");
  for (int i = 0; i < 2; i++) VERITY_RETURN_IF_ERROR(take().status());
  std::vector<Round> rounds;
  for (int n = 1; n <= req.rounds; n++) {
    Round r;
    VERITY_ASSIGN_OR_RETURN(r.b1, take());
    VERITY_ASSIGN_OR_RETURN(r.h1, take());
    VERITY_ASSIGN_OR_RETURN(r.h2, take());
    VERITY_ASSIGN_OR_RETURN(r.b2, take());
    rounds.push_back(r);
    char line[128];
    std::snprintf(line, sizeof line, "  round %2d/%d  ratio %.4f", n, req.rounds,
                  RoundRatio(r, HigherIsBetter(req.metric)));
    say(line);
  }
  lock.reset();
  NoiseProfile p = SummarizeAA(rounds, HigherIsBetter(req.metric));
  p.box = box.fingerprint;
  p.metric = req.metric;
  p.workload = workload;
  p.cmd = req.cmd;
  VERITY_RETURN_IF_ERROR(d.Transaction([&]() -> Status {
    VERITY_ASSIGN_OR_RETURN(p.id, RecordNoise(d, box_id, p));
    return OkStatus();
  }));
  VERITY_ASSIGN_OR_RETURN(auto stored, LatestNoise(d, box_id, p.metric, p.workload));
  return stored ? *stored : p;
}

}  // namespace verity::ledger
