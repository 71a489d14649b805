#include "ledger/sql_dialect.h"

#include <cctype>
#include <regex>

namespace verity::ledger::dialect {
namespace {

bool IsWordChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Length of the quoted run starting at s[i] (a '...' literal or "..." name; a
// doubled quote inside is part of it).
size_t QuotedLength(const std::string& s, size_t i) {
  const char q = s[i];
  size_t j = i + 1;
  while (j < s.size()) {
    if (s[j] == q) {
      if (j + 1 < s.size() && s[j + 1] == q) {
        j += 2;
        continue;
      }
      return j + 1 - i;
    }
    j++;
  }
  return s.size() - i;
}

std::string StripComments(const std::string& sql) {
  std::string out;
  for (size_t i = 0; i < sql.size();) {
    if (sql[i] == '\'' || sql[i] == '"') {
      const size_t n = QuotedLength(sql, i);
      out.append(sql, i, n);
      i += n;
    } else if (sql.compare(i, 2, "--") == 0) {
      while (i < sql.size() && sql[i] != '\n') i++;
    } else {
      out += sql[i++];
    }
  }
  return out;
}

// Rewrites words and placeholders; `next` numbers the placeholders across calls.
class Rewriter {
 public:
  std::string Run(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size();) {
      const char c = s[i];
      if (c == '\'' || c == '"') {
        const size_t n = QuotedLength(s, i);
        out.append(s, i, n);
        i += n;
      } else if (c == '?') {
        // ?NNN names a parameter by number (SQLite and PostgreSQL's $NNN alike).
        size_t j = i + 1;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) j++;
        out += "$" + (j > i + 1 ? s.substr(i + 1, j - i - 1) : std::to_string(++next_));
        i = j;
      } else if (IsWordChar(c)) {
        size_t j = i;
        while (j < s.size() && IsWordChar(s[j])) j++;
        i = Word(s, i, j, out);
      } else {
        out += c;
        i++;
      }
    }
    return out;
  }

 private:
  // Emits the word s[b, e) and returns where to continue.
  size_t Word(const std::string& s, size_t b, size_t e, std::string& out) {
    const std::string w = s.substr(b, e - b);
    if (w == "INTEGER") out += "BIGINT";
    else if (w == "REAL") out += "DOUBLE PRECISION";
    else if (w == "by") out += "\"by\"";
    else if (w == "group_concat" && e < s.size() && s[e] == '(') return GroupConcat(s, e, out);
    else out += w;
    return e;
  }

  // s[open] is the '(' after group_concat.
  size_t GroupConcat(const std::string& s, size_t open, std::string& out) {
    int depth = 0;
    size_t comma = std::string::npos, i = open;
    for (; i < s.size(); i++) {
      if (s[i] == '\'' || s[i] == '"') {
        i += QuotedLength(s, i) - 1;
      } else if (s[i] == '(') {
        depth++;
      } else if (s[i] == ')' && --depth == 0) {
        break;
      } else if (s[i] == ',' && depth == 1 && comma == std::string::npos) {
        comma = i;
      }
    }
    const size_t arg_end = comma == std::string::npos ? i : comma;
    out += "string_agg(CAST(" + Run(s.substr(open + 1, arg_end - open - 1)) + " AS TEXT), ";
    out += comma == std::string::npos ? std::string("','") : Run(s.substr(comma + 1, i - comma - 1));
    out += ")";
    return i + 1;
  }

  int next_ = 0;
};

const std::regex& TriggerPattern() {
  static const std::regex re(
      R"(CREATE TRIGGER (\w+) BEFORE (UPDATE|DELETE) ON (\w+) BEGIN SELECT RAISE\(ABORT, '([^']*)'\); END;)");
  return re;
}

std::string PostgresTrigger(const AppendOnlyTrigger& t, const std::string& function_schema) {
  const std::string events = t.event == "DELETE" ? "DELETE OR TRUNCATE" : t.event;
  const std::string fn = (function_schema.empty() ? "" : function_schema + ".") + t.name;
  return "CREATE FUNCTION " + fn + "() RETURNS trigger LANGUAGE plpgsql AS $verity$" + PostgresTriggerBody(t) +
         "$verity$; CREATE TRIGGER " + t.name + " BEFORE " + events + " ON " + t.table +
         " FOR EACH STATEMENT EXECUTE FUNCTION " + fn + "();";
}

}  // namespace

std::vector<AppendOnlyTrigger> TriggersIn(const std::string& sql) {
  std::vector<AppendOnlyTrigger> out;
  const std::string s = StripComments(sql);
  for (std::sregex_iterator it(s.begin(), s.end(), TriggerPattern()), end; it != end; ++it)
    out.push_back({(*it)[1], (*it)[3], (*it)[2], (*it)[4]});
  return out;
}

std::string PostgresTriggerBody(const AppendOnlyTrigger& t) {
  return " BEGIN RAISE EXCEPTION '" + t.message + "'; END; ";
}

int PostgresTriggerType(const AppendOnlyTrigger& t) {
  // pg_trigger.h: ROW 1, BEFORE 2, INSERT 4, DELETE 8, UPDATE 16, TRUNCATE 32.
  return 2 | (t.event == "DELETE" ? 8 | 32 : 16);
}

std::string ToPostgres(const std::string& sql, const std::string& function_schema) {
  std::string s = Rewriter().Run(StripComments(sql));
  // Triggers last: their text has no word or placeholder the rewrite touches.
  std::string out;
  auto last = s.cbegin();
  for (std::sregex_iterator it(s.begin(), s.end(), TriggerPattern()), end; it != end; ++it) {
    out.append(last, (*it)[0].first);
    out += PostgresTrigger({(*it)[1], (*it)[3], (*it)[2], (*it)[4]}, function_schema);
    last = (*it)[0].second;
  }
  out.append(last, s.cend());
  return out;
}

}  // namespace verity::ledger::dialect
