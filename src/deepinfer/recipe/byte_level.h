// Byte-level BPE helpers: the GPT-2 byte <-> printable-unicode mapping used to store token
// texts, and UTF-8 utilities (decoding one code point, lossy repair) shared by the tokenizer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::recipe {

// Maps a token's stored text (GPT-2 byte-level alphabet) back to the raw bytes it stands for.
// Returns false when the text holds a character outside the alphabet; `out` then holds the
// text's own UTF-8 for those characters (what HF's ByteLevel decoder does too).
bool byte_level_decode(std::string_view text, std::string* out);

// The inverse: raw bytes -> byte-level alphabet text (for building tokenizer.json keys).
std::string byte_level_encode(std::string_view bytes);

// Length of the UTF-8 sequence starting at s[i] when it is valid and complete, else 0.
// `cp` receives the code point.
int utf8_sequence_length(std::string_view s, size_t i, uint32_t* cp = nullptr);

// Length of the maximal prefix at s[i] that could still begin a valid sequence but is
// incomplete (0 when s[i] starts a complete character or is plainly invalid). Used by the
// streaming detokenizer to hold back bytes that more tokens may finish.
int utf8_incomplete_prefix_length(std::string_view s, size_t i);

// Replaces every maximal invalid subpart with U+FFFD (the Unicode "substitution of maximal
// subparts" practice, as Rust's from_utf8_lossy does).
std::string utf8_make_valid(std::string_view s);

void utf8_append(uint32_t cp, std::string* out);

}  // namespace deepinfer::recipe
