// Jinja source to a tree (serve/jinja_ast.h): the template is cut into text
// and tags with Hugging Face's whitespace rules (trim_blocks, lstrip_blocks,
// and the tags' own - and +), each tag's tokens are parsed with Jinja2's
// precedence, and anything outside the subset is an error naming its line.
#include <cctype>
#include <map>
#include <set>

#include "serve/jinja_ast.h"

namespace verity::serve::jinja {
namespace {

// ---------------------------------------------------------------- segments

struct Segment {
  enum class Kind { kText, kOutput, kBlock };
  Kind kind;
  std::string body;  // the text, or the tag's inside
  int line;
};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Where the tag opened at `from` (just after its "{{" or "{%") closes: the
// first `close` outside a string literal; npos when it never does.
size_t TagEnd(const std::string& s, size_t from, const char* close) {
  char quote = 0;
  for (size_t i = from; i + 1 < s.size(); i++) {
    if (quote) {
      if (s[i] == '\\') i++;
      else if (s[i] == quote) quote = 0;
    } else if (s[i] == '\'' || s[i] == '"') {
      quote = s[i];
    } else if (s[i] == close[0] && s[i + 1] == close[1]) {
      return i;
    }
  }
  return std::string::npos;
}

// Line numbers for positions met in increasing order (one pass, not one per tag).
class LineCounter {
 public:
  explicit LineCounter(const std::string& s) : s_(s) {}
  int At(size_t pos) {
    for (; at_ < pos && at_ < s_.size(); at_++) line_ += s_[at_] == '\n';
    return line_;
  }

 private:
  const std::string& s_;
  size_t at_ = 0;
  int line_ = 1;
};

// What Jinja2's lexer does first: CRLF and CR become LF, and one trailing
// newline is dropped (keep_trailing_newline is off).
std::string Normalized(const std::string& src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); i++) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') i++;
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

Status SyntaxError(int line, const std::string& what) {
  return Status::Error("chat template line " + std::to_string(line) + ": " + what);
}

// The text between tags, with every whitespace rule applied.
Result<std::vector<Segment>> Segments(const std::string& source) {
  const std::string src = Normalized(source);
  LineCounter lines(src);
  std::vector<Segment> out;
  std::string text;
  bool strip_next = false, trim_newline = false;  // what the previous tag asks of the text after it
  size_t i = 0;
  auto flush_text = [&] {
    if (!text.empty()) out.push_back({Segment::Kind::kText, text, 0});
    text.clear();
  };
  while (i < src.size()) {
    const size_t open = src.find('{', i);
    const bool tag = open != std::string::npos && open + 1 < src.size() &&
                     (src[open + 1] == '{' || src[open + 1] == '%' || src[open + 1] == '#');
    const size_t upto = tag ? open : (open == std::string::npos ? src.size() : open + 1);
    std::string piece = src.substr(i, upto - i);
    // Every piece but the source's last ends in a character that is not
    // whitespace (a '{' that opens no tag), so each rule applies once.
    if (strip_next) {
      size_t k = 0;
      while (k < piece.size() && IsSpace(piece[k])) k++;
      piece.erase(0, k);
    } else if (trim_newline) {
      if (piece.rfind("\r\n", 0) == 0) piece.erase(0, 2);
      else if (!piece.empty() && piece[0] == '\n') piece.erase(0, 1);
    }
    strip_next = trim_newline = false;
    text += piece;
    i = upto;
    if (!tag) continue;
    const char type = src[open + 1];
    const int line = lines.At(open);
    size_t inner = open + 2;
    // '-' strips on either tag; '+' (keep the indentation, keep the newline) is a block tag's only.
    const char mod = inner < src.size() ? src[inner] : 0;
    if (mod == '-' || (mod == '+' && type == '%')) inner++;
    const char* close = type == '{' ? "}}" : type == '%' ? "%}" : "#}";
    size_t end = type == '#' ? src.find(close, inner) : TagEnd(src, inner, close);
    if (end == std::string::npos)
      return SyntaxError(line, std::string("a tag opened with '{") + type + "' never closes");
    const bool right_strip = end > inner && src[end - 1] == '-';
    const bool right_keep = type == '%' && end > inner && src[end - 1] == '+';
    std::string body = src.substr(inner, end - inner - (right_strip || right_keep ? 1 : 0));
    // Left side: '-' strips all whitespace before the tag; a block or comment
    // tag alone on its line loses the indentation before it (lstrip_blocks).
    if (mod == '-') {
      while (!text.empty() && IsSpace(text.back())) text.pop_back();
    } else if (type != '{' && mod != '+') {
      // Jinja2's [^\S\n]*: any whitespace but a newline.
      auto blank = [](char ch) { return ch != '\n' && IsSpace(ch); };
      size_t b = open;
      while (b > 0 && blank(src[b - 1])) b--;
      if (b == 0 || src[b - 1] == '\n')
        while (!text.empty() && blank(text.back())) text.pop_back();
    }
    flush_text();
    if (type != '#') out.push_back({type == '{' ? Segment::Kind::kOutput : Segment::Kind::kBlock, body, line});
    i = end + 2;
    strip_next = right_strip;
    trim_newline = !right_strip && !right_keep && type != '{';
  }
  flush_text();
  return out;
}

// ---------------------------------------------------------------- tokens

struct Token {
  enum class Kind { kName, kString, kInt, kFloat, kOp, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;
  long long i = 0;
  double f = 0.0;
};

// The name at s[*i] (letters, digits, underscores); *i moves past it.
void LexName(const std::string& s, size_t* i, std::vector<Token>* out) {
  size_t j = *i;
  while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) j++;
  out->push_back({Token::Kind::kName, s.substr(*i, j - *i)});
  *i = j;
}

// The integer or float at s[*i] (a fraction, an exponent or both make a
// float); *i moves past it.
Status LexNumber(const std::string& s, size_t* i, int line, std::vector<Token>* out) {
  size_t j = *i;
  while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) j++;
  auto digit = [&](size_t k) { return k < s.size() && std::isdigit(static_cast<unsigned char>(s[k])); };
  bool is_float = false;
  if (j + 1 < s.size() && s[j] == '.' && digit(j + 1)) {  // a fraction
    is_float = true;
    j++;
    while (digit(j)) j++;
  }
  if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {  // an exponent
    const size_t k = j + 1 + (j + 1 < s.size() && (s[j + 1] == '+' || s[j + 1] == '-'));
    if (digit(k)) {
      is_float = true;
      j = k;
      while (digit(j)) j++;
    }
  }
  if (is_float) {
    Token t{Token::Kind::kFloat, s.substr(*i, j - *i)};
    t.f = std::strtod(t.text.c_str(), nullptr);  // huge: inf, as Python's float()
    out->push_back(t);
  } else {
    Token t{Token::Kind::kInt, s.substr(*i, j - *i)};
    if (t.text.size() > 1 && t.text[0] == '0')
      return SyntaxError(line, "the integer " + t.text + " has a leading zero");
    if (t.text.size() > 18) return SyntaxError(line, "the integer " + t.text + " is too large");
    t.i = std::strtoll(t.text.c_str(), nullptr, 10);
    out->push_back(t);
  }
  *i = j;
  return OkStatus();
}

// The string literal opened by the quote at s[*i], its escapes resolved;
// *i moves past its closing quote.
Status LexString(const std::string& s, size_t* i, int line, std::vector<Token>* out) {
  const char c = s[*i];
  std::string v;
  size_t j = *i + 1;
  for (; j < s.size() && s[j] != c; j++) {
    if (s[j] != '\\' || j + 1 >= s.size()) {
      v += s[j];
      continue;
    }
    const char e = s[++j];
    switch (e) {
      case 'n': v += '\n'; break;
      case 't': v += '\t'; break;
      case 'r': v += '\r'; break;
      case '\\': v += '\\'; break;
      case '\'': v += '\''; break;
      case '"': v += '"'; break;
      case '\n': break;
      default: return SyntaxError(line, std::string("the string escape \\") + e + " is not supported");
    }
  }
  if (j >= s.size()) return SyntaxError(line, "a string literal never closes");
  out->push_back({Token::Kind::kString, v});
  *i = j + 1;
  return OkStatus();
}

// The operator at s[*i] (two characters where they make one); *i moves past it.
Status LexOperator(const std::string& s, size_t* i, int line, std::vector<Token>* out) {
  const char c = s[*i];
  static const char* two[] = {"==", "!=", "<=", ">=", "//", "**"};
  std::string op(1, c);
  for (const char* t : two)
    if (s.compare(*i, 2, t) == 0) op = t;
  if (op.size() == 1 && std::string("+-*/%~<>()[]{},.:|=").find(c) == std::string::npos)
    return SyntaxError(line, std::string("unexpected character '") + c + "'");
  out->push_back({Token::Kind::kOp, op});
  *i += op.size();
  return OkStatus();
}

Result<std::vector<Token>> Tokens(const std::string& s, int line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (IsSpace(c)) {
      i++;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      LexName(s, &i, &out);
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      VERITY_RETURN_IF_ERROR(LexNumber(s, &i, line, &out));
    } else if (c == '\'' || c == '"') {
      VERITY_RETURN_IF_ERROR(LexString(s, &i, line, &out));
    } else {
      VERITY_RETURN_IF_ERROR(LexOperator(s, &i, line, &out));
    }
  }
  // Bounds the depth of any tree a tag parses to (a chain of n operators is n deep).
  constexpr size_t kMaxTokens = 1000;
  if (out.size() > kMaxTokens) return SyntaxError(line, "a tag of more than " + std::to_string(kMaxTokens) + " tokens");
  out.push_back({Token::Kind::kEnd, ""});
  return out;
}

// ---------------------------------------------------------------- expressions

// Each filter and the arguments it takes here: at most `positional`, and
// the keyword `keyword` ("" for none). Jinja2's other arguments are refused.
struct FilterArgs {
  int positional;
  const char* keyword;
};
const std::map<std::string, FilterArgs>& KnownFilters() {
  static const std::map<std::string, FilterArgs> f = {
      {"trim", {0, ""}},        {"length", {0, ""}},     {"count", {0, ""}},      {"upper", {0, ""}},
      {"lower", {0, ""}},       {"capitalize", {0, ""}}, {"title", {0, ""}},      {"first", {0, ""}},
      {"last", {0, ""}},        {"join", {1, ""}},       {"default", {2, ""}},    {"d", {2, ""}},
      {"string", {0, ""}},      {"int", {0, ""}},        {"float", {0, ""}},      {"tojson", {0, "indent"}},
      {"items", {0, ""}},       {"replace", {2, ""}},    {"list", {0, ""}},       {"reverse", {0, ""}},
      {"select", {2, ""}},      {"reject", {2, ""}},     {"selectattr", {3, ""}}, {"rejectattr", {3, ""}},
      {"map", {0, "attribute"}}};
  return f;
}
// The filters whose first (select, reject) or second (selectattr,
// rejectattr) argument names a test; it must be a string literal naming one.
int TestArgumentOf(const std::string& filter) {
  if (filter == "select" || filter == "reject") return 0;
  if (filter == "selectattr" || filter == "rejectattr") return 1;
  return -1;
}
// Tests select/reject may name, with an argument after them.
const std::set<std::string>& ComparisonTests() {
  static const std::set<std::string> t = {"equalto", "eq", "==", "ne", "!="};
  return t;
}
const std::set<std::string>& KnownTests() {
  static const std::set<std::string> t = {"defined",  "undefined", "none",    "string",  "number",
                                          "integer",  "float",     "boolean", "mapping", "iterable",
                                          "sequence", "true",      "false",   "even",    "odd"};
  return t;
}
const std::set<std::string>& KnownMethods() {
  static const std::set<std::string> m = {"strip",      "lstrip",   "rstrip", "upper",   "lower",
                                          "startswith", "endswith", "split",  "replace", "title",
                                          "capitalize", "items",    "keys",   "values",  "get"};
  return m;
}
const std::set<std::string>& KnownFunctions() {
  static const std::set<std::string> g = {"raise_exception", "namespace", "range", "strftime_now"};
  return g;
}
const std::set<std::string>& KnownLoopAttributes() {
  static const std::set<std::string> a = {"index", "index0", "revindex", "revindex0", "first", "last", "length"};
  return a;
}

class ExprParser {
 public:
  ExprParser(std::vector<Token> t, int line) : t_(std::move(t)), line_(line) {}

  Result<std::unique_ptr<Expr>> Parse() { return Conditional(); }
  // An expression without a trailing `if ... else` (a for loop's iterable and filter).
  Result<std::unique_ptr<Expr>> ParseOr() { return Or(); }
  bool AtEnd() const { return Peek().kind == Token::Kind::kEnd; }
  const Token& Peek(int k = 0) const { return t_[std::min(pos_ + k, t_.size() - 1)]; }
  bool IsName(const char* n, int k = 0) const { return Peek(k).kind == Token::Kind::kName && Peek(k).text == n; }
  bool IsOp(const char* o, int k = 0) const { return Peek(k).kind == Token::Kind::kOp && Peek(k).text == o; }
  Token Take() { return t_[std::min(pos_++, t_.size() - 1)]; }
  Status Expect(const char* op) {
    if (!IsOp(op)) return Error(std::string("expected '") + op + "'");
    pos_++;
    return OkStatus();
  }
  Result<std::string> Name(const char* what) {
    if (Peek().kind != Token::Kind::kName) return Error(std::string("expected ") + what);
    return Take().text;
  }
  Status Error(const std::string& what) const {
    const Token& at = Peek();
    return SyntaxError(line_,
                       what + (at.kind == Token::Kind::kEnd ? " at the end of the tag" : " near '" + at.text + "'"));
  }

 private:
  std::unique_ptr<Expr> Node(Expr::Op op, std::string name = "") {
    auto e = std::make_unique<Expr>();
    e->op = op;
    e->name = std::move(name);
    e->line = line_;
    return e;
  }
  std::unique_ptr<Expr> Binary(Expr::Op op, std::string name, std::unique_ptr<Expr> a, std::unique_ptr<Expr> b) {
    auto e = Node(op, std::move(name));
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  // a if cond else b
  Result<std::unique_ptr<Expr>> Conditional() {
    VERITY_ASSIGN_OR_RETURN(auto a, Or());
    while (IsName("if")) {
      pos_++;
      VERITY_ASSIGN_OR_RETURN(auto cond, Or());
      std::unique_ptr<Expr> b;
      if (IsName("else")) {
        pos_++;
        VERITY_ASSIGN_OR_RETURN(b, Conditional());
      }
      auto e = Node(Expr::Op::kCond);
      e->args.push_back(std::move(a));
      e->args.push_back(std::move(cond));
      e->args.push_back(std::move(b));
      a = std::move(e);
    }
    return a;
  }
  Result<std::unique_ptr<Expr>> Or() {
    VERITY_ASSIGN_OR_RETURN(auto a, And());
    while (IsName("or")) {
      pos_++;
      VERITY_ASSIGN_OR_RETURN(auto b, And());
      a = Binary(Expr::Op::kOr, "or", std::move(a), std::move(b));
    }
    return a;
  }
  Result<std::unique_ptr<Expr>> And() {
    VERITY_ASSIGN_OR_RETURN(auto a, Not());
    while (IsName("and")) {
      pos_++;
      VERITY_ASSIGN_OR_RETURN(auto b, Not());
      a = Binary(Expr::Op::kAnd, "and", std::move(a), std::move(b));
    }
    return a;
  }
  Result<std::unique_ptr<Expr>> Not() {
    if (!IsName("not")) return Compare();
    pos_++;
    VERITY_ASSIGN_OR_RETURN(auto a, Not());
    auto e = Node(Expr::Op::kNot);
    e->args.push_back(std::move(a));
    return e;
  }
  Result<std::unique_ptr<Expr>> Compare() {
    VERITY_ASSIGN_OR_RETURN(auto a, Math1());
    for (int comparisons = 0;; comparisons++) {
      std::string op;
      bool negated = false;
      for (const char* o : {"==", "!=", "<", ">", "<=", ">="})
        if (IsOp(o)) op = o;
      if (op.empty() && IsName("in")) op = "in";
      if (op.empty() && IsName("not") && IsName("in", 1)) op = "in", negated = true, pos_++;
      if (op.empty()) return a;
      // Python chains a < b < c as (a < b) and (b < c); templates do not use it.
      if (comparisons > 0) return Error("chained comparisons are not supported");
      pos_++;
      VERITY_ASSIGN_OR_RETURN(auto b, Math1());
      a = Binary(Expr::Op::kBinary, op, std::move(a), std::move(b));
      a->negated = negated;
    }
  }
  Result<std::unique_ptr<Expr>> Math1() {
    VERITY_ASSIGN_OR_RETURN(auto a, Concat());
    while (IsOp("+") || IsOp("-")) {
      const std::string op = Take().text;
      VERITY_ASSIGN_OR_RETURN(auto b, Concat());
      a = Binary(Expr::Op::kBinary, op, std::move(a), std::move(b));
    }
    return a;
  }
  Result<std::unique_ptr<Expr>> Concat() {
    VERITY_ASSIGN_OR_RETURN(auto a, Math2());
    while (IsOp("~")) {
      pos_++;
      VERITY_ASSIGN_OR_RETURN(auto b, Math2());
      a = Binary(Expr::Op::kBinary, "~", std::move(a), std::move(b));
    }
    return a;
  }
  Result<std::unique_ptr<Expr>> Math2() {
    VERITY_ASSIGN_OR_RETURN(auto a, Unary(true));
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      if (IsOp("%") && a->op == Expr::Op::kLiteral && a->literal.kind == Value::Kind::kString)
        return Error("%-formatting of strings is not supported");
      const std::string op = Take().text;
      VERITY_ASSIGN_OR_RETURN(auto b, Unary(true));
      a = Binary(Expr::Op::kBinary, op, std::move(a), std::move(b));
    }
    if (IsOp("**")) return Error("'**' is not supported");
    return a;
  }
  // Jinja2's parse_unary: a negation binds its operand before the filters.
  // Every nesting (parentheses, brackets, arguments, negations) passes here,
  // so its depth bounds the recursion a hostile template can cause.
  Result<std::unique_ptr<Expr>> Unary(bool with_filter) {
    if (++depth_ > kMaxDepth) return Error("expressions nested deeper than " + std::to_string(kMaxDepth));
    struct Leave {
      int& d;
      ~Leave() { d--; }
    } leave{depth_};
    std::unique_ptr<Expr> a;
    if (IsOp("-") || IsOp("+")) {
      const bool neg = Take().text == "-";
      VERITY_ASSIGN_OR_RETURN(auto operand, Unary(false));
      a = Node(Expr::Op::kNeg, neg ? "-" : "+");  // + checks a number, as Python's unary +
      a->args.push_back(std::move(operand));
    } else {
      VERITY_ASSIGN_OR_RETURN(a, Primary());
      VERITY_ASSIGN_OR_RETURN(a, Postfix(std::move(a)));
    }
    if (with_filter) return Filters(std::move(a));
    return a;
  }
  Result<std::unique_ptr<Expr>> Primary() {
    const Token t = Take();
    switch (t.kind) {
      case Token::Kind::kString: {
        auto e = Node(Expr::Op::kLiteral);
        e->literal = Value::Str(t.text);
        return e;
      }
      case Token::Kind::kInt: {
        auto e = Node(Expr::Op::kLiteral);
        e->literal = Value::Int(t.i);
        return e;
      }
      case Token::Kind::kFloat: {
        auto e = Node(Expr::Op::kLiteral);
        e->literal = Value::Float(t.f);
        return e;
      }
      case Token::Kind::kName: {
        auto e = Node(Expr::Op::kLiteral);
        if (t.text == "true" || t.text == "True") e->literal = Value::Bool(true);
        else if (t.text == "false" || t.text == "False") e->literal = Value::Bool(false);
        else if (t.text == "none" || t.text == "None") e->literal = Value::None();
        else e = Node(Expr::Op::kVar, t.text);
        return e;
      }
      case Token::Kind::kOp:
        if (t.text == "(") {
          VERITY_ASSIGN_OR_RETURN(auto e, Conditional());
          if (IsOp(",")) return Error("tuples are not supported");
          VERITY_RETURN_IF_ERROR(Expect(")"));
          return e;
        }
        if (t.text == "[") return ListLiteral();
        if (t.text == "{") return DictLiteral();
        break;
      case Token::Kind::kEnd: break;
    }
    pos_--;
    return Error("expected an expression");
  }
  Result<std::unique_ptr<Expr>> ListLiteral() {
    auto e = Node(Expr::Op::kList);
    while (!IsOp("]")) {
      VERITY_ASSIGN_OR_RETURN(auto item, Conditional());
      e->args.push_back(std::move(item));
      if (!IsOp(",")) break;
      pos_++;
    }
    VERITY_RETURN_IF_ERROR(Expect("]"));
    return e;
  }
  Result<std::unique_ptr<Expr>> DictLiteral() {
    auto e = Node(Expr::Op::kDict);
    while (!IsOp("}")) {
      if (Peek().kind != Token::Kind::kString) return Error("a dict literal's keys must be string literals");
      e->keys.push_back(Take().text);
      VERITY_RETURN_IF_ERROR(Expect(":"));
      VERITY_ASSIGN_OR_RETURN(auto v, Conditional());
      e->args.push_back(std::move(v));
      if (!IsOp(",")) break;
      pos_++;
    }
    VERITY_RETURN_IF_ERROR(Expect("}"));
    return e;
  }
  // .attr, [index], [a:b:c], (call)
  Result<std::unique_ptr<Expr>> Postfix(std::unique_ptr<Expr> a) {
    for (;;) {
      if (IsOp(".")) {
        pos_++;
        VERITY_ASSIGN_OR_RETURN(std::string name, Name("an attribute name after '.'"));
        if (a->op == Expr::Op::kVar && a->name == "loop" && !KnownLoopAttributes().count(name) && !IsOp("("))
          return SyntaxError(line_, "loop." + name + " is not supported");
        auto e = Node(Expr::Op::kAttr, name);
        e->args.push_back(std::move(a));
        a = std::move(e);
      } else if (IsOp("[")) {
        pos_++;
        VERITY_ASSIGN_OR_RETURN(a, Subscript(std::move(a)));
      } else if (IsOp("(")) {
        VERITY_ASSIGN_OR_RETURN(a, Call(std::move(a)));
      } else {
        return a;
      }
    }
  }
  Result<std::unique_ptr<Expr>> Subscript(std::unique_ptr<Expr> a) {
    std::unique_ptr<Expr> parts[3];
    int n = 0;
    bool slice = false;
    for (;;) {
      if (IsOp(":")) {
        slice = true;
        if (++n > 2) return Error("a slice takes at most start:stop:step");
        pos_++;
        continue;
      }
      if (IsOp("]")) break;
      if (parts[n]) return Error("expected ':' or ']'");
      VERITY_ASSIGN_OR_RETURN(parts[n], Conditional());
    }
    VERITY_RETURN_IF_ERROR(Expect("]"));
    if (!slice && !parts[0]) return Error("an empty subscript");
    auto e = Node(slice ? Expr::Op::kSlice : Expr::Op::kIndex);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(parts[0]));
    if (slice) {
      e->args.push_back(std::move(parts[1]));
      e->args.push_back(std::move(parts[2]));
    }
    return e;
  }
  // Arguments: positional, then name=value.
  Status Arguments(Expr* e) {
    VERITY_RETURN_IF_ERROR(Expect("("));
    while (!IsOp(")")) {
      if (Peek().kind == Token::Kind::kName && IsOp("=", 1)) {
        e->keys.push_back(Take().text);
        pos_++;
      } else if (!e->keys.empty()) {
        return Error("a positional argument after a keyword argument");
      }
      VERITY_ASSIGN_OR_RETURN(auto v, Conditional());
      e->args.push_back(std::move(v));
      if (e->keys.empty()) e->positional++;
      if (!IsOp(",")) break;
      pos_++;
    }
    return Expect(")");
  }
  Result<std::unique_ptr<Expr>> Call(std::unique_ptr<Expr> callee) {
    if (callee->op == Expr::Op::kVar && !KnownFunctions().count(callee->name))
      return SyntaxError(line_, "the function " + callee->name + "() is not supported");
    if (callee->op == Expr::Op::kAttr && !KnownMethods().count(callee->name))
      return SyntaxError(line_, "the method ." + callee->name + "() is not supported");
    if (callee->op != Expr::Op::kVar && callee->op != Expr::Op::kAttr)
      return Error("only functions and methods can be called");
    auto e = Node(Expr::Op::kCall, callee->name);
    e->args.push_back(std::move(callee));
    VERITY_RETURN_IF_ERROR(Arguments(e.get()));
    return e;
  }
  // | filter(args) and `is [not] test`, left to right.
  Result<std::unique_ptr<Expr>> Filters(std::unique_ptr<Expr> a) {
    for (;;) {
      if (IsOp("|")) {
        pos_++;
        VERITY_ASSIGN_OR_RETURN(std::string name, Name("a filter name after '|'"));
        const auto known = KnownFilters().find(name);
        if (known == KnownFilters().end()) return SyntaxError(line_, "the filter '" + name + "' is not supported");
        auto e = Node(Expr::Op::kFilter, name);
        e->args.push_back(std::move(a));
        if (IsOp("(")) {
          VERITY_RETURN_IF_ERROR(Arguments(e.get()));
        }
        const FilterArgs& allowed = known->second;
        const std::string kw = allowed.keyword;
        const bool keywords_ok = e->keys.empty() || (e->keys.size() == 1 && e->keys[0] == kw && e->positional == 0);
        if (e->positional > allowed.positional || !keywords_ok)
          return SyntaxError(line_, "the filter " + name + " takes " +
                                        (kw.empty() ? "at most " + std::to_string(allowed.positional) + " argument(s)"
                                                    : "only " + kw + "=") +
                                        " here");
        if (name == "map" && e->keys.empty()) return SyntaxError(line_, "the filter map takes only attribute= here");
        if (const int t = TestArgumentOf(name); t >= 0 && e->positional > t + 1) {
          const Expr& test = *e->args[1 + t];
          const bool literal = test.op == Expr::Op::kLiteral && test.literal.kind == Value::Kind::kString;
          if (!literal) return SyntaxError(line_, "the filter " + name + " takes a test's name as a string literal");
          const std::string& tn = test.literal.s;
          const bool with_arg = ComparisonTests().count(tn) > 0;
          if (!with_arg && !KnownTests().count(tn)) return SyntaxError(line_, "the test '" + tn + "' is not supported");
          if (with_arg != (e->positional == t + 2))
            return SyntaxError(line_,
                               "the test '" + tn + "' in " + name + (with_arg ? " needs" : " takes no") + " argument");
        }
        a = std::move(e);
      } else if (IsName("is")) {
        pos_++;
        auto e = Node(Expr::Op::kTest);
        if (IsName("not")) e->negated = true, pos_++;
        VERITY_ASSIGN_OR_RETURN(e->name, Name("a test name after 'is'"));
        if (!KnownTests().count(e->name)) return SyntaxError(line_, "the test '" + e->name + "' is not supported");
        if (IsOp("(")) return Error("tests with arguments are not supported");
        e->args.push_back(std::move(a));
        a = std::move(e);
      } else {
        return a;
      }
    }
  }

  static constexpr int kMaxDepth = 64;
  std::vector<Token> t_;
  size_t pos_ = 0;
  int depth_ = 0;
  int line_;
};

// ---------------------------------------------------------------- statements

using NodePtr = std::unique_ptr<Template::Node>;

class BodyParser {
 public:
  explicit BodyParser(std::vector<Segment> s) : s_(std::move(s)) {}

  Result<NodePtr> ParseAll() {
    VERITY_ASSIGN_OR_RETURN(NodePtr body, Body({}));
    if (i_ < s_.size()) return SyntaxError(s_[i_].line, "'" + Keyword(s_[i_]) + "' without its opening tag");
    return body;
  }

 private:
  static std::string Keyword(const Segment& s) {
    size_t a = 0;
    while (a < s.body.size() && IsSpace(s.body[a])) a++;
    size_t b = a;
    while (b < s.body.size() && (std::isalnum(static_cast<unsigned char>(s.body[b])) || s.body[b] == '_')) b++;
    return s.body.substr(a, b - a);
  }

  // Nodes up to (not past) a block tag whose keyword is in `until`.
  Result<NodePtr> Body(const std::set<std::string>& until) {
    if (++depth_ > kMaxDepth)
      return SyntaxError(i_ < s_.size() ? s_[i_].line : 0, "blocks nested deeper than " + std::to_string(kMaxDepth));
    struct Leave {
      int& d;
      ~Leave() { d--; }
    } leave{depth_};
    auto body = std::make_unique<Template::Node>();
    body->kind = Template::Node::Kind::kBody;
    while (i_ < s_.size()) {
      const Segment& s = s_[i_];
      if (s.kind == Segment::Kind::kText) {
        auto n = std::make_unique<Template::Node>();
        n->kind = Template::Node::Kind::kText;
        n->text = s.body;
        body->children.push_back(std::move(n));
        i_++;
        continue;
      }
      if (s.kind == Segment::Kind::kOutput) {
        VERITY_ASSIGN_OR_RETURN(std::vector<Token> t, Tokens(s.body, s.line));
        ExprParser p(std::move(t), s.line);
        auto n = std::make_unique<Template::Node>();
        n->kind = Template::Node::Kind::kOutput;
        n->line = s.line;
        VERITY_ASSIGN_OR_RETURN(n->expr, p.Parse());
        if (!p.AtEnd()) return p.Error("unexpected text after the expression");
        body->children.push_back(std::move(n));
        i_++;
        continue;
      }
      const std::string kw = Keyword(s);
      if (until.count(kw)) return body;
      VERITY_ASSIGN_OR_RETURN(NodePtr n, Statement(kw));
      body->children.push_back(std::move(n));
    }
    if (!until.empty())
      return SyntaxError(s_.empty() ? 1 : s_.back().line, "the template ends inside an unclosed block");
    return body;
  }

  // The tokens of the current block tag after its keyword.
  Result<ExprParser> TagTokens() {
    const Segment& s = s_[i_];
    VERITY_ASSIGN_OR_RETURN(std::vector<Token> t, Tokens(s.body, s.line));
    ExprParser p(std::move(t), s.line);
    p.Take();  // the keyword
    return p;
  }

  Result<NodePtr> Statement(const std::string& kw) {
    if (kw == "if") return If();
    if (kw == "for") return For();
    if (kw == "set") return Set();
    static const std::set<std::string> closers = {"endif", "elif", "else", "endfor", "endset"};
    if (closers.count(kw)) return SyntaxError(s_[i_].line, "'" + kw + "' without its opening tag");
    return SyntaxError(s_[i_].line, "the statement '" + kw + "' is not supported");
  }

  Result<NodePtr> If() {
    auto n = std::make_unique<Template::Node>();
    n->kind = Template::Node::Kind::kIf;
    n->line = s_[i_].line;
    for (;;) {
      const std::string kw = Keyword(s_[i_]);
      VERITY_ASSIGN_OR_RETURN(ExprParser p, TagTokens());
      if (kw == "else") {
        if (!p.AtEnd()) return p.Error("unexpected text after 'else'");
      } else {
        VERITY_ASSIGN_OR_RETURN(auto cond, p.Parse());
        if (!p.AtEnd()) return p.Error("unexpected text after the condition");
        n->conditions.push_back(std::move(cond));
      }
      i_++;
      VERITY_ASSIGN_OR_RETURN(NodePtr body, Body(kw == "else" ? std::set<std::string>{"endif"}
                                                              : std::set<std::string>{"elif", "else", "endif"}));
      n->bodies.push_back(std::move(body));
      if (i_ >= s_.size()) return SyntaxError(n->line, "an if without endif");
      if (Keyword(s_[i_]) == "endif") break;
    }
    VERITY_RETURN_IF_ERROR(EndTag("endif"));
    return n;
  }

  Result<NodePtr> For() {
    auto n = std::make_unique<Template::Node>();
    n->kind = Template::Node::Kind::kFor;
    n->line = s_[i_].line;
    VERITY_ASSIGN_OR_RETURN(ExprParser p, TagTokens());
    VERITY_ASSIGN_OR_RETURN(std::string first, p.Name("a loop variable"));
    n->targets.push_back(first);
    if (p.IsOp(",")) {
      p.Take();
      VERITY_ASSIGN_OR_RETURN(std::string second, p.Name("a second loop variable"));
      n->targets.push_back(second);
    }
    if (!p.IsName("in")) return p.Error("expected 'in'");
    p.Take();
    // The iterable stops before a trailing `if`, the loop's filter.
    VERITY_ASSIGN_OR_RETURN(n->expr, p.ParseOr());
    if (p.IsName("if")) {
      p.Take();
      VERITY_ASSIGN_OR_RETURN(auto filter, p.ParseOr());
      n->conditions.push_back(std::move(filter));
    }
    if (p.IsName("recursive")) return p.Error("recursive loops are not supported");
    if (!p.AtEnd()) return p.Error("unexpected text after the loop's iterable");
    i_++;
    VERITY_ASSIGN_OR_RETURN(NodePtr body, Body({"else", "endfor"}));
    n->bodies.push_back(std::move(body));
    if (i_ < s_.size() && Keyword(s_[i_]) == "else") {
      i_++;
      VERITY_ASSIGN_OR_RETURN(NodePtr other, Body({"endfor"}));
      n->bodies.push_back(std::move(other));
    }
    VERITY_RETURN_IF_ERROR(EndTag("endfor"));
    return n;
  }

  Result<NodePtr> Set() {
    auto n = std::make_unique<Template::Node>();
    n->kind = Template::Node::Kind::kSet;
    n->line = s_[i_].line;
    VERITY_ASSIGN_OR_RETURN(ExprParser p, TagTokens());
    VERITY_ASSIGN_OR_RETURN(std::string name, p.Name("a variable name"));
    n->targets.push_back(name);
    if (p.IsOp(".")) {
      p.Take();
      VERITY_ASSIGN_OR_RETURN(std::string attr, p.Name("an attribute name"));
      n->targets.push_back(attr);
    }
    if (p.AtEnd() && n->targets.size() == 1) {  // {% set x %}...{% endset %}: the body's text
      n->kind = Template::Node::Kind::kSetBlock;
      i_++;
      VERITY_ASSIGN_OR_RETURN(NodePtr body, Body({"endset"}));
      n->bodies.push_back(std::move(body));
      VERITY_RETURN_IF_ERROR(EndTag("endset"));
      return n;
    }
    if (!p.IsOp("=")) return p.Error("expected '='");
    p.Take();
    VERITY_ASSIGN_OR_RETURN(n->expr, p.Parse());
    if (!p.AtEnd()) return p.Error("unexpected text after the value");
    i_++;
    return n;
  }

  Status EndTag(const char* kw) {
    if (i_ >= s_.size() || Keyword(s_[i_]) != kw)
      return SyntaxError(i_ < s_.size() ? s_[i_].line : 0, std::string("expected ") + kw);
    VERITY_ASSIGN_OR_RETURN(ExprParser p, TagTokens());
    if (!p.AtEnd()) return p.Error(std::string("unexpected text after '") + kw + "'");
    i_++;
    return OkStatus();
  }

  static constexpr int kMaxDepth = 64;
  std::vector<Segment> s_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

const Value* Value::Find(const std::string& key) const {
  if (!dict) return nullptr;
  for (const auto& [k, v] : *dict)
    if (k == key) return &v;
  return nullptr;
}

Template::Template(std::unique_ptr<Node> root) : root_(std::move(root)) {}
Template::~Template() = default;

Result<std::unique_ptr<Template>> Template::Parse(const std::string& source) {
  VERITY_ASSIGN_OR_RETURN(std::vector<Segment> segments, Segments(source));
  BodyParser p(std::move(segments));
  VERITY_ASSIGN_OR_RETURN(std::unique_ptr<Node> root, p.ParseAll());
  return std::unique_ptr<Template>(new Template(std::move(root)));
}

}  // namespace verity::serve::jinja
