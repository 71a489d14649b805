// verity report: thin wiring over render/report.h.
#include <cstdio>

#include "base/env.h"
#include "cli/ledger/commands.h"
#include "render/dashboard.h"
#include "render/report.h"

namespace verity::cli {

void RegisterReportCommand(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand("report",
                                 "Write the markdown changelog (and its SVG ladder charts) and/or the HTML "
                                 "dashboard from the ledger alone; the same ledger always yields the same bytes.");
  auto path = std::make_shared<std::string>(env::LedgerPath());
  auto opt = std::make_shared<reports::ReportOptions>();
  sub->add_option("--ledger", *path, "ledger: a file, or a postgresql:// URL (default ./verity.db, or VERITY_LEDGER)")
      ->capture_default_str();
  auto html = std::make_shared<std::string>();
  sub->add_option("--out", opt->out, "the markdown file to write");
  sub->add_option("--html", *html, "the directory to write the static HTML dashboard into (open its index.html)");
  sub->add_option("--since", opt->since, "limit per-change sections to changes since a DATE (YYYY-MM-DD) or change ID");
  sub->add_option("--charts", opt->charts_dir, "directory for the SVG charts (default: beside the report)");
  reg.On(sub, [=] {
    auto l = ledger::Ledger::Open(*path);
    if (!l.ok()) return Fail(l.status());
    // "Generated from ledger tip ..." must mean a tip that verifies.
    Status sound = (*l)->RequireVerified("report");
    if (!sound.ok()) return Fail(sound);
    if (opt->out.empty() && html->empty())
      return Fail(Status::Error("report: give --out FILE.md, --html DIR, or both"));
    if (opt->out.empty() && (!opt->since.empty() || !opt->charts_dir.empty()))
      return Fail(Status::Error("report: --since and --charts shape the markdown report: they need --out FILE.md"));
    if (!opt->out.empty()) {
      auto w = reports::WriteReport(**l, *opt);
      if (!w.ok()) return Fail(w.status());
      std::printf("report: wrote %s (%d changes, %zu chart%s)\n", w->markdown_path.c_str(), w->changes,
                  w->charts.size(), w->charts.size() == 1 ? "" : "s");
    }
    if (!html->empty()) {
      auto d = reports::WriteDashboard(**l, {*html});
      if (!d.ok()) return Fail(d.status());
      std::printf("report: wrote the dashboard %s (%d files: %d change pages, %d ladders, %d drift series)\n",
                  d->index_path.c_str(), d->files, d->change_pages, d->ladders, d->series);
    }
    return 0;
  });
}

}  // namespace verity::cli
