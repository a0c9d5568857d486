#include "runtime/jinja/lexer.h"

#include <charconv>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "runtime/jinja/strings.h"
#include "runtime/jinja/value.h"

namespace tessera::jinja {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}
bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Length of the Python-whitespace (regex \s) run starting at `pos`.
size_t whitespace_run(std::string_view s, size_t pos) {
  size_t i = pos;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (!is_python_space(c)) break;
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xc0) == 0x80) ++j;
    const std::u32string cp = utf8_decode(s.substr(i, j - i));
    if (cp.size() != 1 || !is_python_space(cp[0])) break;
    i = j;
  }
  return i - pos;
}

// Python's str.rstrip(): strips trailing Unicode whitespace.
std::string_view rstrip_whitespace(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
    if (whitespace_run(s.substr(0, end), start) != end - start) break;
    end = start;
  }
  return s.substr(0, end);
}

int count_newlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n' ? 1 : 0;
  return n;
}

// Jinja normalizes every newline sequence to "\n" and (keep_trailing_newline=False) drops one
// trailing newline of the template.
std::string normalize_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  Lexer(std::string_view source, const LexerOptions& options)
      : src_(normalize_source(source)), options_(options) {}

  absl::StatusOr<std::vector<Token>> run() {
    while (pos_ < src_.size()) {
      const size_t start = find_tag_start(pos_);
      if (start == std::string::npos) {
        emit_text(std::string_view(src_).substr(pos_));
        break;
      }
      const char kind = src_[start + 1];
      size_t after = start + 2;
      char sign = 0;
      if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
      size_t raw_body = 0;
      const bool raw = kind == '%' && match_raw_begin(after, &raw_body);

      std::string_view text = std::string_view(src_).substr(pos_, start - pos_);
      if (sign == '-') {
        text = rstrip_whitespace(text);
      } else if (sign != '+' && options_.lstrip_blocks && kind != '{') {
        // lstrip_blocks: a block or comment tag alone after indentation takes the indentation.
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting_) && l_pos < text.size() &&
            whitespace_run(text, l_pos) == text.size() - l_pos) {
          text = text.substr(0, l_pos);
        }
      }
      emit_text(text);
      line_ += count_newlines(std::string_view(src_).substr(pos_, start - pos_));
      pos_ = after;

      absl::Status st;
      if (kind == '#') {
        st = lex_comment();
      } else if (raw) {
        st = lex_raw(raw_body);
      } else {
        st = lex_tag(kind);
      }
      if (!st.ok()) return st;
    }
    tokens_.push_back(Token{TokenType::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  absl::Status error(int line, std::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat("chat template line ", line, ": ", sv(message)));
  }

  size_t find_tag_start(size_t from) const {
    size_t p = from;
    while ((p = src_.find('{', p)) != std::string::npos) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) {
        return p;
      }
      ++p;
    }
    return std::string::npos;
  }

  void emit_text(std::string_view text) {
    if (text.empty()) return;
    tokens_.push_back(Token{TokenType::kText, std::string(text), line_});
  }

  // Consumes the whitespace control at the end of a block/comment tag whose closing delimiter
  // (2 chars) starts at `end`; `sign` is the character before it ('-', '+' or other).
  void finish_tag(size_t end, char sign, bool trims) {
    size_t p = end + 2;
    if (sign == '-') {
      p += whitespace_run(src_, p);
    } else if (sign != '+' && trims && options_.trim_blocks && p < src_.size() && src_[p] == '\n') {
      ++p;
    }
    line_ += count_newlines(std::string_view(src_).substr(pos_, p - pos_));
    pos_ = p;
    // A tag that swallowed the newline leaves the next text at a line start (lstrip_blocks).
    line_starting_ = src_[p - 1] == '\n';
  }

  absl::Status lex_comment() {
    const int line = line_;
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) return error(line, "missing end of comment tag '#}'");
    const char sign = end > pos_ ? src_[end - 1] : 0;
    finish_tag(end, sign, /*trims=*/true);
    return absl::OkStatus();
  }

  // `{% raw %}` at `after` (just past "{%" and its sign); on a match `*body` is where the raw
  // text starts.
  bool match_raw_begin(size_t after, size_t* body) const {
    size_t p = after + whitespace_run(src_, after);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    if (p < src_.size() && is_name_char(src_[p])) return false;
    p += whitespace_run(src_, p);
    if (src_.compare(p, 3, "-%}") == 0) {
      p += 3;
      *body = p + whitespace_run(src_, p);
      return true;
    }
    if (src_.compare(p, 2, "%}") == 0) {
      *body = p + 2;
      return true;
    }
    return false;
  }

  absl::Status lex_raw(size_t body) {
    const int line = line_;
    size_t search = body;
    for (;;) {
      const size_t start = src_.find("{%", search);
      if (start == std::string::npos) return error(line, "missing '{% endraw %}' for '{% raw %}'");
      size_t p = start + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      p += whitespace_run(src_, p);
      if (src_.compare(p, 6, "endraw") != 0 || (p + 6 < src_.size() && is_name_char(src_[p + 6]))) {
        search = start + 2;
        continue;
      }
      p += 6;
      p += whitespace_run(src_, p);
      char end_sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) end_sign = src_[p++];
      if (src_.compare(p, 2, "%}") != 0) return error(line_, "malformed '{% endraw %}'");
      std::string_view text = std::string_view(src_).substr(body, start - body);
      if (sign == '-') {
        text = rstrip_whitespace(text);
      } else if (sign != '+' && options_.lstrip_blocks) {
        const size_t nl = text.rfind('\n');
        if (nl != std::string_view::npos && whitespace_run(text, nl + 1) == text.size() - nl - 1) {
          text = text.substr(0, nl + 1);
        }
      }
      emit_text(text);
      finish_tag(p, end_sign, /*trims=*/true);
      return absl::OkStatus();
    }
  }

  absl::Status lex_tag(char kind) {
    const int tag_line = line_;
    tokens_.push_back(
        Token{kind == '%' ? TokenType::kBlockBegin : TokenType::kVariableBegin, "", line_});
    std::string brackets;  // expected closers, innermost last
    for (;;) {
      if (pos_ >= src_.size()) {
        return error(tag_line, kind == '%'
                                   ? "unexpected end of template: '{%' is never closed by '%}'"
                                   : "unexpected end of template: '{{' is never closed by '}}'");
      }
      // The end delimiter only counts outside brackets: `{{ {'a': {'b': 1}} }}` is one tag.
      if (brackets.empty()) {
        const TokenType end_type = kind == '%' ? TokenType::kBlockEnd : TokenType::kVariableEnd;
        const char close = kind == '%' ? '%' : '}';
        const char c = src_[pos_];
        if ((c == '-' || (c == '+' && kind == '%')) && pos_ + 2 < src_.size() &&
            src_[pos_ + 1] == close && src_[pos_ + 2] == '}') {
          tokens_.push_back(Token{end_type, "", line_});
          finish_tag(pos_ + 1, c, /*trims=*/kind == '%');
          return absl::OkStatus();
        }
        if (c == close && pos_ + 1 < src_.size() && src_[pos_ + 1] == '}') {
          tokens_.push_back(Token{end_type, "", line_});
          finish_tag(pos_, 0, /*trims=*/kind == '%');
          return absl::OkStatus();
        }
      }
      const char c = src_[pos_];
      if (is_ascii_space(c)) {
        if (c == '\n') ++line_;
        ++pos_;
      } else if (is_digit(c)) {
        if (absl::Status st = lex_number(); !st.ok()) return st;
      } else if (is_name_start(c)) {
        const size_t start = pos_;
        while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
        tokens_.push_back(Token{TokenType::kName, src_.substr(start, pos_ - start), line_});
      } else if (c == '\'' || c == '"') {
        if (absl::Status st = lex_string(); !st.ok()) return st;
      } else {
        if (absl::Status st = lex_operator(brackets); !st.ok()) return st;
      }
    }
  }

  size_t digit_run(size_t p) const {  // (\d+_)*\d+
    const size_t start = p;
    while (p < src_.size() && is_digit(src_[p])) {
      ++p;
      if (p + 1 < src_.size() && src_[p] == '_' && is_digit(src_[p + 1])) ++p;
    }
    return p - start;
  }

  absl::Status lex_number() {
    const size_t start = pos_;
    size_t p = pos_ + digit_run(pos_);
    bool is_float = false;
    if (p + 1 < src_.size() && src_[p] == '.' && is_digit(src_[p + 1])) {
      p += 1 + digit_run(p + 1);
      is_float = true;
    }
    if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      size_t q = p + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (const size_t n = digit_run(q); n > 0) {
        p = q + n;
        is_float = true;
      }
    }
    std::string digits;
    for (size_t i = start; i < p; ++i) {
      if (src_[i] != '_') digits.push_back(src_[i]);
    }
    pos_ = p;
    Token tok{is_float ? TokenType::kFloat : TokenType::kInteger, digits, line_};
    if (is_float) {
      tok.float_value = std::strtod(digits.c_str(), nullptr);
    } else {
      const auto res = std::from_chars(digits.data(), digits.data() + digits.size(), tok.int_value);
      if (res.ec != std::errc())
        return error(line_, absl::StrCat("integer literal too large: ", digits));
    }
    tokens_.push_back(std::move(tok));
    return absl::OkStatus();
  }

  // Python's unicode-escape decoding of a string literal's body.
  absl::Status lex_string() {
    const int line = line_;
    const char quote = src_[pos_++];
    std::string out;
    for (;;) {
      if (pos_ >= src_.size()) return error(line, "unterminated string literal");
      const char c = src_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= src_.size()) return error(line, "unterminated string literal");
      const char e = src_[pos_++];
      switch (e) {
        case '\n':
          ++line_;
          break;  // line continuation
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'x':
        case 'u':
        case 'U': {
          const int n = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          char32_t cp = 0;
          for (int k = 0; k < n; ++k) {
            const int h = pos_ < src_.size() ? hex_value(src_[pos_]) : -1;
            if (h < 0)
              return error(line,
                           absl::StrCat("truncated \\", std::string(1, e), " escape in string"));
            cp = cp * 16 + static_cast<char32_t>(h);
            ++pos_;
          }
          if (cp > 0x10ffff) return error(line, "illegal Unicode character in string escape");
          utf8_append(out, cp);
          break;
        }
        case 'N':
          return error(line, "unsupported \\N{...} escape in string");
        default:
          if (e >= '0' && e <= '7') {
            char32_t cp = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7';
                 ++k) {
              cp = cp * 8 + static_cast<char32_t>(src_[pos_++] - '0');
            }
            utf8_append(out, cp);
          } else {
            // Python keeps unknown escapes verbatim.
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    tokens_.push_back(Token{TokenType::kString, std::move(out), line});
    return absl::OkStatus();
  }

  absl::Status lex_operator(std::string& brackets) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    const std::string_view rest = std::string_view(src_).substr(pos_);
    for (std::string_view op : kTwo) {
      if (rest.substr(0, 2) == op) {
        tokens_.push_back(Token{TokenType::kOperator, std::string(op), line_});
        pos_ += 2;
        return absl::OkStatus();
      }
    }
    const char c = rest[0];
    static constexpr std::string_view kOne = "+-/*%~[](){}><=.:|,;";
    if (kOne.find(c) == std::string_view::npos) {
      if (static_cast<unsigned char>(c) >= 0x80)
        return error(line_, "unexpected non-ASCII character in tag");
      return error(line_, absl::StrCat("unexpected character '", std::string(1, c), "'"));
    }
    if (c == '(' || c == '[' || c == '{') {
      brackets.push_back(c == '(' ? ')' : (c == '[' ? ']' : '}'));
    } else if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty())
        return error(line_, absl::StrCat("unexpected '", std::string(1, c), "'"));
      if (brackets.back() != c) {
        return error(line_, absl::StrCat("unexpected '", std::string(1, c), "', expected '",
                                         std::string(1, brackets.back()), "'"));
      }
      brackets.pop_back();
    }
    tokens_.push_back(Token{TokenType::kOperator, std::string(1, c), line_});
    ++pos_;
    return absl::OkStatus();
  }

  const std::string src_;
  const LexerOptions options_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

absl::StatusOr<std::vector<Token>> tokenize(std::string_view source, const LexerOptions& options) {
  return Lexer(source, options).run();
}

}  // namespace tessera::jinja
