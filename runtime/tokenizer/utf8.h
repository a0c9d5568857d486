// Strict UTF-8 checks used at the tokenizer's edges: input text must be valid, and text handed
// back to clients must be complete, valid UTF-8 even when tokens split a character.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace tessera {

// What the bytes at one position of a string are.
enum class Utf8Unit {
  kComplete,   // `length` bytes form one well-formed character
  kTruncated,  // `length` bytes are a well-formed start of a character, cut off by the end
  kInvalid,    // `length` bytes (>= 1) are the maximal ill-formed subpart (one U+FFFD each)
};

struct Utf8Scan {
  Utf8Unit unit = Utf8Unit::kInvalid;
  size_t length = 0;
};

// Classifies the sequence starting at s[pos] (pos < s.size()) by the Unicode 15 table of
// well-formed byte sequences: no overlongs, no surrogates, nothing above U+10FFFF.
Utf8Scan scan_utf8(std::string_view s, size_t pos);

// Offset of the first byte that is not part of well-formed UTF-8, or npos when `s` is valid. A
// sequence cut off by the end of `s` counts as invalid at its first byte.
size_t find_invalid_utf8(std::string_view s);

// OK, or InvalidArgument naming the offset and value of the first bad byte.
absl::Status validate_utf8(std::string_view s);

// Length (0..3) of a trailing well-formed but incomplete sequence: the bytes a streaming
// decoder should hold back until more arrive. 0 when `s` ends on a character boundary or in
// bytes that can never become valid.
size_t incomplete_utf8_suffix(std::string_view s);

// `s` with every maximal ill-formed subpart replaced by U+FFFD (the W3C/WHATWG practice that
// Rust's from_utf8_lossy, hence HF tokenizers, follows), so results agree with theirs.
std::string sanitize_utf8(std::string_view s);

// Appends the UTF-8 encoding of code point `cp` (< 0x110000) to `out`.
void append_utf8(char32_t cp, std::string* out);

// Decodes the well-formed character at s[pos]; returns its length, or 0 when the bytes there are
// not a complete well-formed character.
size_t decode_utf8(std::string_view s, size_t pos, char32_t* cp);

}  // namespace tessera
