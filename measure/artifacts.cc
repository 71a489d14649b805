// Builds git refs into cached worktrees, one per commit, so a submission by
// ref benchmarks exactly the commit it names.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/strings.h"
#include "measure/measure.h"

namespace verity::measure {
namespace {
// The last 4 KB of a file (a build log's end says why it failed).
std::string ReadTail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  const std::string all = s.str();
  return all.size() > 4096 ? all.substr(all.size() - 4096) : all;
}
}  // namespace

Result<BuiltRef> BuildRef(const std::string& repo, const std::string& ref, const std::string& cache_dir,
                          const BuildRecipe& recipe, const std::function<void(const std::string&)>& progress) {
  namespace fs = std::filesystem;
  BuiltRef b;
  b.ref = ref;
  CommandOutput rev =
      RunCommand("git -C " + ShellQuote(repo) + " rev-parse --verify --quiet " + ShellQuote(ref + "^{commit}"), 60);
  b.sha = TrimRight(rev.out);
  if (rev.exit_code != 0 || b.sha.size() != 40) return Status::Error("ref '" + ref + "' is not a commit in " + repo);
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  if (ec) return Status::Error(cache_dir + ": cannot create the worktree cache");
  b.worktree = (fs::absolute(cache_dir) / b.sha).string();
  if (!fs::exists(b.worktree + "/.git")) {
    progress("checking out " + ref + " (" + b.sha.substr(0, 12) + ") into " + b.worktree);
    CommandOutput wt = RunCommand(
        "git -C " + ShellQuote(repo) + " worktree add --detach --force " + ShellQuote(b.worktree) + " " + b.sha, 300);
    if (wt.exit_code != 0) return Status::Error("git worktree add for " + ref + " failed: " + TrimRight(wt.err));
  }
  // The worktree must still be exactly that commit, with nothing modified.
  CommandOutput head = RunCommand("git -C " + ShellQuote(b.worktree) + " rev-parse HEAD", 60);
  CommandOutput dirty = RunCommand("git -C " + ShellQuote(b.worktree) + " status --porcelain --untracked-files=no", 60);
  if (TrimRight(head.out) != b.sha || !TrimRight(dirty.out).empty())
    return Status::Error(b.worktree + ": cached worktree is not a clean checkout of " + b.sha +
                         "; remove it and retry");
  progress("building " + ref + " (" + b.sha.substr(0, 12) + ")");
  const std::string log = b.worktree + "/build.log";
  std::string script = "cd " + ShellQuote(b.worktree) + " && { :";
  for (const std::string& c : recipe.commands) script += " && echo " + ShellQuote("+ " + c) + " && " + c;
  script += "; } > build.log 2>&1";
  CommandOutput build = RunCommand(script, recipe.timeout_s);
  if (build.exit_code != 0)
    return Status::Error("building " + ref + " (" + b.sha.substr(0, 12) + ") failed" +
                         (build.timed_out ? " (timed out after " + std::to_string(recipe.timeout_s) + " s)" : "") +
                         "; see " + log + ": " + OutputTail(ReadTail(log), 300));
  b.binary = b.worktree + "/" + recipe.artifact;
  if (!fs::exists(b.binary)) return Status::Error("building " + ref + " produced no " + b.binary + " (build.artifact)");
  if (recipe.verity_binary) {
    CommandOutput help = RunCommand(ShellQuote(b.binary) + " parity --help", 60);
    b.has_parity = help.exit_code == 0;
    // Older builds had --against for raw f32 logits only; reference logits
    // files (docs/parity.md) came with this wording.
    b.has_parity_against = b.has_parity && help.out.find("a reference logits file") != std::string::npos;
  }
  return b;
}

}  // namespace verity::measure
