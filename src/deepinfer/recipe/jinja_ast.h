// Syntax tree of the chat-template interpreter (internal to jinja_parse.cc / jinja_render.cc).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "deepinfer/recipe/jinja_value.h"

namespace deepinfer::recipe::jinja {

struct Expr {
  enum class Kind {
    kLiteral, kName, kAttr, kItem, kSlice, kCall, kFilter, kTest, kNot, kNeg, kBinary,
    kTernary, kList, kDict,
  };
  Kind kind = Kind::kLiteral;
  Value literal;
  std::string name;  // variable, attribute, filter, test or operator
  // kAttr/kItem: [obj, key]; kSlice: [obj, start|null, stop|null]; kCall: [callee, args...];
  // kFilter/kTest: [subject, args...]; kBinary: [lhs, rhs]; kTernary: [then, cond, else];
  // kList: items; kDict: key, value, key, value...
  std::vector<std::unique_ptr<Expr>> kids;
  std::vector<std::string> kwarg_names;  // kCall/kFilter: names of the trailing keyword args
  bool negated = false;                  // kTest: "is not"
};

struct Node {
  enum class Kind { kBody, kText, kOutput, kIf, kFor, kSet };
  Kind kind = Kind::kBody;
  TaggedString text;                                // kText
  std::unique_ptr<Expr> expr;                       // kOutput, kFor (iterable), kSet (value)
  std::vector<std::unique_ptr<Expr>> conditions;    // kIf: one per branch
  std::vector<std::unique_ptr<Node>> children;      // kBody: statements; kIf: branch bodies
                                                    // (+1 for else); kFor: body [, else]
  std::vector<std::string> targets;                 // kFor loop vars; kSet: name [, attribute]
  std::unique_ptr<Expr> filter;                     // kFor: "if" clause
};

}  // namespace deepinfer::recipe::jinja
