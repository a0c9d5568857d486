// Python str semantics on UTF-8 std::strings, for the filters and string methods chat templates
// use. Indices and lengths are in code points, as in Python. Case mapping and isalpha use glibc's
// Unicode tables (C.UTF-8) plus Python's multi-character special cases (ß -> SS, final sigma);
// glibc's Unicode version may lag Python's for very recent characters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::jinja {

// UTF-8 helpers: Python strings index by code point.
std::u32string utf8_decode(std::string_view s);  // invalid bytes decode as U+FFFD
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t cp);
size_t utf8_length(std::string_view s);
bool is_ascii(std::string_view s);
bool is_python_space(char32_t c);  // str.isspace()/str.split() whitespace

namespace pystr {

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);  // str.capitalize()
std::string title(std::string_view s);       // str.title()
bool is_lower(std::string_view s);           // str.islower()
bool is_upper(std::string_view s);           // str.isupper()

// str.strip/lstrip/rstrip: `chars` nullopt strips whitespace, else any of its code points.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);

// str.split/rsplit: `sep` nullopt splits on whitespace runs; `maxsplit` < 0 means no limit.
// An empty separator is the caller's error to report.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends = false);

// str.replace; `count` < 0 replaces all. nullopt, without building it, when the result would be
// longer than `max_bytes`: each replace can multiply a string's length (by 20 for 'a' -> 20 'a's).
std::optional<std::string> replace(std::string_view s, std::string_view old_sub,
                                   std::string_view new_sub, int64_t count, size_t max_bytes);

// str.find/rfind (code point index or -1) and str.count.
int64_t find(std::string_view s, std::string_view sub, bool reverse);
int64_t count(std::string_view s, std::string_view sub);

// markupsafe.escape: & < > " ' as HTML entities.
std::string html_escape(std::string_view s);

// Character classes over the whole string, false when empty (str.isdigit() and friends).
bool all_digits(std::string_view s);
bool all_alpha(std::string_view s);
bool all_alnum(std::string_view s);
bool all_space(std::string_view s);

}  // namespace pystr
}  // namespace tessera::jinja
