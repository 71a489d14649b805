// ledger verify | copy | migrate: the seal chain checked read-only, a ledger copied
// between stores, the schema upgraded.
#include <cstdio>
#include <memory>
#include <string>

#include "base/env.h"
#include "cli/ledger/commands.h"
#include "ledger/copy.h"
#include "ledger/ledger.h"

namespace verity::cli {
namespace {

// ledger verify: every seal recomputed, read-only.
void RegisterVerify(CLI::App* group, Registry& reg) {
  auto path = std::make_shared<std::string>(env::LedgerPath());
  auto expect_tip = std::make_shared<std::string>();
  auto* verify = group->add_subcommand(
      "verify",
      "Recompute every seal, read-only; exit 1 naming the first broken record. Ends with one line\n"
      "`verify: records=N schema=compared(K) tip=<last seal, or genesis> CHECK verdict=PASS|FAIL`;\n"
      "exit 0 only on PASS. K counts the tables, indexes, triggers and views compared with a replay\n"
      "of the migrations (on FAIL, those compared before it stopped).\n"
      "Deleting the chain's last records together with their seals leaves a shorter chain that\n"
      "verifies on its own: note the tip, and pass it back with --expect-tip to detect that.\n"
      "Keyed seals (written with VERITY_LEDGER_KEY set) need the same key to verify, and with a key\n"
      "set every seal must be keyed (see `ledger start-keying`). Also checks that schema_migrations\n"
      "holds exactly the migrations this verity knows and that every append-only trigger is there.\n"
      "CHECK says what the store's own consistency check did: on SQLite integrity_check=ran | failed |\n"
      "not-run (verify failed before it); on PostgreSQL whether amcheck checked every index:\n"
      "amcheck=ran(N indexes) | failed | not-installed | not-permitted | not-run.");
  verify
      ->add_option("--ledger", *path,
                   "ledger: a file, or a postgresql:// URL (default ./verity.db, or VERITY_LEDGER); must exist")
      ->capture_default_str();
  verify->add_option("--expect-tip", *expect_tip,
                     "a tip noted earlier: FAIL unless the chain contains this seal (the full 64 hex\n"
                     "chars, or a unique prefix of at least 16)");
  reg.On(verify, [=] {
    auto l = ledger::Ledger::OpenForVerify(*path);
    if (!l.ok()) return Fail(l.status());
    auto r = (*l)->Verify(*expect_tip);
    if (!r.ok()) return Fail(r.status());
    if (!r->first_broken.empty()) {
      std::printf("verify: first broken record: %s\n", r->first_broken.c_str());
    } else if (r->expected_tip_missing) {
      std::printf(
          "verify: expected tip %s is not in the chain (%lld records, tip now %s): records were removed "
          "from its end (truncated) or the chain was rewritten\n",
          expect_tip->c_str(), static_cast<long long>(r->records), r->tip.c_str());
    } else if (!expect_tip->empty()) {
      std::printf("verify: expected tip found: record %lld of %lld, seal %s\n",
                  static_cast<long long>(r->expected_tip_record), static_cast<long long>(r->records),
                  r->expected_tip_seal.c_str());
    }
    // PostgreSQL: whether amcheck checked every index (verify says what it ran).
    const std::string ran = (*l)->db().IntegrityCheckRan();
    std::printf("verify: records=%lld schema=compared(%lld) tip=%s%s verdict=%s\n", static_cast<long long>(r->records),
                static_cast<long long>(r->schema_objects), r->tip.c_str(), ran.empty() ? "" : (" " + ran).c_str(),
                r->ok ? "PASS" : "FAIL");
    return r->ok ? 0 : 1;
  });
}

// ledger start-keying: a plain-sealed ledger keyed from here on.
void RegisterStartKeying(CLI::App* group, Registry& reg) {
  auto path = std::make_shared<std::string>(env::LedgerPath());
  auto by = std::make_shared<std::string>(), reason = std::make_shared<std::string>();
  auto* start = group->add_subcommand(
      "start-keying",
      "Start keying a ledger sealed plain: with VERITY_LEDGER_KEY set and the chain verifying, record\n"
      "(under the key) how many plain records precede it and their tip. Until then a write under a\n"
      "key refuses a plain chain and verify under a key fails on it; afterwards every seal is keyed.");
  start->add_option("--ledger", *path, "ledger: a file, or a postgresql:// URL (default ./verity.db, or VERITY_LEDGER)")
      ->capture_default_str();
  start->add_option("--by", *by, "who starts keying it")->required();
  start->add_option("--reason", *reason, "why")->required();
  reg.On(start, [=] {
    auto k = ledger::Ledger::StartKeying(*path, *by, *reason);
    if (!k.ok()) return Fail(k.status());
    std::printf(
        "start-keying: %lld plain records up to tip %s are named by keyed seal %s; every later seal "
        "is keyed\n",
        static_cast<long long>(k->plain_records), k->plain_tip.c_str(), k->seal.c_str());
    return 0;
  });
}

// ledger copy: a ledger copied into a new store, seals and all.
void RegisterCopy(CLI::App* group, Registry& reg) {
  auto from = std::make_shared<std::string>(), to = std::make_shared<std::string>();
  auto* copy = group->add_subcommand(
      "copy",
      "Copy a ledger into a new one, seals and all: a SQLite file into an empty PostgreSQL database\n"
      "(postgresql://...) or back, or file to file. The source must verify; the copy is written in one\n"
      "transaction and verified after, and must end at the source's tip. Ends with one line\n"
      "`copy: records=N tip=<seal> verdict=PASS|FAIL`; exit 0 only on PASS.");
  copy->add_option("--from", *from, "the ledger to copy (a file, or a postgresql:// URL)")->required();
  copy->add_option("--to", *to, "where to copy it: a new file, or an empty PostgreSQL database")->required();
  reg.On(copy, [=] {
    auto r = ledger::CopyLedger(*from, *to);
    if (!r.ok()) return Fail(r.status());
    if (!r->ok) std::printf("copy: the copy does not verify as the source: %s\n", r->failure.c_str());
    std::printf("copy: records=%lld schema=%d tip=%s verdict=%s\n", static_cast<long long>(r->records), r->schema,
                r->to_tip.c_str(), r->ok ? "PASS" : "FAIL");
    return r->ok ? 0 : 1;
  });
}

// ledger migrate: pending schema migrations applied.
void RegisterMigrate(CLI::App* group, Registry& reg) {
  auto path = std::make_shared<std::string>(env::LedgerPath());
  auto* migrate = group->add_subcommand("migrate", "Apply pending schema migrations (also done on every open).");
  migrate
      ->add_option("--ledger", *path, "ledger: a file, or a postgresql:// URL (default ./verity.db, or VERITY_LEDGER)")
      ->capture_default_str();
  reg.On(migrate, [=] {
    auto l = ledger::Ledger::Open(*path);
    if (!l.ok()) return Fail(l.status());
    std::printf("migrate: schema version %d (%d applied now)\n", (*l)->schema_version(),
                (*l)->migrations_applied_now());
    return 0;
  });
}

}  // namespace

void RegisterLedgerAdminCommands(CLI::App& app, Registry& reg) {
  auto* group = app.add_subcommand(
      "ledger", "Ledger maintenance: verify the seal chain, copy a ledger between stores, apply migrations.");
  group->require_subcommand(1);
  RegisterVerify(group, reg);
  RegisterStartKeying(group, reg);
  RegisterCopy(group, reg);
  RegisterMigrate(group, reg);
}

}  // namespace verity::cli
