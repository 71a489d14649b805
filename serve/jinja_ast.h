// The parsed form of a Jinja template (serve/jinja.h), shared by the parser
// (jinja_parse.cc) and the renderer (jinja_render.cc). Internal.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "serve/jinja.h"

namespace verity::serve::jinja {

struct Expr {
  enum class Op {
    kLiteral,  // literal
    kVar,      // name
    kAttr,     // args[0].name
    kIndex,    // args[0][args[1]]
    kSlice,    // args[0][args[1]:args[2]:args[3]] (null parts: absent)
    kCall,     // args[0](args[1..], kwargs): a global function or a method (args[0] a kAttr)
    kFilter,   // args[0] | name(args[1..])
    kTest,     // args[0] is [not] name
    kNot,      // not args[0]
    kNeg,      // name args[0]: unary - or +
    kBinary,   // args[0] name args[1]: + - * / // % ~ == != < > <= >= in (negated: not in)
    kAnd,
    kOr,
    kCond,  // args[0] if args[1] else args[2] (args[2] null: undefined)
    kList,  // [args...]
    kDict,  // {keys[i]: args[i]}
  };
  Op op = Op::kLiteral;
  Value literal;
  std::string name;
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<std::string> keys;  // kDict; kCall's keyword names (args after the positional ones)
  int positional = 0;             // kCall: how many of args[1..] are positional
  bool negated = false;           // kTest: is not; kBinary in: not in
  int line = 0;
};

}  // namespace verity::serve::jinja

namespace verity::serve::jinja {

struct Template::Node {
  enum class Kind { kBody, kText, kOutput, kIf, kFor, kSet, kSetBlock };
  Kind kind = Kind::kBody;
  int line = 0;
  std::string text;                             // kText
  std::unique_ptr<Expr> expr;                   // kOutput, kSet's value, kFor's iterable
  std::vector<std::unique_ptr<Node>> children;  // kBody
  // kIf: conditions[i] guards bodies[i]; a last body without a condition is the else.
  std::vector<std::unique_ptr<Expr>> conditions;  // kFor: [filter] when it has one (for x in xs if cond)
  std::vector<std::unique_ptr<Node>> bodies;      // kIf's branches; kFor: [body] or [body, else]
  std::vector<std::string> targets;               // kFor's loop variables (1 or 2); kSet: [name] or [namespace, attr]
                                                  // kSetBlock: [name], bodies[0] rendered is its value
};

}  // namespace verity::serve::jinja
