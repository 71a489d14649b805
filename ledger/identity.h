// What a change is (issue 41): the one definition the ledger counts by. Two
// runs are the same change -- one error budget, one first prediction, counted
// at most once on a frontier -- when they move between the same two places.
// A place is named by keys, and two places are the same when they share one:
//   - "build <id>": the build id each side's bench reports, when it names a
//     source (a commit; not empty, not "-dirty") and the two sides' ids differ.
//     So a rebuild of the same commits that is not byte-reproducible (the CUDA
//     build embeds its worktree path) is the same change.
//   - "artifact <sha256>": the binary each side ran, when the two differ.
//   - "artifact <sha256> run by <command sha256>": when both sides ran one
//     artifact (a change behind a run-time flag, an interpreter running two
//     scripts), the commands tell base from head.
// Artifact hashes stay what they were: evidence that the bench ran the binary
// the parity evidence names. Box and workload are not part of it: a change is
// counted per frontier (metric, box, workload) by the ladder.
#pragma once

#include <string>
#include <vector>

namespace verity::ledger {

// One side of a run as its first sample reported it, and the command that ran it.
struct SideRun {
  std::string build_id, artifact_sha256, command;
};

struct ChangeIdentity {
  std::vector<std::string> base, head;  // each side's keys (empty: measured nothing)
  // True when the two sides are two places (some key tells them apart); an
  // A/A (one artifact, one command) is no move and is grouped by its change only.
  bool IsPair() const;
};

// True when `build_id` names a source: not empty, not "unknown", not "-dirty".
bool NamesSource(const std::string& build_id);
ChangeIdentity IdentityOf(const SideRun& base, const SideRun& head);
// True when both are pairs and move between the same places: a base key
// shared and a head key shared.
bool SameChange(const ChangeIdentity& a, const ChangeIdentity& b);
// The keys a frontier counts a place by: its keys, and for one artifact run
// by a command also the artifact alone -- an artifact counts at most once per
// frontier, whatever runs it (policy v4's rule, kept), while the budget and
// the first prediction (SameChange) tell two commands on it apart.
std::vector<std::string> CountingKeys(const std::vector<std::string>& keys);
// True when the two key lists share a key.
bool SharesKey(const std::vector<std::string>& a, const std::vector<std::string>& b);
// A key as messages print it: its kind and the first 12 hex digits.
std::string KeyText(const std::string& key);

}  // namespace verity::ledger
