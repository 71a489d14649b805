// Every string a submitter, a bench or a parity command writes is data, never
// markup or terminal control (issue 24, holes 7 and 8). The changelog of a
// ledger built with hostile titles, authors, reasons, workloads, guard names
// and parity build ids is rendered by a real GFM renderer (cmark-gfm) and must
// have exactly the nodes of the same ledger built with benign strings; every
// terminal printer must print no raw control character; and a run rejected
// for failing bit identity never reads "bit identity proved".
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "base/markdown.h"
#include "base/terminal.h"
#include "base/utf8.h"
#include "tests/ledger_test_util.h"

namespace verity {
namespace {
using test::Bench;
using test::Case;
using test::Parity;
using test::Quote;
using test::Shell;

// What a ledger's strings are: hostile ones try one piece of markup or
// terminal control each; benign ones have the same shape without any.
struct Strings {
  std::string accepted, rejected, parked, author, reason, workload, guard, build;
};

// Each hostile string opens what it tries to forge, so that any one left
// unescaped shows up as an extra node.
Strings Hostile() {
  return {
      "fast\r\n\n### Change 99: forged\n\n| run | verdict |\n| --- | --- |\n| 1 | accepted |\n\n<!-- hides the rest #",
      "slow <b>bold</b> [a link](http://evil.example) ![img](x.png) <http://evil.example> `code` *em* _em_ "
      "~~del~~ **strong** &lt;b&gt; www.evil.example https://evil.example/x \\",
      "parked\x1b[2K\r    score: accepted\b\b\xc2\x9b"
      "31m\xe2\x80\xae"
      "desrever\x9b\n    score: accepted tier xl |",
      "mallory@evil.example <i>x</i>", "why\r| forged | cell |\n- item\n> quote\n***",
      // (a CR or LF in a workload key is refused since issue 41: the rows it forged are tried in titles)
      "m|`x`<!-- [w](http://e.example) www.e.example *w*  | a | b |", "gu<i>a</i>|rd_mb", "b<b>|`]("};
}
Strings Benign() {
  return {"fast kernels for the long prompt case, measured on the standard workload, nothing more",
          "slow bold a link img code em em del strong b www evil example https evil example x",
          "parked two threads nothing more here and nothing else either",
          "mallory@evil.example i x",
          "why a forged cell item quote",
          "m x w http e example e example w a b",
          "guard_mb",
          "fake-build"};
}

// Three changes (accepted, rejected for parity, parked) and a refused revert,
// through the real binary.
void Build(const Case& c, const Strings& s) {
  const std::string W = " --workload " + Quote(s.workload), G = " --guard " + Quote(s.guard + "=100");
  auto bench = [&](const std::string& tag, double mean) { return Bench(c.dir, tag, mean, 0.002, 7, W + G); };
  const std::string who = " --author " + Quote(s.author);
  auto a = test::Submit(c.db, s.accepted, 10, bench("a-b", 1000), bench("a-h", 1100),
                        Parity("--build " + Quote(s.build)), who);
  ASSERT_EQ(a.j["verdict"], "accepted") << a.cmd.out << a.cmd.err;
  auto b = test::Submit(c.db, s.rejected, 3, bench("b-b", 1000), bench("b-h", 1030), Parity("--top1 0.5"), who);
  ASSERT_EQ(b.j["verdict"], "rejected-parity") << b.cmd.out << b.cmd.err;
  auto p = test::Submit(c.db, s.parked, 1, bench("p-b", 1100), bench("p-h", 1100), Parity(), who);
  ASSERT_EQ(p.j["verdict"], "none") << p.cmd.out << p.cmd.err;
  auto r = Shell(test::VerityBin() + " revert 1 --json --ledger " + c.db + " --reason " + Quote(s.reason) + who +
                 " --base-cmd " + Quote(bench("r-b", 1100)) + " --head-cmd " + Quote(bench("r-h", 1100)) +
                 " --parity-cmd " + Quote(Parity()));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
}

// Node name -> count in cmark-gfm's XML of a markdown file (XML escapes text,
// so every `<name` is a node).
std::map<std::string, int> Nodes(const std::string& md_path) {
  auto r = Shell("cmark-gfm --unsafe -e table -e autolink -e strikethrough -e tagfilter -t xml " + md_path);
  EXPECT_EQ(r.exit_code, 0) << "cmark-gfm (the Debian package, installed by scripts/setup.sh) failed: " << r.err;
  std::map<std::string, int> n;
  for (size_t p = r.out.find('<'); p != std::string::npos; p = r.out.find('<', p + 1)) {
    size_t e = p + 1;
    while (e < r.out.size() && (std::isalpha(static_cast<unsigned char>(r.out[e])) || r.out[e] == '_')) e++;
    if (e > p + 1) n[r.out.substr(p + 1, e - p - 1)]++;
  }
  return n;
}

size_t Count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + needle.size())) n++;
  return n;
}

std::string Report(const Case& c) {
  const std::string out = c.dir + "/CHANGELOG.md";
  auto r = Shell(test::VerityBin() + " report --ledger " + c.db + " --out " + out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

// The escapes themselves: benign text untouched, each hostile piece escaped.
TEST(Markdown, EscapesOnlyWhatGfmCouldReadAsMarkup) {
  const std::pair<const char*, const char*> cases[] = {
      {"q8_0 decode, 4x4 tiles (>= 200 us)", "q8_0 decode, 4x4 tiles (>= 200 us)"},
      {"bounds [-7.25%, +1.37%] at alpha", "bounds [-7.25%, +1.37%] at alpha"},
      {"*em* _em_ ~del~ `c` a|b \\", "\\*em\\* \\_em\\_ \\~del\\~ \\`c\\` a\\|b \\\\"},
      {"[a](b) x]", "[a\\](b) x\\]"},
      {"<!-- <b> </i> a <= b <", "\\<!-- \\<b> \\</i> a <= b \\<"},
      {"issue #5, fix ##", "issue #5, fix \\#\\#"},
      {"&lt; & &#10;", "\\&lt; & \\&#10;"},
      {"www.e.co https://e.co a@b.co @x", "www\\.e.co https\\://e.co a`@`b.co @x"},
      {"a\r\nb\nc\rd\x1b\xe2\x80\xae\xff", "a b c d\\\\e\\\\u202e\\\\xff"},
  };
  for (const auto& [in, out] : cases) EXPECT_EQ(markdown::Text(in), out) << in;
  EXPECT_EQ(markdown::LinkText("a [b] c"), "a \\[b\\] c");
  EXPECT_EQ(markdown::Code("stories260K.bin f32 1t", false), "`stories260K.bin f32 1t`");
  EXPECT_EQ(markdown::Code("a``b`", false), "``` a``b` ```");
  EXPECT_EQ(markdown::Code("a|b\\|c", true), "`a\\|b\\x5c\\|c`");
  EXPECT_EQ(markdown::Code("a|b", false), "`a|b`");
}

// True when every byte of `s` belongs to a well-formed UTF-8 character.
bool ValidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const utf8::Char u = utf8::Decode(s, i);
    if (u.length == 0) return false;
    i += u.length;
  }
  return true;
}

// Issue 41, finding 7: a multi-byte character passes through whole (it was
// copied a byte at a time, its continuation bytes escaped: `José` ->
// `Jos\xc3\\xa9`, invalid UTF-8); only markup and invalid bytes are escaped.
TEST(Markdown, KeepsUtf8) {
  const std::string international[] = {
      "José Müller", "naïve café — “quotes”", "数据 日本語 한국어", "emoji 😀🚀", "שלום עליכם", "مرحبا", "Ωμέγα"};
  for (const auto& t : international) {
    EXPECT_EQ(markdown::Text(t), t);
    EXPECT_EQ(markdown::LinkText(t), t);
    EXPECT_EQ(markdown::Code(t, false), "`" + t + "`");
    EXPECT_EQ(markdown::Code(t, true), "`" + t + "`");
  }
  EXPECT_EQ(markdown::Text("*José*|数"), "\\*José\\*\\|数");
  EXPECT_EQ(markdown::Code("é|`", true), "`` é\\|` ``");
  // Invalid bytes are still shown as escapes, and what comes out is UTF-8.
  EXPECT_EQ(markdown::Text("a\xff\xc3"), "a\\\\xff\\\\xc3");
  for (const std::string hostile :
       {std::string("Jos\xc3\xa9\xff\xe2\x80\xae\xf0\x9f\x98"), std::string("\xe6\x95\xb0\xc0\xaf`|")})
    for (const std::string& out : {markdown::Text(hostile), markdown::Code(hostile, true), markdown::LinkText(hostile)})
      EXPECT_TRUE(ValidUtf8(out)) << out;
}

TEST(Terminal, ShowsEveryControlVisibly) {
  EXPECT_EQ(terminal::Visible("plain — ünïcode → ok"), "plain — ünïcode → ok");
  EXPECT_EQ(terminal::Visible("a\nb\rc\td\be\x1b[2K\x7f\\"), "a\\nb\\rc\\td\\be\\e[2K\\x7f\\\\");
  EXPECT_EQ(terminal::Visible("\xc2\x9b \xe2\x80\xae \xe2\x81\xa6 \xe2\x80\xa8 \x9b \xc0\xaf \xed\xa0\x80"),
            "\\u009b \\u202e \\u2066 \\u2028 \\x9b \\xc0\\xaf \\xed\\xa0\\x80");
}

TEST(Escape, NoSubmittedStringBecomesMarkupInTheChangelog) {
  Case hostile = test::Fresh("escape-md-hostile"), benign = test::Fresh("escape-md-benign");
  Build(hostile, Hostile());
  Build(benign, Benign());
  const auto h = Nodes(Report(hostile)), b = Nodes(Report(benign));
  ASSERT_GT(b.count("heading"), 0u) << "the renderer printed no XML";
  for (const auto& [name, count] : b) EXPECT_EQ(h.count(name) ? h.at(name) : 0, count) << "node <" << name << ">";
  for (const auto& [name, count] : h)
    EXPECT_TRUE(b.count(name)) << count << " <" << name << "> nodes from submitted strings";
}

// The bytes a terminal would act on: C0 but LF, DEL, C1 (raw or as UTF-8),
// bidi controls and line separators, and bytes that are not UTF-8.
std::string RawControls(const std::string& s) {
  std::string found;
  for (size_t i = 0; i < s.size(); i++) {
    const unsigned char c = s[i], d = i + 1 < s.size() ? s[i + 1] : 0, e = i + 2 < s.size() ? s[i + 2] : 0;
    const bool c0 = (c < 0x20 && c != '\n') || c == 0x7f;
    const bool c1 = c == 0xc2 && d >= 0x80 && d <= 0x9f;
    const bool bidi =
        (c == 0xe2 && d == 0x80 && ((e >= 0xaa && e <= 0xae) || e == 0x8e || e == 0x8f || e == 0xa8 || e == 0xa9)) ||
        (c == 0xe2 && d == 0x81 && e >= 0xa6 && e <= 0xa9) || (c == 0xd8 && d == 0x9c);
    const bool stray = c >= 0x80 && c <= 0xbf && (i == 0 || static_cast<unsigned char>(s[i - 1]) < 0x80);
    if (c0 || c1 || bidi || stray) found += " byte " + std::to_string(i) + "=" + std::to_string(c);
  }
  return found;
}

// Issue 41, finding 8: every chart file name derived from a key is its own:
// workloads `m f32 1t` and `m-f32-1t` wrote one SVG, and the changelog showed
// one chart for both.
TEST(Escape, ChartFilesOfTwoWorkloadsNeverCollide) {
  Case c = test::Fresh("escape-charts");
  int seed = 40;
  for (const std::string w : {"m f32 1t", "m-f32-1t"}) {
    const std::string W = " --workload " + Quote(w);
    const std::string tag = "w" + std::to_string(seed);
    auto a = test::Submit(c.db, "on " + w, 10, Bench(c.dir, tag + "b", 1000, 0.002, seed, W),
                          Bench(c.dir, tag + "h", 1100, 0.002, seed + 1, W), Parity());
    seed += 2;
    ASSERT_EQ(a.j["verdict"], "accepted") << a.cmd.out << a.cmd.err;
  }
  const std::string md = test::ReadFile(Report(c));
  std::set<std::string> ladders;
  for (const auto& e : std::filesystem::directory_iterator(c.dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ladder-", 0) == 0) ladders.insert(name);
  }
  EXPECT_EQ(ladders.size(), 2u) << md;
  for (const auto& f : ladders) EXPECT_EQ(Count(md, "](" + f + ")"), 1u) << f << "\n" << md;
}

// Issue 41, finding 9: format characters that print as nothing (U+2060,
// U+200B, U+FEFF) are shown; a workload or metric key holding one is refused
// by name, so no twin of a frontier can be made to bank a refused step again.
TEST(Escape, InvisibleFormatCharactersAreShownAndRefusedInKeys) {
  EXPECT_EQ(terminal::Visible("m\xe2\x81\xa0 f32"), "m\\u2060 f32");
  EXPECT_EQ(terminal::Visible("a\xe2\x80\x8b"
                              "b\xef\xbb\xbf"
                              "c\xc2\xad"),
            "a\\u200bb\\ufeffc\\u00ad");
  EXPECT_EQ(markdown::Text("m\xe2\x81\xa0"), "m\\\\u2060");
  EXPECT_EQ(terminal::FirstInvisible("stories260K.bin f32 1t"), "");
  EXPECT_EQ(terminal::FirstInvisible("m\xe2\x81\xa0"), "U+2060 at byte 1");
  Case c = test::Fresh("escape-twin");
  const std::string plain = "m f32 1t", twin = "m\xe2\x81\xa0 f32 1t";
  auto a = test::Submit(c.db, "x", 10, Bench(c.dir, "ab", 1000, 0.002, 60, " --workload " + Quote(plain)),
                        Bench(c.dir, "ah", 1100, 0.002, 61, " --workload " + Quote(plain)), Parity());
  ASSERT_EQ(a.j["verdict"], "accepted") << a.cmd.out << a.cmd.err;
  auto t = test::Submit(c.db, "x on the twin", 10, Bench(c.dir, "tb", 1000, 0.002, 62, " --workload " + Quote(twin)),
                        Bench(c.dir, "th", 1100, 0.002, 63, " --workload " + Quote(twin)), Parity());
  EXPECT_NE(t.j.value("verdict", ""), "accepted") << t.cmd.out;
  EXPECT_NE((t.cmd.out + t.cmd.err).find("U+2060"), std::string::npos) << t.cmd.out << t.cmd.err;
  auto f = test::JsonOf(test::VerityBin() + " frontier --json --ledger " + c.db);
  EXPECT_EQ(f["frontier"].size(), 1u) << f;
  auto m = Shell(test::VerityBin() + " submit --json --ledger " + c.db + " --title m --predict 1 --metric " +
                 Quote("decode\xe2\x80\x8b_tok_s") + " --base-cmd true --head-cmd true --parity-cmd true");
  EXPECT_NE(m.exit_code, 0);
  EXPECT_NE(m.err.find("U+200B"), std::string::npos) << m.err;
}

TEST(Escape, TerminalPrintersShowControlsVisibly) {
  Case c = test::Fresh("escape-term");
  Build(c, Hostile());
  const std::string L = " --ledger " + c.db;
  for (const std::string q : {"show 1", "show 2", "show 3", "show 4", "frontier", "history all", "history reverts",
                              "history none", "history retractions", "history predictions", "drift"}) {
    auto r = Shell(test::VerityBin() + " " + q + L);
    EXPECT_EQ(r.exit_code, 0) << q << ": " << r.err;
    EXPECT_EQ(RawControls(r.out), "") << "verity " << q << " printed raw controls:\n" << r.out;
  }
  // The parked change's title tries to draw its own score lines: only the real one starts a line.
  auto show = Shell(test::VerityBin() + " show 3" + L);
  EXPECT_EQ(Count(show.out, "\n    score: "), 1u) << show.out;
  EXPECT_NE(show.out.find("parked\\e[2K\\r    score: accepted\\b\\b\\u009b31m\\u202edesrever\\x9b\\n"),
            std::string::npos)
      << show.out;
}

// A run rejected because its logit rows differ (all_rows_sha256, what the gate
// compares) while the scored windows agree (logits_sha256) is never shown as
// proving bit identity; a run whose rows agree is.
TEST(Escape, BitIdentityWordingFollowsTheGate) {
  Case c = test::Fresh("escape-bits");
  const std::string windows(64, 'c');
  auto bits = [&](const std::string& tag, const std::string& head_rows, const std::string& base_rows) {
    return test::Submit(
        c.db, tag, 3.5, Bench(c.dir, tag + "-b", 1000, 0.003, 5), Bench(c.dir, tag + "-h", 1035, 0.003, 6),
        Parity("--sha " + windows + " --all-sha " + head_rows),
        "--claim-bit-identical --base-parity-cmd " + Quote(Parity("--sha " + windows + " --all-sha " + base_rows)));
  };
  auto differ = bits("differ", std::string(64, '1'), std::string(64, '2'));
  ASSERT_EQ(differ.j["verdict"], "rejected-parity") << differ.cmd.out << differ.cmd.err;
  auto same = bits("agree", std::string(64, '3'), std::string(64, '3'));
  ASSERT_NE(same.j["verdict"], "rejected-parity") << same.cmd.out << same.cmd.err;
  const std::string md = test::ReadFile(Report(c));
  const size_t one = md.find("### Change 1:"), two = md.find("### Change 2:"), end = md.find("\n## ", two);
  ASSERT_NE(two, std::string::npos) << md;
  const std::string first = md.substr(one, two - one), second = md.substr(two, end - two);
  EXPECT_EQ(first.find("bit identity proved"), std::string::npos) << first;
  EXPECT_NE(first.find("bit identity claimed, not proved"), std::string::npos) << first;
  EXPECT_NE(second.find("bit identity proved: every logit row hashes to 3333333333333333 on both sides"),
            std::string::npos)
      << second;
}

}  // namespace
}  // namespace verity
