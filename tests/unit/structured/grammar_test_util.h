// Test helpers: the real SmolLM2 vocabulary when its GGUF is present (else a synthetic one),
// greedy tokenization of text over it, and a token-by-token walk that checks every mask.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "deepinfer/structured/grammar_compiler.h"
#include "deepinfer/structured/grammar_matcher.h"
#include "deepinfer/structured/json_schema/compiler.h"
#include "deepinfer/structured/json_schema/validate.h"

namespace deepinfer::structured::testing {

// Cached per process. `real` tells whether it came from the model's GGUF.
std::shared_ptr<const TokenVocabulary> test_vocabulary(bool* real = nullptr);
// A small synthetic vocabulary: all bytes plus common JSON fragments; EOS is the last id.
std::shared_ptr<const TokenVocabulary> synthetic_vocabulary();

// Longest-match tokenization (any segmentation is a legal token sequence for the matcher).
std::vector<int32_t> greedy_tokenize(const TokenVocabulary& v, const std::string& text);

// Feeds the text's tokens one by one. Each token must be allowed by the mask iff the matcher
// accepts it; `mask_mismatch` reports a disagreement. Returns whether text + EOS was accepted.
bool walk_text(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text,
               bool* mask_mismatch = nullptr);

std::string data_dir();  // $DEEPINFER_SOURCE_DIR/../shared/data

// A grammar over test_vocabulary() with no context classified yet (a test failure, and null,
// if refused): for tests that classify contexts themselves.
std::shared_ptr<const CompiledGrammar> compile_unclassified(const GrammarSpec& spec);

// A JSON Schema compiled over the synthetic vocabulary (a test failure, and null, if refused).
std::shared_ptr<const CompiledGrammar> compile(const std::string& schema, JsonSchemaOptions o = {});
// walk_text that also fails the test when a mask disagrees with accept_token; false for null.
bool accepts(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text);
// The schema is refused as unsupported, naming `keyword`.
void expect_refused(const std::string& schema, const std::string& keyword);

// A schema compiled over the synthetic vocabulary (a test failure, and a null grammar, if
// refused), with its JSON kept for our validator.
struct SchemaUnderTest {
  nlohmann::ordered_json schema;
  std::shared_ptr<const CompiledGrammar> g;
};
SchemaUnderTest compile_schema(const std::string& schema);
// Our InstanceValidator's verdict on the instance `text`.
Verdict validator_verdict(const SchemaUnderTest& c, const std::string& text, bool enforce_formats);
// The validator says `valid`, and the grammar agrees (masks checked at every token).
void expect_verdict(const SchemaUnderTest& c, const std::string& text, bool valid,
                    bool enforce_formats);

}  // namespace deepinfer::structured::testing
