// Pure pieces of the ledger: statistics, policy, migrations on an old database.
#include <gtest/gtest.h>

#include "ledger/ledger.h"
#include "ledger/migrations.h"
#include "ledger/sql_dialect.h"
#include "ledger/stats.h"
#include "tests/ledger_test_util.h"

namespace verity::ledger {
namespace {

TEST(Stats, MedianOddEvenEmpty) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(Median({4, 1, 2, 3}), 2.5);
  EXPECT_DOUBLE_EQ(Median({}), 0.0);
}

TEST(Stats, BootstrapIsDeterministicAndBracketsTheMedian) {
  std::vector<double> d = {10, 12, 9, 11, 13, 10.5, 11.5};
  Interval a = BootstrapMedianCI(d, 42), b = BootstrapMedianCI(d, 42);
  EXPECT_EQ(a.low, b.low);
  EXPECT_EQ(a.high, b.high);
  EXPECT_LE(a.low, Median(d));
  EXPECT_GE(a.high, Median(d));
  EXPECT_GT(a.low, 0.0);
  Interval mixed = BootstrapMedianCI({-2, 1, -1, 2, 0.5, -0.5}, 1);
  EXPECT_LT(mixed.low, 0.0);
  EXPECT_GT(mixed.high, 0.0);
}

TEST(Policy, TiersAndSurprise) {
  Policy p = PolicyV1();
  EXPECT_STREQ(TierName(p.TierFor(0.019)), "none");
  EXPECT_STREQ(TierName(p.TierFor(0.02)), "s");
  EXPECT_STREQ(TierName(p.TierFor(0.049)), "s");
  EXPECT_STREQ(TierName(p.TierFor(0.05)), "m");
  EXPECT_STREQ(TierName(p.TierFor(0.10)), "l");
  EXPECT_STREQ(TierName(p.TierFor(0.25)), "xl");
  EXPECT_TRUE(p.IsSurprise(0.02, 0.15));   // more than twice
  EXPECT_TRUE(p.IsSurprise(0.10, 0.04));   // less than half
  EXPECT_TRUE(p.IsSurprise(0.03, -0.01));  // other sign
  EXPECT_FALSE(p.IsSurprise(0.035, 0.04));
  EXPECT_TRUE(p.ParityPasses(0.95, 0.05));
  EXPECT_FALSE(p.ParityPasses(0.94, 0.0));
  EXPECT_FALSE(p.ParityPasses(1.0, 0.051));
}

TEST(Migrations, EmbeddedInOrderAndAppliedOverOldData) {
  const auto& all = EmbeddedMigrations();
  ASSERT_GE(all.size(), 2u);
  for (size_t i = 0; i < all.size(); i++) EXPECT_EQ(all[i].version, static_cast<int>(i) + 1) << all[i].name;
  // Build a database at every version in turn, holding data, then upgrade it.
  for (size_t upto = 1; upto < all.size(); upto++) {
    const std::string path = test::FreshLedger(test::TempDir("mig"));
    {
      auto old = Ledger::Open(path, static_cast<int>(upto));
      ASSERT_TRUE(old.ok()) << old.status().message();
      EXPECT_EQ((*old)->schema_version(), static_cast<int>(upto));
      Db& d = (*old)->db();
      ASSERT_TRUE(d.Transaction([&]() -> Status {
                     return d
                         .InsertSealed("changes", {{"kind", std::string("change")},
                                                   {"title", std::string("old change")},
                                                   {"author", std::string("t")},
                                                   {"predict_pct", 1.0},
                                                   {"claim_bit_identical", int64_t{0}},
                                                   {"metric", std::string("decode_tok_s")},
                                                   {"base_cmd", std::string("b")},
                                                   {"head_cmd", std::string("h")},
                                                   {"created_at", NowUtc()}})
                         .status();
                   }).ok());
    }
    auto now = Ledger::Open(path);
    ASSERT_TRUE(now.ok()) << now.status().message();
    EXPECT_EQ((*now)->schema_version(), all.back().version);
    EXPECT_EQ((*now)->migrations_applied_now(), static_cast<int>(all.size() - upto));
    auto rows = (*now)->db().Query("SELECT title FROM changes");
    ASSERT_TRUE(rows.ok());
    ASSERT_EQ(rows->size(), 1u);
    EXPECT_EQ(AsText((*rows)[0][0]), "old change");
    auto v = (*now)->Verify();
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(v->ok) << v->first_broken;
    auto show = (*now)->Show(1);
    ASSERT_TRUE(show.ok()) << show.status().message();
  }
}

TEST(Migrations, NewerSchemaIsRefused) {
  const std::string path = test::FreshLedger(test::TempDir("newer"));
  { ASSERT_TRUE(Ledger::Open(path).ok()); }
  {
    auto d = Db::Open(path);
    ASSERT_TRUE(d.ok());
    ASSERT_TRUE((*d)->Query("INSERT INTO schema_migrations VALUES (999, '0999_future', 'x', 'now')").ok());
  }
  auto l = Ledger::Open(path);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("schema version 999"), std::string::npos) << l.status().message();
  EXPECT_NE(l.status().message().find("newer"), std::string::npos);
}

TEST(Store, AppendOnlyTriggersRefuseUpdatesAndDeletes) {
  const std::string path = test::FreshLedger(test::TempDir("ao"));
  auto l = Ledger::Open(path);
  ASSERT_TRUE(l.ok());
  auto u = (*l)->db().Query("UPDATE policy SET gate_frac = 0.5");
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("append-only"), std::string::npos);
  EXPECT_FALSE((*l)->db().Query("DELETE FROM seal_chain").ok());
}

// Every sealed table has both triggers: a table added without them (as
// 0005_workloads first was) fails here, naming it.
TEST(Store, EverySealedTableRefusesUpdatesAndDeletes) {
  const std::string path = test::FreshLedger(test::TempDir("ao-all"));
  auto l = Ledger::Open(path);
  ASSERT_TRUE(l.ok());
  auto have = (*l)->db().Triggers();
  ASSERT_TRUE(have.ok()) << have.status().message();
  std::vector<std::string> applied;
  for (const Migration& m : EmbeddedMigrations()) applied.push_back(m.sql);
  auto want = (*l)->db().ExpectedTriggers(applied);
  ASSERT_TRUE(want.ok()) << want.status().message();
  int checked = 0;
  for (const std::string& t : SealedTables()) {
    for (const std::string kind : {"update", "delete"}) {
      // The store's own trigger (SQLite's CREATE TRIGGER text, or PostgreSQL's
      // type, state and function body) must be the one the migrations make.
      const std::string name = t + "_no_" + kind;
      auto find = [&](const std::vector<TriggerDef>& v) -> const TriggerDef* {
        for (const auto& x : v)
          if (x.name == name && x.table == t) return &x;
        return nullptr;
      };
      const TriggerDef* h = find(*have);
      const TriggerDef* w = find(*want);
      ASSERT_NE(w, nullptr) << t << ": no migration creates " << name;
      ASSERT_NE(h, nullptr) << t << " has no " << name << " trigger";
      EXPECT_EQ(h->definition, w->definition) << name;
      checked++;
    }
  }
  std::printf("append-only triggers: %d checked over %zu sealed tables\n", checked, SealedTables().size());
  EXPECT_EQ(checked, 2 * static_cast<int>(SealedTables().size()));
  EXPECT_GE(SealedTables().size(), 20u);
}

// The one place SQLite's SQL becomes PostgreSQL's (ledger/sql_dialect.h).
TEST(StoreDialect, PlaceholdersTypesAndAggregatesAreRewrittenOutsideQuotes) {
  using dialect::ToPostgres;
  EXPECT_EQ(ToPostgres("SELECT '?', \"a?\" FROM t WHERE x = ? AND y = ? -- a comment?"),
            "SELECT '?', \"a?\" FROM t WHERE x = $1 AND y = $2 ");
  EXPECT_EQ(ToPostgres("SELECT ?1 + ?1, ?2"), "SELECT $1 + $1, $2");
  EXPECT_EQ(ToPostgres("SELECT (SELECT group_concat(r.id) FROM runs r WHERE r.x = ?) FROM c WHERE c.y = ?"),
            "SELECT (SELECT string_agg(CAST(r.id AS TEXT), ',') FROM runs r WHERE r.x = $1) FROM c WHERE c.y = $2");
  EXPECT_EQ(
      ToPostgres("CREATE TABLE t (id INTEGER PRIMARY KEY, v REAL, by TEXT NOT NULL, note TEXT DEFAULT 'INTEGER by')"),
      "CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE PRECISION, \"by\" TEXT NOT NULL, note TEXT DEFAULT 'INTEGER "
      "by')");
  EXPECT_EQ(ToPostgres("SELECT t.by FROM t ORDER BY t.id"), "SELECT t.\"by\" FROM t ORDER BY t.id");
}

// Every trigger a migration declares is one the dialect understands: a new
// trigger of another shape would otherwise reach PostgreSQL as SQLite's text.
TEST(StoreDialect, EveryMigrationTriggerBecomesAPostgresTrigger) {
  int triggers = 0;
  for (const Migration& m : EmbeddedMigrations()) {
    const std::string sql = m.sql;
    size_t declared = 0;
    for (size_t at = sql.find("CREATE TRIGGER"); at != std::string::npos; at = sql.find("CREATE TRIGGER", at + 1))
      declared++;
    const auto found = dialect::TriggersIn(sql);
    EXPECT_EQ(found.size(), declared) << m.name;
    const std::string pg = dialect::ToPostgres(sql);
    EXPECT_EQ(pg.find("RAISE(ABORT"), std::string::npos) << m.name;
    for (const auto& t : found) {
      EXPECT_NE(pg.find("CREATE FUNCTION " + t.name + "() RETURNS trigger LANGUAGE plpgsql"), std::string::npos)
          << t.name;
      EXPECT_EQ(t.name, t.table + (t.event == "UPDATE" ? "_no_update" : "_no_delete"));
    }
    triggers += static_cast<int>(found.size());
  }
  std::printf("dialect: %d append-only triggers in %zu migrations become PL/pgSQL\n", triggers,
              EmbeddedMigrations().size());
  EXPECT_GE(triggers, 2 * static_cast<int>(SealedTables().size()));
}

}  // namespace
}  // namespace verity::ledger
