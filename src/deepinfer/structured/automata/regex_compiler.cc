// Lowers a parsed regex (regex_ast.h) to grammar rules (see regex_compiler.h).
#include "deepinfer/structured/automata/regex_compiler.h"

#include "deepinfer/structured/automata/char_class.h"
#include "deepinfer/structured/automata/code_point_dfa.h"
#include "deepinfer/structured/automata/regex_ast.h"

namespace deepinfer::structured {
namespace {

using Kind = RegexNode::Kind;

class RegexLowering {
 public:
  RegexLowering(GrammarBuilder& b, const RegexAst& ast, bool json_string)
      : b_(b), ast_(ast), json_string_(json_string) {}

  Result<Element> top() {
    std::vector<Sequence> alts;
    for (int br : ast_.branches) {
      DI_ASSIGN_OR_RETURN(Sequence s, lower(br));
      alts.push_back(std::move(s));
    }
    return GrammarBuilder::call(b_.rule_with_alts("regex", std::move(alts)));
  }

 private:
  Result<Sequence> lower(int id) {
    const RegexNode& n = ast_.nodes[id];
    switch (n.kind) {
      case Kind::kClass:
        return Sequence{char_class(b_, n.set, json_string_)};
      case Kind::kConcat: {
        Sequence seq;
        for (int k : n.kids) {
          DI_ASSIGN_OR_RETURN(Sequence s, lower(k));
          seq.insert(seq.end(), s.begin(), s.end());
          DI_RETURN_IF_ERROR(b_.check_budget());
        }
        return seq;
      }
      case Kind::kAlt: {
        std::vector<Sequence> alts;
        for (int k : n.kids) {
          DI_ASSIGN_OR_RETURN(Sequence s, lower(k));
          alts.push_back(std::move(s));
        }
        return Sequence{GrammarBuilder::call(b_.rule_with_alts("group", std::move(alts)))};
      }
      case Kind::kRepeat: {
        DI_ASSIGN_OR_RETURN(Sequence body, lower(n.kids[0]));
        if (n.lo == 0 && n.hi < 0) return Sequence{b_.star(body, "regex_star")};
        return Sequence{b_.repeat(body, n.lo, n.hi, "regex_rep")};
      }
      case Kind::kStart:
      case Kind::kEnd:
        break;  // compile_regex sends patterns with assertions to the automaton
    }
    return Sequence{};
  }

  GrammarBuilder& b_;
  const RegexAst& ast_;
  bool json_string_;
};

}  // namespace

Result<Element> compile_regex(GrammarBuilder& b, std::string_view pattern, const RegexOptions& o) {
  DI_ASSIGN_OR_RETURN(RegexAst ast, parse_regex(pattern, o.search));
  if (ast.needs_automaton()) {
    // Inner anchors and lookaheads have no rule form; their automaton does.
    DI_ASSIGN_OR_RETURN(CodePointDfa d, dfa_from_regex(ast));
    return dfa_to_rule(b, dfa_minimize(d), o.json_string, "regex_dfa");
  }
  RegexLowering lowering(b, ast, o.json_string);
  return lowering.top();
}

}  // namespace deepinfer::structured
