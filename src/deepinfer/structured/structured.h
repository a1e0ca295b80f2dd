// The public face of structured outputs, for code that carries a grammar request (a request,
// the server's field parsing, a CLI flag) without compiling one: what a grammar is asked for
// (GrammarSpec), how a compile answers (CompileResult: a grammar or a Status naming the
// refused keyword), and the names of the compiler and the matcher. Light on purpose: no
// <thread>, <mutex> or thread pool comes in through it. The engine, which compiles and
// matches, includes grammar_compiler.h and grammar_matcher.h. See README.md beside it.
#pragma once

#include <memory>
#include <string>

#include "deepinfer/base/status.h"
#include "deepinfer/structured/json_schema/compiler.h"

namespace deepinfer::structured {

// What a request asks its output to match: a JSON Schema, any JSON value, an ECMAScript regex
// or a GBNF grammar (docs/structured_outputs.md), with the JSON Schema options.
struct GrammarSpec {
  enum Kind { kJsonSchema, kJsonObject /* any JSON */, kRegex, kEbnf } kind = kJsonObject;
  std::string source;
  JsonSchemaOptions opts;
};

class CompiledGrammar;  // compiled_grammar.h: a grammar bound to a vocabulary (immutable use)
class GrammarCompiler;  // grammar_compiler.h: async compile + cache, on worker threads
class GrammarMatcher;   // grammar_matcher.h: per-request mask / accept / rollback

// A compiled grammar, or the Status that says why the spec was refused.
using CompileResult = Result<std::shared_ptr<const CompiledGrammar>>;

}  // namespace deepinfer::structured
