// The Jinja that chat templates are written in (tokenizer_config.json's
// chat_template), rendered the way Hugging Face's apply_chat_template renders
// it (Jinja2 with trim_blocks and lstrip_blocks, no autoescape), or refused.
//
// The subset is what chat templates use: text, {{ expressions }}, {# comments #},
// whitespace control (-, +), if/elif/else, for (loop.index, index0, revindex,
// revindex0, first, last, length; a for's else), set (also ns.attr =
// through namespace(), and {% set x %}...{% endset %}), the operators and
// precedence of Jinja2, literals, lists and dicts, subscripts and slices, a
// fixed set of filters (select/reject/selectattr/rejectattr and
// map(attribute=) among them), tests and string/dict methods, and
// transformers' globals raise_exception() and strftime_now(). Everything
// else (macros, includes, loop controls, an unknown filter, test, method or
// loop attribute) is a
// parse error naming it and its line, so a template that parses uses nothing
// this file does not implement: the server refuses it at startup rather than
// rendering a guess.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace verity::serve::jinja {

// A value a template sees: Python's types as Jinja has them.
struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order, as Python's dict

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kFunction };
  Kind kind = Kind::kUndefined;
  bool b = false;
  long long i = 0;
  double f = 0.0;
  std::string s;               // kString; kFunction: the global function's name
  std::shared_ptr<List> list;  // kList
  bool tuple = false;          // kList: a Python tuple (dict.items()' pairs), which prints in ( )
  std::shared_ptr<Dict> dict;  // kDict and kNamespace (a namespace's attributes are assignable)

  static Value None() { return Of(Kind::kNone); }
  static Value Bool(bool v) {
    Value x = Of(Kind::kBool);
    x.b = v;
    return x;
  }
  static Value Int(long long v) {
    Value x = Of(Kind::kInt);
    x.i = v;
    return x;
  }
  static Value Float(double v) {
    Value x = Of(Kind::kFloat);
    x.f = v;
    return x;
  }
  static Value Str(std::string v) {
    Value x = Of(Kind::kString);
    x.s = std::move(v);
    return x;
  }
  static Value MakeList(List v = {}) {
    Value x = Of(Kind::kList);
    x.list = std::make_shared<List>(std::move(v));
    return x;
  }
  static Value MakeDict(Dict v = {}) {
    Value x = Of(Kind::kDict);
    x.dict = std::make_shared<Dict>(std::move(v));
    return x;
  }

  // The value at `key` of a dict or namespace, or nullptr.
  const Value* Find(const std::string& key) const;

 private:
  static Value Of(Kind k) {
    Value x;
    x.kind = k;
    return x;
  }
};

class Template {
 public:
  // Parses `source`. An error names the line and what is outside the subset.
  [[nodiscard]] static Result<std::unique_ptr<Template>> Parse(const std::string& source);
  ~Template();

  // Renders with the given top-level variables. An error is the template's
  // own raise_exception message, or names an operation Jinja2 would refuse
  // too (adding a string to a number, indexing a number).
  [[nodiscard]] Result<std::string> Render(const std::map<std::string, Value>& vars) const;

  struct Node;  // the parsed template (jinja.cc)

 private:
  explicit Template(std::unique_ptr<Node> root);
  std::unique_ptr<Node> root_;
};

}  // namespace verity::serve::jinja
