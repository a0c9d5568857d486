#include "runtime/jinja/strings.h"

#include <algorithm>
#include <clocale>
#include <cwctype>

#include <locale.h>
#include <wctype.h>

#include "runtime/jinja/value.h"

namespace tessera::jinja {

// --- UTF-8 ---------------------------------------------------------------------------------------

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int len = 0;
    char32_t cp = 0;
    if (c < 0x80) {
      out.push_back(c);
      ++i;
      continue;
    }
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    }
    bool ok = len > 0 && i + static_cast<size_t>(len) <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      ok = (cc & 0xc0) == 0x80;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (!ok) {
      out.push_back(0xfffd);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += static_cast<size_t>(len);
  }
  return out;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(out, c);
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xc0) != 0x80) ++n;
  }
  return n;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

bool is_python_space(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85 ||
         c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
         c == 0x202f || c == 0x205f || c == 0x3000;
}

namespace pystr {
namespace {

// glibc's Unicode tables through an explicit C.UTF-8 locale object: thread-safe and independent
// of the process locale. Null when unavailable; then the small built-in tables below are used.
locale_t unicode_ctype() {
  static const locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  return loc;
}

// Fallback simple case mapping: Latin-1, Latin Extended-A, Greek, Cyrillic.
char32_t table_upper(char32_t c) {
  if (c == 0xb5) return 0x39c;
  if (c >= 0xe0 && c <= 0xfe && c != 0xf7) return c - 0x20;
  if (c == 0xff) return 0x178;
  if (c == 0x131) return 'I';
  if (c == 0x17f) return 'S';
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14a && c <= 0x177)) return (c & 1) != 0 ? c - 1 : c;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) return (c & 1) != 0 ? c : c - 1;
  if (c >= 0x3b1 && c <= 0x3cb) return c == 0x3c2 ? 0x3a3 : c - 0x20;
  if (c == 0x3ac) return 0x386;
  if (c >= 0x3ad && c <= 0x3af) return c - 0x25;
  if (c == 0x3cc) return 0x38c;
  if (c == 0x3cd || c == 0x3ce) return c - 0x3f;
  if (c >= 0x430 && c <= 0x44f) return c - 0x20;
  if (c >= 0x450 && c <= 0x45f) return c - 0x50;
  return c;
}

char32_t table_lower(char32_t c) {
  if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 0x20;
  if (c == 0x178) return 0xff;
  if (c == 0x130) return 'i';
  if ((c >= 0x100 && c <= 0x137) || (c >= 0x14a && c <= 0x177)) return (c & 1) == 0 ? c + 1 : c;
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) return (c & 1) != 0 ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3ab && c != 0x3a2) return c + 0x20;
  if (c == 0x386) return 0x3ac;
  if (c >= 0x388 && c <= 0x38a) return c + 0x25;
  if (c == 0x38c) return 0x3cc;
  if (c == 0x38e || c == 0x38f) return c + 0x3f;
  if (c >= 0x410 && c <= 0x42f) return c + 0x20;
  if (c >= 0x400 && c <= 0x40f) return c + 0x50;
  return c;
}

char32_t upper_cp(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (locale_t loc = unicode_ctype())
    return static_cast<char32_t>(towupper_l(static_cast<wint_t>(c), loc));
  return table_upper(c);
}

char32_t lower_cp(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (locale_t loc = unicode_ctype())
    return static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), loc));
  return table_lower(c);
}

bool is_lower_cp(char32_t c) {
  return upper_cp(c) != c || c == 0xdf;
}
bool is_upper_cp(char32_t c) {
  return lower_cp(c) != c;
}
bool is_cased_cp(char32_t c) {
  return is_lower_cp(c) || is_upper_cp(c);
}

// Python applies the full (SpecialCasing) mappings: a few characters uppercase to several.
const char* special_upper(char32_t c) {
  switch (c) {
    case 0xdf:
      return "SS";
    case 0x149:
      return "\u02bcN";
    case 0x1f0:
      return "J\u030c";
    case 0x587:
      return "\u0535\u0552";
    case 0xfb00:
      return "FF";
    case 0xfb01:
      return "FI";
    case 0xfb02:
      return "FL";
    case 0xfb03:
      return "FFI";
    case 0xfb04:
      return "FFL";
    case 0xfb05:
    case 0xfb06:
      return "ST";
    default:
      return nullptr;
  }
}

void append_upper(std::string& out, char32_t c) {
  if (const char* s = special_upper(c)) {
    out += s;
  } else {
    utf8_append(out, upper_cp(c));
  }
}

// Titlecase (first letter of str.title()/capitalize()): differs from uppercase for the Latin
// digraphs and the full mappings.
void append_title(std::string& out, char32_t c) {
  if (c == 0xdf) {
    out += "Ss";
  } else if (c >= 0x1c4 && c <= 0x1cc) {
    utf8_append(out, 0x1c5 + 3 * ((c - 0x1c4) / 3));
  } else if (c >= 0x1f1 && c <= 0x1f3) {
    utf8_append(out, 0x1f2);
  } else {
    append_upper(out, c);
  }
}

void append_lower(std::string& out, const std::u32string& cps, size_t i) {
  const char32_t c = cps[i];
  if (c == 0x130) {  // İ lowercases to i + combining dot above
    out += "i\u0307";
  } else if (c == 0x3a3 && i > 0 && is_cased_cp(cps[i - 1]) &&
             (i + 1 == cps.size() || !is_cased_cp(cps[i + 1]))) {
    utf8_append(out, 0x3c2);  // final sigma
  } else {
    utf8_append(out, lower_cp(c));
  }
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

std::string encode_range(const std::u32string& cps, size_t from, size_t to) {
  return utf8_encode(std::u32string_view(cps).substr(from, to - from));
}

int64_t cp_index(std::string_view s, size_t byte_pos) {
  return static_cast<int64_t>(utf8_length(s.substr(0, byte_pos)));
}

}  // namespace

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    for (char c : s) out.push_back((c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c);
    return out;
  }
  for (char32_t c : utf8_decode(s)) append_upper(out, c);
  return out;
}

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    for (char c : s) out.push_back((c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c);
    return out;
  }
  const std::u32string cps = utf8_decode(s);
  for (size_t i = 0; i < cps.size(); ++i) append_lower(out, cps, i);
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  const std::u32string cps = utf8_decode(s);
  for (size_t i = 0; i < cps.size(); ++i) {
    if (i == 0) {
      append_title(out, cps[0]);
    } else {
      append_lower(out, cps, i);
    }
  }
  return out;
}

std::string title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  const std::u32string cps = utf8_decode(s);
  for (size_t i = 0; i < cps.size(); ++i) {
    if (prev_cased) {
      append_lower(out, cps, i);
    } else {
      append_title(out, cps[i]);
    }
    prev_cased = is_cased_cp(cps[i]);
  }
  return out;
}

bool is_lower(std::string_view s) {
  bool cased = false;
  for (char32_t c : utf8_decode(s)) {
    if (is_upper_cp(c)) return false;
    cased = cased || is_lower_cp(c);
  }
  return cased;
}

bool is_upper(std::string_view s) {
  bool cased = false;
  for (char32_t c : utf8_decode(s)) {
    if (is_lower_cp(c)) return false;
    cased = cased || is_upper_cp(c);
  }
  return cased;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  const std::u32string cps = utf8_decode(s);
  const std::u32string set = chars ? utf8_decode(*chars) : std::u32string();
  const auto strippable = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : is_python_space(c);
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strippable(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strippable(cps[e - 1])) --e;
  }
  return encode_range(cps, b, e);
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               int64_t maxsplit) {
  std::vector<std::string> out;
  int64_t budget = maxsplit < 0 ? INT64_MAX : maxsplit;
  if (!sep) {
    const std::u32string cps = utf8_decode(s);
    const size_t n = cps.size();
    size_t i = 0;
    while (budget-- > 0) {
      while (i < n && is_python_space(cps[i])) ++i;
      if (i == n) break;
      const size_t j = i++;
      while (i < n && !is_python_space(cps[i])) ++i;
      out.push_back(encode_range(cps, j, i));
    }
    if (i < n) {
      while (i < n && is_python_space(cps[i])) ++i;
      if (i != n) out.push_back(encode_range(cps, i, n));
    }
    return out;
  }
  size_t start = 0;
  while (budget-- > 0) {
    const size_t pos = s.find(*sep, start);
    if (pos == std::string_view::npos) break;
    out.emplace_back(s.substr(start, pos - start));
    start = pos + sep->size();
  }
  out.emplace_back(s.substr(start));
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                int64_t maxsplit) {
  std::vector<std::string> out;
  int64_t budget = maxsplit < 0 ? INT64_MAX : maxsplit;
  if (!sep) {
    const std::u32string cps = utf8_decode(s);
    size_t i = cps.size();
    while (budget-- > 0) {
      while (i > 0 && is_python_space(cps[i - 1])) --i;
      if (i == 0) break;
      const size_t j = i--;
      while (i > 0 && !is_python_space(cps[i - 1])) --i;
      out.push_back(encode_range(cps, i, j));
    }
    if (i > 0) {
      while (i > 0 && is_python_space(cps[i - 1])) --i;
      if (i != 0) out.push_back(encode_range(cps, 0, i));
    }
    std::reverse(out.begin(), out.end());
    return out;
  }
  size_t end = s.size();
  while (budget-- > 0 && end >= sep->size()) {
    const size_t pos = s.rfind(*sep, end - sep->size());
    if (pos == std::string_view::npos) break;
    out.emplace_back(s.substr(pos + sep->size(), end - pos - sep->size()));
    end = pos;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  const std::u32string cps = utf8_decode(s);
  size_t start = 0, i = 0;
  while (i < cps.size()) {
    if (!is_line_break(cps[i])) {
      ++i;
      continue;
    }
    size_t eol = i + 1;
    if (cps[i] == '\r' && eol < cps.size() && cps[eol] == '\n') ++eol;
    out.push_back(encode_range(cps, start, keepends ? eol : i));
    start = i = eol;
  }
  if (start < cps.size()) out.push_back(encode_range(cps, start, cps.size()));
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::optional<std::string> replace(std::string_view s, std::string_view old_sub,
                                   std::string_view new_sub, int64_t count, size_t max_bytes) {
  // The replacements there will be, and so the result's length, before building it.
  const uint64_t limit = count < 0 ? UINT64_MAX : static_cast<uint64_t>(count);
  uint64_t n = 0;
  if (old_sub.empty()) {
    n = std::min<uint64_t>(limit, utf8_decode(s).size() + 1);
  } else {
    for (size_t at = s.find(old_sub); at != std::string_view::npos && n < limit;
         at = s.find(old_sub, at + old_sub.size())) {
      ++n;
    }
  }
  const size_t kept = s.size() - (old_sub.empty() ? 0 : static_cast<size_t>(n) * old_sub.size());
  if (kept > max_bytes ||
      (!new_sub.empty() && n > (max_bytes - kept) / new_sub.size())) {
    return std::nullopt;
  }
  std::string out;
  int64_t budget = count < 0 ? INT64_MAX : count;
  if (old_sub.empty()) {  // Python inserts `new` around every code point
    const std::u32string cps = utf8_decode(s);
    for (char32_t c : cps) {
      if (budget-- > 0) out += new_sub;
      utf8_append(out, c);
    }
    if (budget > 0) out += new_sub;
    return out;
  }
  size_t start = 0;
  while (budget-- > 0) {
    const size_t pos = s.find(old_sub, start);
    if (pos == std::string_view::npos) break;
    out.append(s.substr(start, pos - start));
    out.append(new_sub);
    start = pos + old_sub.size();
  }
  out.append(s.substr(start));
  return out;
}

int64_t find(std::string_view s, std::string_view sub, bool reverse) {
  const size_t pos = reverse ? s.rfind(sub) : s.find(sub);
  return pos == std::string_view::npos ? -1 : cp_index(s, pos);
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(utf8_length(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size()))
    ++n;
  return n;
}

namespace {

// Unicode decimal digits (category Nd): ASCII plus the ten-digit runs of other scripts.
bool is_digit_cp(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  static constexpr char32_t kZeros[] = {
      0x660,  0x6f0,  0x7c0,  0x966,  0x9e6,  0xa66,  0xae6,  0xb66,  0xbe6,
      0xc66,  0xce6,  0xd66,  0xde6,  0xe50,  0xed0,  0xf20,  0x1040, 0x1090,
      0x17e0, 0x1810, 0x1946, 0x19d0, 0x1a80, 0x1a90, 0x1b50, 0x1bb0, 0x1c40,
      0x1c50, 0xa620, 0xa8d0, 0xa900, 0xa9d0, 0xa9f0, 0xaa50, 0xabf0, 0xff10};
  for (char32_t zero : kZeros) {
    if (c >= zero && c < zero + 10) return true;
  }
  return false;
}

// Python's isalpha is Unicode's letter categories; glibc's alpha class is the closest available.
// Without it, non-ASCII code points count as letters unless they are whitespace or in the
// Latin-1/general punctuation and symbol blocks.
bool is_alpha_cp(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  // glibc counts other scripts' digits as alpha; Python does not.
  if (locale_t loc = unicode_ctype())
    return iswalpha_l(static_cast<wint_t>(c), loc) != 0 && !is_digit_cp(c);
  if (is_python_space(c)) return false;
  if (c < 0xc0) return c == 0xaa || c == 0xb5 || c == 0xba;
  if (c == 0xd7 || c == 0xf7) return false;
  if (c >= 0x2000 && c <= 0x2bff) return false;
  if (c >= 0x3000 && c <= 0x303f) return false;
  if (c >= 0xff00 && c <= 0xff20) return false;
  return true;
}

template <typename Pred>
bool all_of_cps(std::string_view s, Pred pred) {
  if (s.empty()) return false;
  const std::u32string cps = utf8_decode(s);
  return std::all_of(cps.begin(), cps.end(), pred);
}

}  // namespace

bool all_digits(std::string_view s) {
  return all_of_cps(s, is_digit_cp);
}
bool all_alpha(std::string_view s) {
  return all_of_cps(s, is_alpha_cp);
}
bool all_alnum(std::string_view s) {
  return all_of_cps(s, [](char32_t c) { return is_alpha_cp(c) || is_digit_cp(c); });
}
bool all_space(std::string_view s) {
  return all_of_cps(s, is_python_space);
}

}  // namespace pystr
}  // namespace tessera::jinja
