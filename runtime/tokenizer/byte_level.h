// GPT-2's reversible byte <-> code point map. Byte-level BPE vocabularies store every token as a
// string over 256 printable code points (one per byte value) so that any byte sequence,
// including partial UTF-8, has a printable spelling: printable Latin-1 bytes map to themselves,
// the rest (controls, space, 0x7F..0xA0, 0xAD) to U+0100 upwards, so space becomes 'Ġ' (U+0120)
// and newline 'Ċ' (U+010A).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tessera {

// The code point that stands for byte `b`.
char32_t byte_to_code_point(uint8_t b);

// The byte that code point `cp` stands for, or nullopt when `cp` is not in the map's image.
std::optional<uint8_t> code_point_to_byte(char32_t cp);

// Raw bytes to their byte-level spelling (UTF-8 of the mapped code points).
std::string byte_level_encode(std::string_view bytes);

// A byte-level spelling back to raw bytes; nullopt when `text` is not valid UTF-8 or holds a code
// point outside the map (e.g. a token written in plain text, like an added token with a space).
std::optional<std::string> byte_level_decode(std::string_view text);

}  // namespace tessera
