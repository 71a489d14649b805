// Renders a parsed template (serve/jinja_ast.h) with Python's semantics as
// Jinja2 has them: truthiness, equality across int and float, str() of
// None/True/lists, negative indices and slices, undefined values that print
// as nothing, and a scope per loop iteration (what a set inside a loop
// leaves behind is gone after it; namespace() is how templates carry state).
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <unordered_set>

#include "base/utf8.h"
#include "serve/jinja_ast.h"

namespace verity::serve::jinja {
namespace {

using Kind = Value::Kind;

// A template is a program from a file: its loops, output and values are
// bounded, so a hostile or broken one is an error, not a hung or exhausted server.
constexpr long kMaxSteps = 5000000;
constexpr size_t kMaxOutput = 16u << 20;

Status RenderError(const Expr& e, const std::string& what) {
  return Status::Error("chat template line " + std::to_string(e.line) + ": " + what);
}

const char* TypeName(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "none";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "string";
    case Kind::kList: return "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "namespace";
    case Kind::kFunction: return "function";
  }
  return "value";
}

bool Truthy(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return v.b;
    case Kind::kInt: return v.i != 0;
    case Kind::kFloat: return v.f != 0.0;
    case Kind::kString: return !v.s.empty();
    case Kind::kList: return !v.list->empty();
    case Kind::kDict: return !v.dict->empty();
    case Kind::kNamespace:
    case Kind::kFunction: return true;
  }
  return false;
}

// A (key, value) tuple, as dict.items() yields.
Value Pair(const std::string& k, const Value& v) {
  Value p = Value::MakeList({Value::Str(k), v});
  p.tuple = true;
  return p;
}

bool IsNumber(const Value& v) { return v.kind == Kind::kInt || v.kind == Kind::kFloat || v.kind == Kind::kBool; }
double AsDouble(const Value& v) {
  return v.kind == Kind::kFloat ? v.f : v.kind == Kind::kBool ? v.b : static_cast<double>(v.i);
}
long long AsInt(const Value& v) { return v.kind == Kind::kBool ? v.b : v.i; }

std::string Repr(const Value& v);

// Python's repr of a float: the shortest digits that read back to it, in
// fixed notation for exponents from -4 to 15 (with ".0" when whole), else
// d.ddde+XX.
std::string FloatText(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  if (f == 0.0) return std::signbit(f) ? "-0.0" : "0.0";
  char buf[48];
  int prec = 1;
  for (; prec <= 17; prec++) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, f);
    if (std::strtod(buf, nullptr) == f) break;
  }
  const std::string e = buf;  // [-]d.ddde[+-]XX
  const bool neg = e[0] == '-';
  const size_t epos = e.find('e');
  std::string digits;
  for (size_t i = neg ? 1 : 0; i < epos; i++)
    if (e[i] != '.') digits += e[i];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int exp = std::atoi(e.c_str() + epos + 1);
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out += digits + std::string(static_cast<size_t>(exp + 1) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp + 1)) + "." + digits.substr(static_cast<size_t>(exp + 1));
    }
    return out;
  }
  out += digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
  char ex[8];
  std::snprintf(ex, sizeof ex, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return out + ex;
}

// str() of a value, as {{ }} prints it.
std::string Str(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return v.b ? "True" : "False";
    case Kind::kInt: return std::to_string(v.i);
    case Kind::kFloat: return FloatText(v.f);
    case Kind::kString: return v.s;
    case Kind::kFunction: return "<function " + v.s + ">";
    default: return Repr(v);
  }
}

std::string Repr(const Value& v) {
  if (v.kind == Kind::kString) {
    const char q = v.s.find('\'') != std::string::npos && v.s.find('"') == std::string::npos ? '"' : '\'';
    std::string out(1, q);
    for (char c : v.s) {
      if (c == '\\') out += "\\\\";
      else if (c == '\n') out += "\\n";
      else if (c == '\t') out += "\\t";
      else if (c == '\r') out += "\\r";
      else if (c == q) out += std::string("\\") + q;
      else out += c;
    }
    return out + q;
  }
  if (v.kind == Kind::kList) {
    std::string out = v.tuple ? "(" : "[";
    for (size_t i = 0; i < v.list->size(); i++) out += (i ? ", " : "") + Repr((*v.list)[i]);
    if (v.tuple && v.list->size() == 1) out += ",";
    return out + (v.tuple ? ")" : "]");
  }
  if (v.kind == Kind::kUndefined) return "Undefined";
  if (v.kind == Kind::kDict || v.kind == Kind::kNamespace) {
    std::string out = v.kind == Kind::kNamespace ? "<Namespace {" : "{";
    for (size_t i = 0; i < v.dict->size(); i++)
      out += (i ? ", " : "") + Repr(Value::Str((*v.dict)[i].first)) + ": " + Repr((*v.dict)[i].second);
    return out + (v.kind == Kind::kNamespace ? "}>" : "}");
  }
  return Str(v);
}

bool Equal(const Value& a, const Value& b) {
  if (IsNumber(a) && IsNumber(b)) return AsDouble(a) == AsDouble(b);
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return a.s == b.s;
    case Kind::kList:
      if (a.list->size() != b.list->size()) return false;
      for (size_t i = 0; i < a.list->size(); i++)
        if (!Equal((*a.list)[i], (*b.list)[i])) return false;
      return true;
    case Kind::kDict:
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, v] : *a.dict) {
        const Value* o = b.Find(k);
        if (o == nullptr || !Equal(v, *o)) return false;
      }
      return true;
    default: return a.dict == b.dict;
  }
}

// JSON text of a value (the tojson filter): Python's json.dumps with
// ensure_ascii off, as transformers' own tojson does; indent < 0 is none
// (", " and ": " between items), else each item on its own line.
std::string Json(const Value& v, int indent = -1, int level = 0) {
  switch (v.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return "null";
    case Kind::kBool: return v.b ? "true" : "false";
    case Kind::kInt: return std::to_string(v.i);
    case Kind::kFloat: return FloatText(v.f);
    case Kind::kString: {
      std::string out = "\"";
      for (unsigned char c : v.s) {
        if (c == '"') out += "\\\"";
        else if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else if (c == '\b') out += "\\b";
        else if (c == '\f') out += "\\f";
        else if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          out += b;
        } else out += static_cast<char>(c);
      }
      return out + "\"";
    }
    case Kind::kFunction:
    case Kind::kNamespace: return "";  // refused before (JsonError)
    default: {
      const bool list = v.kind == Kind::kList;
      const size_t n = list ? v.list->size() : v.dict->size();
      if (n == 0) return list ? "[]" : "{}";
      const std::string pad = indent < 0 ? "" : "\n" + std::string(static_cast<size_t>(indent) * (level + 1), ' ');
      std::string out = list ? "[" : "{";
      for (size_t i = 0; i < n; i++) {
        out += (i ? (indent < 0 ? ", " : ",") : "") + pad;
        if (list) out += Json((*v.list)[i], indent, level + 1);
        else out += Json(Value::Str((*v.dict)[i].first)) + ": " + Json((*v.dict)[i].second, indent, level + 1);
      }
      if (indent >= 0) out += "\n" + std::string(static_cast<size_t>(indent) * level, ' ');
      return out + (list ? "]" : "}");
    }
  }
}

// Python's str is a sequence of code points: lengths, indices, slices and
// iteration count those of the UTF-8 text, not its bytes.
std::vector<std::string> CodePoints(const std::string& s) { return utf8::SplitCodePoints(s); }

// Python's str.isspace() code points (what strip() and split() drop).
// What json.dumps refuses (a function, a namespace) anywhere in `v`, or "".
std::string JsonError(const Value& v) {
  if (v.kind == Kind::kFunction || v.kind == Kind::kNamespace) return std::string("a ") + TypeName(v) + " is not JSON";
  if (v.kind == Kind::kList)
    for (const Value& x : *v.list)
      if (std::string e = JsonError(x); !e.empty()) return e;
  if (v.kind == Kind::kDict)
    for (const auto& kv : *v.dict)
      if (std::string e = JsonError(kv.second); !e.empty()) return e;
  return "";
}

bool PySpace(const std::string& cp) {
  static const char* const kSpaces[] = {" ",      "\t",     "\n",     "\v",     "\f",     "\r",     "\x1c",   "\x1d",
                                        "\x1e",   "\x1f",   "\u0085", "\u00a0", "\u1680", "\u2000", "\u2001", "\u2002",
                                        "\u2003", "\u2004", "\u2005", "\u2006", "\u2007", "\u2008", "\u2009", "\u200a",
                                        "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"};
  for (const char* sp : kSpaces)
    if (cp == sp) return true;
  return false;
}
bool PySpace(char c) { return PySpace(std::string(1, c)); }

// strip()/lstrip()/rstrip(): whitespace, or the code points of `chars`.
std::string Strip(const std::string& s, bool left, bool right, const std::string* chars = nullptr) {
  const std::vector<std::string> cps = CodePoints(s);
  const std::vector<std::string> set = chars ? CodePoints(*chars) : std::vector<std::string>();
  auto strip = [&](const std::string& cp) {
    return chars ? std::find(set.begin(), set.end(), cp) != set.end() : PySpace(cp);
  };
  size_t a = 0, b = cps.size();
  if (left)
    while (a < b && strip(cps[a])) a++;
  if (right)
    while (b > a && strip(cps[b - 1])) b--;
  std::string out;
  for (size_t i = a; i < b; i++) out += cps[i];
  return out;
}

bool Ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}
std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string Capitalize(const std::string& s) {
  std::string out = Lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}
std::string Title(const std::string& s) {
  std::string out;
  bool prev_alpha = false;
  for (char c : s) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c));
    out += static_cast<char>(
        alpha ? (prev_alpha ? std::tolower(static_cast<unsigned char>(c)) : std::toupper(static_cast<unsigned char>(c)))
              : c);
    prev_alpha = alpha;
  }
  return out;
}
// Jinja2's title filter (not str.title()): words begin after runs of
// whitespace, '-', '(', '{', '[' or '<'; each is capitalized.
std::string TitleFilter(const std::string& s) {
  std::string out;
  bool start = true;
  for (char c : s) {
    const bool sep = PySpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) out += c;
    else
      out += static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c))
                                     : std::tolower(static_cast<unsigned char>(c)));
    start = sep;
  }
  return out;
}
// str.replace; nullopt when the result would pass `limit` bytes.
std::optional<std::string> Replace(const std::string& s, const std::string& from, const std::string& to, size_t limit) {
  std::string out;
  if (from.empty()) {  // Python: `to` before every code point and at the end
    for (const std::string& cp : CodePoints(s)) {
      out += to + cp;
      if (out.size() > limit) return std::nullopt;
    }
    return out + to;
  }
  size_t i = 0;
  for (size_t at; (at = s.find(from, i)) != std::string::npos; i = at + from.size()) {
    out += s.substr(i, at - i) + to;
    if (out.size() > limit) return std::nullopt;
  }
  return out + s.substr(i);
}

// Variables: one scope per template, if-body (shared), and loop iteration.
class Scope {
 public:
  explicit Scope(const Scope* parent) : parent_(parent) {}
  const Value* Lookup(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent_)
      for (const auto& [k, v] : s->vars_)
        if (k == name) return &v;
    return nullptr;
  }
  void Set(const std::string& name, Value v) {
    for (auto& [k, old] : vars_)
      if (k == name) {
        old = std::move(v);
        return;
      }
    vars_.emplace_back(name, std::move(v));
  }

 private:
  const Scope* parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

class Renderer {
 public:
  Status Run(const Template::Node& n, Scope& scope, std::string& out) {
    if (++steps_ > kMaxSteps)
      return Status::Error("chat template line " + std::to_string(n.line) + ": rendering took more than " +
                           std::to_string(kMaxSteps) + " steps");
    if (out.size() > kMaxOutput)
      return Status::Error("chat template line " + std::to_string(n.line) + ": the rendering grew past " +
                           std::to_string(kMaxOutput >> 20) + " MiB");
    switch (n.kind) {
      case Template::Node::Kind::kBody:
        for (const auto& c : n.children) VERITY_RETURN_IF_ERROR(Run(*c, scope, out));
        return OkStatus();
      case Template::Node::Kind::kText: out += n.text; return OkStatus();
      case Template::Node::Kind::kOutput: {
        VERITY_ASSIGN_OR_RETURN(Value v, Eval(*n.expr, scope));
        out += Str(v);
        return OkStatus();
      }
      case Template::Node::Kind::kIf:
        for (size_t i = 0; i < n.bodies.size(); i++) {
          bool take = i >= n.conditions.size();
          if (!take) {
            VERITY_ASSIGN_OR_RETURN(Value c, Eval(*n.conditions[i], scope));
            take = Truthy(c);
          }
          if (take) return Run(*n.bodies[i], scope, out);
        }
        return OkStatus();
      case Template::Node::Kind::kFor: return For(n, scope, out);
      case Template::Node::Kind::kSet: return Set(n, scope);
      case Template::Node::Kind::kSetBlock: {
        std::string text;
        VERITY_RETURN_IF_ERROR(Run(*n.bodies[0], scope, text));
        scope.Set(n.targets[0], Value::Str(std::move(text)));
        return OkStatus();
      }
    }
    return OkStatus();
  }

 private:
  Status For(const Template::Node& n, Scope& scope, std::string& out) {
    VERITY_ASSIGN_OR_RETURN(Value it, Eval(*n.expr, scope));
    List items;
    if (it.kind == Kind::kList) {
      items = *it.list;
    } else if (it.kind == Kind::kDict) {
      for (const auto& kv : *it.dict) items.push_back(Value::Str(kv.first));
    } else if (it.kind == Kind::kString) {
      for (std::string& c : CodePoints(it.s)) items.push_back(Value::Str(std::move(c)));
    } else if (it.kind != Kind::kUndefined) {
      return RenderError(*n.expr, std::string("cannot loop over a value of type ") + TypeName(it));
    }
    // A loop filter (`for x in xs if cond`) drops items before the loop, so loop.* counts the rest.
    if (!n.conditions.empty()) {
      List kept;
      for (const Value& item : items) {
        Scope probe(&scope);
        VERITY_RETURN_IF_ERROR(Bind(n, item, probe));
        VERITY_ASSIGN_OR_RETURN(Value keep, Eval(*n.conditions[0], probe));
        if (Truthy(keep)) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const long long len = static_cast<long long>(items.size());
    for (long long i = 0; i < len; i++) {
      Scope inner(&scope);
      VERITY_RETURN_IF_ERROR(Bind(n, items[i], inner));
      Value loop = Value::MakeDict({{"index", Value::Int(i + 1)},
                                    {"index0", Value::Int(i)},
                                    {"revindex", Value::Int(len - i)},
                                    {"revindex0", Value::Int(len - i - 1)},
                                    {"first", Value::Bool(i == 0)},
                                    {"last", Value::Bool(i == len - 1)},
                                    {"length", Value::Int(len)}});
      inner.Set("loop", loop);
      VERITY_RETURN_IF_ERROR(Run(*n.bodies[0], inner, out));
    }
    if (len == 0 && n.bodies.size() > 1) return Run(*n.bodies[1], scope, out);
    return OkStatus();
  }

  // The loop's variables for one item: the item, or its two halves.
  static Status Bind(const Template::Node& n, const Value& item, Scope& scope) {
    if (n.targets.size() == 1) {
      scope.Set(n.targets[0], item);
      return OkStatus();
    }
    if (item.kind != Kind::kList || item.list->size() != 2)
      return RenderError(*n.expr, "cannot unpack a loop item into 2 variables");
    scope.Set(n.targets[0], (*item.list)[0]);
    scope.Set(n.targets[1], (*item.list)[1]);
    return OkStatus();
  }

  // Whether `v` is or holds the namespace whose attributes are `target`. A
  // namespace is the only value a template can change, so storing it in
  // itself is the only way to make a cycle, which shared_ptr would never free
  // (the fuzzer found `{% set ns.n = ns %}` leaking). Jinja2 allows it (Python
  // collects cycles); no chat template needs it, so it is refused by name.
  static bool Reaches(const Value& v, const Dict* target) {
    std::vector<const Value*> todo = {&v};
    std::unordered_set<const void*> seen;
    while (!todo.empty()) {
      const Value* x = todo.back();
      todo.pop_back();
      if (x->dict) {
        if (x->dict.get() == target) return true;
        if (seen.insert(x->dict.get()).second)
          for (const auto& [k, e] : *x->dict) todo.push_back(&e);
      }
      if (x->list && seen.insert(x->list.get()).second)
        for (const Value& e : *x->list) todo.push_back(&e);
    }
    return false;
  }

  Status Set(const Template::Node& n, Scope& scope) {
    VERITY_ASSIGN_OR_RETURN(Value v, Eval(*n.expr, scope));
    if (n.targets.size() == 1) {
      scope.Set(n.targets[0], std::move(v));
      return OkStatus();
    }
    const Value* ns = scope.Lookup(n.targets[0]);
    if (ns == nullptr || ns->kind != Kind::kNamespace)
      return RenderError(*n.expr, "cannot assign " + n.targets[0] + "." + n.targets[1] + ": " + n.targets[0] +
                                      " is not a namespace()");
    if (Reaches(v, ns->dict.get()))
      return RenderError(*n.expr, "cannot assign " + n.targets[0] + "." + n.targets[1] + ": the value holds " +
                                      n.targets[0] + " itself (a cycle)");
    for (auto& [k, old] : *ns->dict)
      if (k == n.targets[1]) {
        old = std::move(v);
        return OkStatus();
      }
    ns->dict->emplace_back(n.targets[1], std::move(v));
    return OkStatus();
  }

  Result<Value> Eval(const Expr& e, Scope& scope) {
    if (++steps_ > kMaxSteps) return RenderError(e, "rendering took more than " + std::to_string(kMaxSteps) + " steps");
    switch (e.op) {
      case Expr::Op::kLiteral: return e.literal;
      case Expr::Op::kVar: {
        if (const Value* v = scope.Lookup(e.name)) return *v;
        // transformers' globals are defined (`strftime_now is defined` is how templates ask for the date).
        static const char* globals[] = {"raise_exception", "namespace", "range", "strftime_now"};
        for (const char* g : globals)
          if (e.name == g) {
            Value f;
            f.kind = Kind::kFunction;
            f.s = g;
            return f;
          }
        return Value();
      }
      case Expr::Op::kAttr: {
        VERITY_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], scope));
        return Member(e, obj, Value::Str(e.name));
      }
      case Expr::Op::kIndex: {
        VERITY_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], scope));
        VERITY_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1], scope));
        return Member(e, obj, key);
      }
      case Expr::Op::kSlice: return Slice(e, scope);
      case Expr::Op::kCall: return Call(e, scope);
      case Expr::Op::kFilter: return Filter(e, scope);
      case Expr::Op::kTest: {
        VERITY_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], scope));
        return Value::Bool(Test(e.name, v) != e.negated);
      }
      case Expr::Op::kNot: {
        VERITY_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], scope));
        return Value::Bool(!Truthy(v));
      }
      case Expr::Op::kNeg: {
        VERITY_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], scope));
        const bool neg = e.name == "-";
        if (v.kind == Kind::kInt || v.kind == Kind::kBool) {
          if (neg && AsInt(v) == LLONG_MIN) return RenderError(e, "integer overflow");
          return Value::Int(neg ? -AsInt(v) : AsInt(v));
        }
        if (v.kind == Kind::kFloat) return Value::Float(neg ? -v.f : v.f);
        return RenderError(e, "bad operand type for unary " + e.name + ": " + TypeName(v));
      }
      case Expr::Op::kAnd:
      case Expr::Op::kOr: {  // Python's: the deciding operand itself
        VERITY_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], scope));
        if (Truthy(a) == (e.op == Expr::Op::kOr)) return a;
        return Eval(*e.args[1], scope);
      }
      case Expr::Op::kCond: {
        VERITY_ASSIGN_OR_RETURN(Value c, Eval(*e.args[1], scope));
        if (Truthy(c)) return Eval(*e.args[0], scope);
        if (!e.args[2]) return Value();
        return Eval(*e.args[2], scope);
      }
      case Expr::Op::kList: {
        List items;
        for (const auto& a : e.args) {
          VERITY_ASSIGN_OR_RETURN(Value v, Eval(*a, scope));
          items.push_back(std::move(v));
        }
        return Value::MakeList(std::move(items));
      }
      case Expr::Op::kDict: {
        Dict d;
        for (size_t i = 0; i < e.args.size(); i++) {
          VERITY_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i], scope));
          d.emplace_back(e.keys[i], std::move(v));
        }
        return Value::MakeDict(std::move(d));
      }
      case Expr::Op::kBinary: return Binary(e, scope);
    }
    return RenderError(e, "unknown expression");
  }

  // obj.name and obj[key]: Jinja2 tries both an attribute and an item; a
  // missing one is undefined, not an error.
  Result<Value> Member(const Expr& e, const Value& obj, const Value& key) {
    if (obj.kind == Kind::kDict || obj.kind == Kind::kNamespace) {
      if (key.kind != Kind::kString) return Value();
      const Value* v = obj.Find(key.s);
      return v ? *v : Value();
    }
    if (obj.kind == Kind::kList || obj.kind == Kind::kString) {
      if (key.kind != Kind::kInt) return Value();  // e.g. a method name used without a call
      const std::vector<std::string> cps = obj.kind == Kind::kString ? CodePoints(obj.s) : std::vector<std::string>();
      const long long n =
          obj.kind == Kind::kList ? static_cast<long long>(obj.list->size()) : static_cast<long long>(cps.size());
      const long long i = key.i < 0 ? key.i + n : key.i;
      if (i < 0 || i >= n) return Value();
      return obj.kind == Kind::kList ? (*obj.list)[i] : Value::Str(cps[i]);
    }
    if (obj.kind == Kind::kUndefined) return RenderError(e, "'" + Str(key) + "' of an undefined value");
    return Value();
  }

  Result<Value> Slice(const Expr& e, Scope& scope) {
    VERITY_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0], scope));
    long long part[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; k++) {
      if (!e.args[k + 1]) continue;
      VERITY_ASSIGN_OR_RETURN(Value v, Eval(*e.args[k + 1], scope));
      if (v.kind == Kind::kNone) continue;
      if (v.kind != Kind::kInt) return RenderError(e, "a slice bound must be an integer");
      part[k] = v.i, given[k] = true;
    }
    if (part[2] == 0) return RenderError(e, "a slice step cannot be zero");
    if (obj.kind != Kind::kList && obj.kind != Kind::kString)
      return RenderError(e, std::string("cannot slice a value of type ") + TypeName(obj));
    const std::vector<std::string> cps = obj.kind == Kind::kString ? CodePoints(obj.s) : std::vector<std::string>();
    const long long n =
        obj.kind == Kind::kList ? static_cast<long long>(obj.list->size()) : static_cast<long long>(cps.size());
    const long long step = part[2];
    // Python's slice.indices.
    auto clamp = [&](long long v, bool is_given, long long dflt) {
      if (!is_given) return dflt;
      if (v < 0) v += n;
      if (step > 0) return std::clamp(v, 0LL, n);
      return std::clamp(v, -1LL, n - 1);
    };
    const long long start = clamp(part[0], given[0], step > 0 ? 0 : n - 1);
    const long long stop = clamp(part[1], given[1], step > 0 ? n : -1);
    List items;
    std::string chars;
    for (long long i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (obj.kind == Kind::kList) items.push_back((*obj.list)[i]);
      else chars += cps[i];
    }
    return obj.kind == Kind::kList ? Value::MakeList(std::move(items)) : Value::Str(chars);
  }

  Result<std::vector<Value>> Args(const Expr& e, Scope& scope, size_t from) {
    std::vector<Value> v;
    for (size_t i = from; i < e.args.size(); i++) {
      VERITY_ASSIGN_OR_RETURN(Value a, Eval(*e.args[i], scope));
      v.push_back(std::move(a));
    }
    return v;
  }

  Result<Value> Call(const Expr& e, Scope& scope) {
    const Expr& callee = *e.args[0];
    VERITY_ASSIGN_OR_RETURN(std::vector<Value> args, Args(e, scope, 1));
    const size_t positional = static_cast<size_t>(e.positional);
    if (callee.op == Expr::Op::kVar) {
      if (callee.name == "raise_exception")
        return RenderError(e,
                           "the template refused the conversation: " + (args.empty() ? std::string() : Str(args[0])));
      if (callee.name == "namespace") {
        Value ns = Value::MakeDict();
        ns.kind = Kind::kNamespace;
        for (size_t i = positional; i < args.size(); i++) ns.dict->emplace_back(e.keys[i - positional], args[i]);
        return ns;
      }
      if (callee.name == "strftime_now") {  // transformers': the server's local date and time
        if (args.size() != 1 || args[0].kind != Kind::kString)
          return RenderError(e, "strftime_now() takes one format string");
        const std::time_t now = std::time(nullptr);
        std::tm tm{};
        localtime_r(&now, &tm);
        char buf[256];
        const size_t len = std::strftime(buf, sizeof buf, args[0].s.c_str(), &tm);
        return Value::Str(std::string(buf, len));
      }
      // range(stop) or range(start, stop[, step])
      if (args.empty() || args.size() > 3 || positional != args.size())
        return RenderError(e, "range() takes 1 to 3 integers");
      long long r[3] = {0, 0, 1};
      for (size_t i = 0; i < args.size(); i++) {
        if (args[i].kind != Kind::kInt) return RenderError(e, "range() takes integers");
        r[args.size() == 1 ? 1 : i] = args[i].i;
      }
      if (r[2] == 0) return RenderError(e, "range() arg 3 must not be zero");
      // The sandbox's MAX_RANGE: at most 100000 items.
      const long double count = std::ceil((static_cast<long double>(r[1]) - r[0]) / r[2]);
      if (count > 100000) return RenderError(e, "range too big, the sandbox allows 100000 items");
      List items;
      for (long long i = r[0]; r[2] > 0 ? i < r[1] : i > r[1]; i += r[2]) items.push_back(Value::Int(i));
      return Value::MakeList(std::move(items));
    }
    VERITY_ASSIGN_OR_RETURN(Value self, Eval(*callee.args[0], scope));
    if (positional != args.size()) return RenderError(e, "." + callee.name + "() takes no keyword arguments");
    return Method(e, callee.name, self, args);
  }

  Result<Value> Method(const Expr& e, const std::string& m, const Value& self, const std::vector<Value>& args) {
    auto str_arg = [&](size_t i) -> const std::string* {
      return i < args.size() && args[i].kind == Kind::kString ? &args[i].s : nullptr;
    };
    if (self.kind == Kind::kString) {
      const std::string& s = self.s;
      if (m == "strip" || m == "lstrip" || m == "rstrip") {
        if (!args.empty() && !str_arg(0)) return RenderError(e, "." + m + "() takes a string");
        return Value::Str(Strip(s, m != "rstrip", m != "lstrip", str_arg(0)));
      }
      if (m == "upper" || m == "lower" || m == "title" || m == "capitalize") {
        if (!Ascii(s))
          return RenderError(e, "." + m + "() of text beyond ASCII is not implemented (Python's Unicode case tables)");
        return Value::Str(m == "upper" ? Upper(s) : m == "lower" ? Lower(s) : m == "title" ? Title(s) : Capitalize(s));
      }
      if (m == "startswith" || m == "endswith") {
        const std::string* p = str_arg(0);
        if (p == nullptr || args.size() != 1) return RenderError(e, "." + m + "() takes one string");
        const bool starts = s.compare(0, p->size(), *p) == 0;
        const bool ends = s.size() >= p->size() && s.compare(s.size() - p->size(), p->size(), *p) == 0;
        return Value::Bool(m == "startswith" ? starts : ends);
      }
      if (m == "replace") {
        if (!str_arg(0) || !str_arg(1) || args.size() != 2) return RenderError(e, ".replace() takes two strings");
        auto r = Replace(s, *str_arg(0), *str_arg(1), kMaxOutput);
        if (!r) return RenderError(e, "a value grew past " + std::to_string(kMaxOutput >> 20) + " MiB");
        return Value::Str(std::move(*r));
      }
      if (m == "split") {
        List parts;
        if (args.empty()) {  // on runs of whitespace, none empty
          std::string cur;
          for (const std::string& c : CodePoints(s)) {
            if (PySpace(c)) {
              if (!cur.empty()) parts.push_back(Value::Str(cur));
              cur.clear();
            } else {
              cur += c;
            }
          }
          if (!cur.empty()) parts.push_back(Value::Str(cur));
        } else {
          const std::string* sep = str_arg(0);
          const bool limited = args.size() == 2 && args[1].kind == Kind::kInt;
          if (sep == nullptr || sep->empty() || args.size() > 2 || (args.size() == 2 && !limited))
            return RenderError(e, ".split() takes a non-empty separator and a maximum count");
          long long left = limited && args[1].i >= 0 ? args[1].i : -1;  // Python: -1 is no limit
          size_t i = 0;
          for (size_t at; left != 0 && (at = s.find(*sep, i)) != std::string::npos; i = at + sep->size(), left--)
            parts.push_back(Value::Str(s.substr(i, at - i)));
          parts.push_back(Value::Str(s.substr(i)));
        }
        return Value::MakeList(std::move(parts));
      }
    }
    if (self.kind == Kind::kDict) {
      if (m == "get") {
        if (!str_arg(0) || args.size() > 2) return RenderError(e, ".get() takes a key and a default");
        const Value* v = self.Find(*str_arg(0));
        return v ? *v : args.size() == 2 ? args[1] : Value::None();
      }
      List out;
      for (const auto& [k, v] : *self.dict) {
        if (m == "keys") out.push_back(Value::Str(k));
        else if (m == "values") out.push_back(v);
        else if (m == "items") out.push_back(Pair(k, v));
        else return RenderError(e, "a dict has no method ." + m + "()");
      }
      return Value::MakeList(std::move(out));
    }
    return RenderError(e, std::string("a value of type ") + TypeName(self) + " has no method ." + m + "()");
  }

  // A filter call (`x | f(args)`), dispatched by name to its family.
  Result<Value> Filter(const Expr& e, Scope& scope) {
    VERITY_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0], scope));
    VERITY_ASSIGN_OR_RETURN(std::vector<Value> args, Args(e, scope, 1));
    const std::string& f = e.name;
    auto is = [&f](std::initializer_list<const char*> names) {
      for (const char* n : names)
        if (f == n) return true;
      return false;
    };
    if (is({"string", "tojson", "default", "d"})) return ValueFilter(e, f, v, args);
    if (is({"trim", "upper", "lower", "capitalize", "title", "replace"})) return TextFilter(e, f, v, args);
    if (is({"length", "count", "first", "last", "join"})) return SequenceFilter(e, f, v, args);
    if (is({"list", "reverse", "items", "map"})) return CollectionFilter(e, f, v, args);
    if (is({"select", "reject", "selectattr", "rejectattr"})) return Select(e, v, args);
    if (is({"int", "float"})) return NumberFilter(f, v);
    return RenderError(e, "the filter " + f + " is not supported");
  }

  // string, tojson, default.
  Result<Value> ValueFilter(const Expr& e, const std::string& f, const Value& v, const std::vector<Value>& args) {
    if (f == "string") return Value::Str(Str(v));
    if (f == "tojson") {
      if (std::string bad = JsonError(v); !bad.empty()) return RenderError(e, "tojson: " + bad);
      if (args.empty() || args[0].kind == Kind::kNone) return Value::Str(Json(v));
      if (args[0].kind != Kind::kInt || args[0].i < 0 || args[0].i > 16)
        return RenderError(e, "tojson's indent must be an integer from 0 to 16");
      return Value::Str(Json(v, static_cast<int>(args[0].i)));
    }
    if (f == "default" || f == "d") {
      const bool boolean = args.size() > 1 && Truthy(args[1]);
      const bool use = v.kind == Kind::kUndefined || (boolean && !Truthy(v));
      return use ? (args.empty() ? Value::Str("") : args[0]) : v;
    }
    return RenderError(e, "the filter " + f + " is not supported");
  }

  // trim, upper, lower, capitalize, title, replace.
  Result<Value> TextFilter(const Expr& e, const std::string& f, const Value& v, const std::vector<Value>& args) {
    if (f == "trim" || f == "upper" || f == "lower" || f == "capitalize" || f == "title") {
      const std::string text = Str(v);  // Jinja2's soft_str: none|trim is "None"
      if (f == "trim") return Value::Str(Strip(text, true, true));
      if (!Ascii(text))
        return RenderError(
            e, "the filter " + f + " of text beyond ASCII is not implemented (Python's Unicode case tables)");
      if (f == "upper") return Value::Str(Upper(text));
      if (f == "lower") return Value::Str(Lower(text));
      if (f == "capitalize") return Value::Str(Capitalize(text));
      return Value::Str(TitleFilter(text));
    }
    if (f == "replace") {
      if (v.kind != Kind::kString) return RenderError(e, "the filter " + f + " takes a string, not " + TypeName(v));
      if (args.size() != 2 || args[0].kind != Kind::kString || args[1].kind != Kind::kString)
        return RenderError(e, "the filter replace takes two strings");
      auto r = Replace(v.s, args[0].s, args[1].s, kMaxOutput);
      if (!r) return RenderError(e, "a value grew past " + std::to_string(kMaxOutput >> 20) + " MiB");
      return Value::Str(std::move(*r));
    }
    return RenderError(e, "the filter " + f + " is not supported");
  }

  // length, first, last, join.
  Result<Value> SequenceFilter(const Expr& e, const std::string& f, const Value& v, const std::vector<Value>& args) {
    if (f == "length" || f == "count") {
      if (v.kind == Kind::kUndefined) return Value::Int(0);
      if (v.kind == Kind::kString) return Value::Int(static_cast<long long>(CodePoints(v.s).size()));
      if (v.kind == Kind::kList) return Value::Int(static_cast<long long>(v.list->size()));
      if (v.kind == Kind::kDict) return Value::Int(static_cast<long long>(v.dict->size()));
      return RenderError(e, std::string("the filter length takes a string, list or dict, not ") + TypeName(v));
    }
    if (f == "first" || f == "last") {
      if (v.kind == Kind::kList) return v.list->empty() ? Value() : f == "first" ? v.list->front() : v.list->back();
      if (v.kind == Kind::kString) {
        const std::vector<std::string> cps = CodePoints(v.s);
        return cps.empty() ? Value() : Value::Str(f == "first" ? cps.front() : cps.back());
      }
      return RenderError(e, "the filter " + f + " takes a list or string");
    }
    if (f == "join") {
      if (v.kind == Kind::kUndefined) return Value::Str("");
      if (v.kind != Kind::kList) return RenderError(e, "the filter join takes a list");
      const std::string sep = args.empty() ? "" : Str(args[0]);
      std::string out;
      for (size_t i = 0; i < v.list->size(); i++) {
        out += (i ? sep : "") + Str((*v.list)[i]);
        if (out.size() > kMaxOutput)
          return RenderError(e, "a value grew past " + std::to_string(kMaxOutput >> 20) + " MiB");
      }
      return Value::Str(out);
    }
    return RenderError(e, "the filter " + f + " is not supported");
  }

  // list, reverse, items, map.
  Result<Value> CollectionFilter(const Expr& e, const std::string& f, const Value& v, const std::vector<Value>& args) {
    if (f == "list") {
      if (v.kind == Kind::kList) return Value::MakeList(*v.list);
      if (v.kind == Kind::kUndefined) return Value::MakeList();
      if (v.kind == Kind::kDict) {
        List keys;
        for (const auto& kv : *v.dict) keys.push_back(Value::Str(kv.first));
        return Value::MakeList(std::move(keys));
      }
      if (v.kind == Kind::kString) {
        List items;
        for (std::string& c : CodePoints(v.s)) items.push_back(Value::Str(std::move(c)));
        return Value::MakeList(std::move(items));
      }
      return RenderError(e, "the filter list takes a list or string");
    }
    if (f == "reverse") {
      if (v.kind == Kind::kString) {
        std::vector<std::string> cps = CodePoints(v.s);
        std::string out;
        for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
        return Value::Str(out);
      }
      if (v.kind != Kind::kList) return RenderError(e, "the filter reverse takes a list or string");
      List items(v.list->rbegin(), v.list->rend());
      return Value::MakeList(std::move(items));
    }
    if (f == "items") {
      if (v.kind != Kind::kDict) return RenderError(e, "the filter items takes a dict");
      List out;
      for (const auto& [k, x] : *v.dict) out.push_back(Pair(k, x));
      return Value::MakeList(std::move(out));
    }
    if (f == "map") {  // map(attribute=name)
      VERITY_ASSIGN_OR_RETURN(const List items, Items(e, v));
      List out;
      for (const Value& x : items) {
        VERITY_ASSIGN_OR_RETURN(Value a, AttributePath(e, x, args[0]));
        out.push_back(std::move(a));
      }
      return Value::MakeList(std::move(out));
    }
    return RenderError(e, "the filter " + f + " is not supported");
  }

  // int and float (`f` is one of them), as Jinja2 converts: a failed conversion is 0.
  Result<Value> NumberFilter(const std::string& f, const Value& v) {
    if (f == "int") {  // int(value), else int(float(value)), else 0
      if (v.kind == Kind::kFloat)
        return std::isfinite(v.f) && std::fabs(v.f) < 9e18 ? Value::Int(static_cast<long long>(v.f)) : Value::Int(0);
      if (IsNumber(v)) return Value::Int(AsInt(v));
      if (v.kind == Kind::kString) {
        const std::string t = Strip(v.s, true, true);
        char* end = nullptr;
        errno = 0;
        const long long x = std::strtoll(t.c_str(), &end, 10);
        if (!t.empty() && *end == '\0' && errno == 0) return Value::Int(x);
        const double d = std::strtod(t.c_str(), &end);
        if (!t.empty() && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9e18)
          return Value::Int(static_cast<long long>(d));
      }
      return Value::Int(0);
    }
    // float(value), else 0.0
    if (IsNumber(v)) return Value::Float(AsDouble(v));
    if (v.kind == Kind::kString) {
      const std::string t = Strip(v.s, true, true);
      char* end = nullptr;
      const double d = std::strtod(t.c_str(), &end);
      if (!t.empty() && *end == '\0') return Value::Float(d);
    }
    return Value::Float(0.0);
  }

  // Jinja2's attribute getter: "a.b.0" follows each part, a number an index.
  Result<Value> AttributePath(const Expr& e, const Value& item, const Value& path) {
    if (path.kind != Kind::kString) return RenderError(e, "the filter " + e.name + " takes an attribute name");
    Value x = item;
    size_t i = 0;
    for (;;) {
      const size_t dot = path.s.find('.', i);
      const std::string part = path.s.substr(i, dot == std::string::npos ? std::string::npos : dot - i);
      const bool index = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      });
      if (x.kind == Kind::kUndefined) return Value();
      VERITY_ASSIGN_OR_RETURN(
          x, Member(e, x, index && part.size() < 18 ? Value::Int(std::atoll(part.c_str())) : Value::Str(part)));
      if (dot == std::string::npos) return x;
      i = dot + 1;
    }
  }

  // What Jinja2's select and map iterate: nothing for a falsy value (None,
  // undefined, empty), a list's items, a dict's keys, a string's characters.
  static Result<List> Items(const Expr& e, const Value& v) {
    if (!Truthy(v)) return List();
    if (v.kind == Kind::kList) return *v.list;
    List items;
    if (v.kind == Kind::kDict) {
      for (const auto& kv : *v.dict) items.push_back(Value::Str(kv.first));
    } else if (v.kind == Kind::kString) {
      for (std::string& c : CodePoints(v.s)) items.push_back(Value::Str(std::move(c)));
    } else {
      return RenderError(e, "the filter " + e.name + " cannot iterate a value of type " + TypeName(v));
    }
    return items;
  }

  // select/reject(test[, arg]) and selectattr/rejectattr(attr[, test[, arg]]):
  // the items (or their attribute) that pass the test (no test: truthiness).
  Result<Value> Select(const Expr& e, const Value& v, const std::vector<Value>& args) {
    const bool by_attr = e.name.find("attr") != std::string::npos, keep = e.name[0] == 's';
    VERITY_ASSIGN_OR_RETURN(const List items, Items(e, v));
    const size_t t = by_attr ? 1 : 0;
    if (by_attr && (args.empty() || args[0].kind != Kind::kString))
      return RenderError(e, "the filter " + e.name + " takes an attribute name");
    if (args.size() > t) {
      if (args[t].kind != Kind::kString) return RenderError(e, "the filter " + e.name + " takes a test's name");
      const std::string& test = args[t].s;
      const bool compares = test == "equalto" || test == "eq" || test == "==" || test == "ne" || test == "!=";
      if (compares && args.size() <= t + 1)  // the fuzzer's heap overflow: args[t + 1] read past the end
        return RenderError(e, "the test " + test + " in " + e.name + " needs a value to compare with");
    }
    List out;
    for (const Value& item : items) {
      Value x = item;
      if (by_attr) {
        VERITY_ASSIGN_OR_RETURN(x, AttributePath(e, item, args[0]));
      }
      bool pass = Truthy(x);
      if (args.size() > t) {
        const std::string& test = args[t].s;
        if (test == "equalto" || test == "eq" || test == "==") pass = Equal(x, args[t + 1]);
        else if (test == "ne" || test == "!=") pass = !Equal(x, args[t + 1]);
        else pass = Test(test, x);
      }
      if (pass == keep) out.push_back(item);
    }
    return Value::MakeList(std::move(out));
  }

  long steps_ = 0;

  static bool Test(const std::string& t, const Value& v) {
    if (t == "defined") return v.kind != Kind::kUndefined;
    if (t == "undefined") return v.kind == Kind::kUndefined;
    if (t == "none") return v.kind == Kind::kNone;
    if (t == "string") return v.kind == Kind::kString;
    if (t == "number") return IsNumber(v);  // Python's bool is a Number
    if (t == "integer") return v.kind == Kind::kInt;
    if (t == "float") return v.kind == Kind::kFloat;
    if (t == "boolean") return v.kind == Kind::kBool;
    if (t == "mapping") return v.kind == Kind::kDict;
    if (t == "iterable") return v.kind == Kind::kList || v.kind == Kind::kDict || v.kind == Kind::kString;
    if (t == "sequence") return v.kind == Kind::kList || v.kind == Kind::kDict || v.kind == Kind::kString;
    if (t == "true") return v.kind == Kind::kBool && v.b;
    if (t == "false") return v.kind == Kind::kBool && !v.b;
    if (t == "even" || t == "odd") {  // value % 2 == 1, for any number
      if (!IsNumber(v)) return false;
      const bool odd = v.kind == Kind::kFloat ? std::fmod(std::fabs(v.f), 2.0) == 1.0 : AsInt(v) % 2 != 0;
      return t == "odd" ? odd : !odd;
    }
    return false;
  }

  Result<Value> Binary(const Expr& e, Scope& scope) {
    VERITY_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0], scope));
    VERITY_ASSIGN_OR_RETURN(Value b, Eval(*e.args[1], scope));
    const std::string& op = e.name;
    if (op == "~" || op == "+") {  // values grow by doubling too: bounded as the output is
      const size_t sa = a.kind == Kind::kList ? a.list->size() : Str(a).size();
      const size_t sb = b.kind == Kind::kList ? b.list->size() : Str(b).size();
      if (sa + sb > kMaxOutput) return RenderError(e, "a value grew past " + std::to_string(kMaxOutput >> 20) + " MiB");
    }
    if (op == "~") return Value::Str(Str(a) + Str(b));
    if (op == "==") return Value::Bool(Equal(a, b));
    if (op == "!=") return Value::Bool(!Equal(a, b));
    if (op == "in") {
      bool found = false;
      if (b.kind == Kind::kString && a.kind == Kind::kString) found = b.s.find(a.s) != std::string::npos;
      else if (b.kind == Kind::kList)
        found = std::any_of(b.list->begin(), b.list->end(), [&](const Value& x) { return Equal(a, x); });
      else if (b.kind == Kind::kDict) found = a.kind == Kind::kString && b.Find(a.s) != nullptr;
      else if (b.kind == Kind::kUndefined) found = false;
      else return RenderError(e, std::string("'in' needs a string, list or dict on its right, not ") + TypeName(b));
      return Value::Bool(found != e.negated);
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c = 0;
      if (IsNumber(a) && IsNumber(b)) c = AsDouble(a) < AsDouble(b) ? -1 : AsDouble(a) > AsDouble(b) ? 1 : 0;
      else if (a.kind == Kind::kString && b.kind == Kind::kString) c = a.s.compare(b.s) < 0 ? -1 : a.s == b.s ? 0 : 1;
      else return RenderError(e, std::string("cannot compare ") + TypeName(a) + " with " + TypeName(b));
      return Value::Bool(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
    }
    if (op == "+" && a.kind == Kind::kString && b.kind == Kind::kString) return Value::Str(a.s + b.s);
    if (op == "+" && a.kind == Kind::kList && b.kind == Kind::kList) {
      List items = *a.list;
      items.insert(items.end(), b.list->begin(), b.list->end());
      return Value::MakeList(std::move(items));
    }
    if (op == "*" && ((a.kind == Kind::kString && (b.kind == Kind::kInt || b.kind == Kind::kBool)) ||
                      (b.kind == Kind::kString && (a.kind == Kind::kInt || a.kind == Kind::kBool)))) {
      const std::string& text = a.kind == Kind::kString ? a.s : b.s;
      const long long n = std::max(0LL, a.kind == Kind::kString ? AsInt(b) : AsInt(a));
      if (n > 0 && text.size() > kMaxOutput / static_cast<size_t>(std::min<long long>(n, kMaxOutput)))
        return RenderError(e, "a value grew past " + std::to_string(kMaxOutput >> 20) + " MiB");
      std::string out;
      for (long long i = 0; i < n; i++) out += text;
      return Value::Str(out);
    }
    if (!IsNumber(a) || !IsNumber(b))
      return RenderError(e, std::string("cannot apply '") + op + "' to " + TypeName(a) + " and " + TypeName(b));
    const bool ints = a.kind != Kind::kFloat && b.kind != Kind::kFloat;
    if (op == "/") {
      if (AsDouble(b) == 0.0) return RenderError(e, "division by zero");
      return Value::Float(AsDouble(a) / AsDouble(b));
    }
    if (ints) {
      const long long x = AsInt(a), y = AsInt(b);
      long long r = 0;
      if ((op == "+" && __builtin_add_overflow(x, y, &r)) || (op == "-" && __builtin_sub_overflow(x, y, &r)) ||
          (op == "*" && __builtin_mul_overflow(x, y, &r)))
        return RenderError(e, "integer overflow (verity's integers are 64-bit)");
      if (op == "+" || op == "-" || op == "*") return Value::Int(r);
      if (y == 0) return RenderError(e, "division by zero");
      if (x == LLONG_MIN && y == -1) return RenderError(e, "integer overflow (verity's integers are 64-bit)");
      // Python floors: the remainder takes the divisor's sign.
      long long q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) q--, m += y;
      return Value::Int(op == "//" ? q : m);
    }
    const double x = AsDouble(a), y = AsDouble(b);
    if (op == "+") return Value::Float(x + y);
    if (op == "-") return Value::Float(x - y);
    if (op == "*") return Value::Float(x * y);
    if (y == 0.0) return RenderError(e, "division by zero");
    if (op == "//") return Value::Float(std::floor(x / y));
    const double r = std::fmod(x, y);
    return Value::Float(r != 0.0 && ((r < 0) != (y < 0)) ? r + y : r);
  }
};

}  // namespace

Result<std::string> Template::Render(const std::map<std::string, Value>& vars) const {
  Scope scope(nullptr);
  for (const auto& [k, v] : vars) scope.Set(k, v);
  std::string out;
  Renderer r;
  VERITY_RETURN_IF_ERROR(r.Run(*root_, scope, out));
  return out;
}

}  // namespace verity::serve::jinja
