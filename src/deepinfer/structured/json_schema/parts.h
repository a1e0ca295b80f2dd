// Lexical building blocks of the JSON Schema compiler: integer/number ranges, string formats,
// and object keys that must differ from a set of declared names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/base/status.h"
#include "deepinfer/structured/grammar_ir.h"

namespace deepinfer::structured {

// JSON integers (no exponent, no leading zeros) in [lo, hi]; nullopt = unbounded.
Element integer_range(GrammarBuilder& b, std::optional<int64_t> lo, std::optional<int64_t> hi);
// JSON numbers (no exponent) between integer bounds lo and hi, each inclusive or exclusive.
// max_fraction_digits >= 0 limits the decimals (multipleOf 10^-d); -1: any.
Element number_range(GrammarBuilder& b, std::optional<int64_t> lo, std::optional<int64_t> hi,
                     bool lo_exclusive, bool hi_exclusive, int max_fraction_digits = -1);
// Unconstrained JSON number / integer.
Element any_number(GrammarBuilder& b);
Element any_integer(GrammarBuilder& b);

// A known `format` as the body of a JSON string (without quotes); nullopt for unknown formats,
// which JSON Schema 2020-12 treats as annotations.
std::optional<std::string> format_regex(std::string_view format);

// A complete JSON string literal ("...") of well-formed UTF-8 whose value is none of
// `excluded` (the names themselves, not escaped). Each character has the one spelling a
// standard serializer writes (as in string values), so a declared name cannot come back
// spelled differently.
Result<Element> key_excluding(GrammarBuilder& b, const std::vector<std::string>& excluded);

}  // namespace deepinfer::structured
