// vocab_from_hf_dir: a Vocab from a Hugging Face model directory.
//
// tokenizer.json is the source of truth for tokens, merges, added tokens, the pre-tokenizer and
// whether BOS/EOS are added (its post-processor); tokenizer_config.json names bos/eos/unk/pad,
// may override add_bos/add_eos and carries the chat template; generation_config.json lists the
// ids that end generation. Only what tessera's tokenizer can reproduce exactly is accepted:
// anything else is an error naming the file and the key, never a silently different tokenizer.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "base/status_macros.h"
#include "runtime/tokenizer/pre_tokenizer.h"
#include "runtime/tokenizer/vocab.h"

namespace tessera {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

// One JSON file being read, for error messages that name it and the key.
struct Source {
  std::string path;

  absl::Status error(std::string_view key, std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s: %s", path, key, what));
  }
  absl::Status type_error(std::string_view key, std::string_view expected, const Json& got) const {
    return error(key, absl::StrFormat("expected %s, got %s", expected, got.type_name()));
  }
};

absl::StatusOr<std::optional<Json>> read_json(const fs::path& path, bool required) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (!required) return std::optional<Json>();
    return absl::NotFoundError(absl::StrCat(path.string(), ": file not found"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot be opened"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    Json j = Json::parse(buffer.str());
    if (!j.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path.string(), ": expected a JSON object at the top level, got ", j.type_name()));
    }
    return std::optional<Json>(std::move(j));
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": malformed JSON: ", e.what()));
  }
}

// The member `key` of `obj`, or nullptr when it is absent or null.
const Json* member(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

absl::StatusOr<std::string> get_string(const Source& src, std::string_view key, const Json& v) {
  if (!v.is_string()) return src.type_error(key, "a string", v);
  return v.get<std::string>();
}

absl::StatusOr<bool> get_bool(const Source& src, std::string_view key, const Json& v) {
  if (!v.is_boolean()) return src.type_error(key, "a boolean", v);
  return v.get<bool>();
}

absl::StatusOr<int32_t> get_id(const Source& src, std::string_view key, const Json& v) {
  if (!v.is_number_integer()) return src.type_error(key, "an integer token id", v);
  const int64_t id = v.get<int64_t>();
  if (id < 0 || id >= INT32_MAX) {
    return src.error(key, absl::StrFormat("token id %d is out of range", id));
  }
  return static_cast<int32_t>(id);
}

// A token given as a string or as an AddedToken object {"content": ...}; nullopt for null.
absl::StatusOr<std::optional<std::string>> get_token_content(const Source& src,
                                                             std::string_view key,
                                                             const Json& obj) {
  const Json* v = member(obj, key);
  if (v == nullptr) return std::optional<std::string>();
  if (v->is_string()) return std::optional<std::string>(v->get<std::string>());
  if (v->is_object()) {
    const Json* content = member(*v, "content");
    if (content == nullptr || !content->is_string()) {
      return src.error(key, "expected a string or an object with a string \"content\"");
    }
    return std::optional<std::string>(content->get<std::string>());
  }
  return src.type_error(key, "a string or an object with \"content\"", *v);
}

std::string escape_regex_literal(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::string_view(R"(\^$.|?*+()[]{}-/#)").find(c) != std::string_view::npos) {
      out.push_back('\\');
    }
    out.push_back(c);
  }
  return out;
}

// --- tokenizer.json ------------------------------------------------------------------------------

// What the post-processor adds around a single sequence.
struct PostProcessing {
  std::optional<std::string> prefix;  // token added before the text
  std::optional<std::string> suffix;  // token added after it
};

// Appends the regexes of one HF pre-tokenizer (recursing into Sequence) to `patterns`.
// `saw_byte_level` tracks that ByteLevel ran: pre-tokenizers after it would see byte-level
// spelling instead of text, which tessera's pipeline (bytes are mapped only inside BPE) cannot
// reproduce.
absl::Status parse_pre_tokenizer(const Source& src, const std::string& key, const Json& pt,
                                 std::vector<std::string>* patterns, bool* saw_byte_level) {
  if (!pt.is_object()) return src.type_error(key, "an object", pt);
  const Json* type_json = member(pt, "type");
  if (type_json == nullptr) return src.error(key, "missing \"type\"");
  TESSERA_ASSIGN_OR_RETURN(std::string type, get_string(src, key + ".type", *type_json));

  if (type == "Sequence") {
    const Json* list = member(pt, "pretokenizers");
    if (list == nullptr || !list->is_array()) {
      return src.error(key + ".pretokenizers", "expected an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      TESSERA_RETURN_IF_ERROR(parse_pre_tokenizer(src, absl::StrCat(key, ".pretokenizers[", i, "]"),
                                                  (*list)[i], patterns, saw_byte_level));
    }
    return absl::OkStatus();
  }
  if (*saw_byte_level) {
    return src.error(
        key, absl::StrFormat("pre-tokenizer \"%s\" after ByteLevel is not supported", type));
  }
  if (type == "ByteLevel") {
    *saw_byte_level = true;
    if (const Json* aps = member(pt, "add_prefix_space")) {
      TESSERA_ASSIGN_OR_RETURN(bool v, get_bool(src, key + ".add_prefix_space", *aps));
      if (v) return src.error(key + ".add_prefix_space", "true is not supported");
    }
    bool use_regex = true;
    if (const Json* ur = member(pt, "use_regex")) {
      TESSERA_ASSIGN_OR_RETURN(bool v, get_bool(src, key + ".use_regex", *ur));
      use_regex = v;
    }
    if (use_regex) patterns->emplace_back(kGpt2Pattern);
    return absl::OkStatus();
  }
  if (type == "Split") {
    const Json* pattern = member(pt, "pattern");
    if (pattern == nullptr || !pattern->is_object()) {
      return src.error(key + ".pattern",
                       "expected an object {\"Regex\": ...} or {\"String\": ...}");
    }
    std::string regex;
    if (const Json* r = member(*pattern, "Regex")) {
      TESSERA_ASSIGN_OR_RETURN(std::string v, get_string(src, key + ".pattern.Regex", *r));
      regex = v;
    } else if (const Json* s = member(*pattern, "String")) {
      TESSERA_ASSIGN_OR_RETURN(std::string v, get_string(src, key + ".pattern.String", *s));
      regex = escape_regex_literal(v);
    } else {
      return src.error(key + ".pattern", "expected a \"Regex\" or \"String\" member");
    }
    const Json* behavior = member(pt, "behavior");
    if (behavior == nullptr || !behavior->is_string() || *behavior != "Isolated") {
      return src.error(key + ".behavior",
                       absl::StrCat("only \"Isolated\" is supported, got ",
                                    behavior == nullptr ? "nothing" : behavior->dump()));
    }
    if (const Json* invert = member(pt, "invert")) {
      TESSERA_ASSIGN_OR_RETURN(bool v, get_bool(src, key + ".invert", *invert));
      if (v) return src.error(key + ".invert", "true is not supported");
    }
    patterns->push_back(std::move(regex));
    return absl::OkStatus();
  }
  if (type == "Digits") {
    bool individual = false;
    if (const Json* d = member(pt, "individual_digits")) {
      TESSERA_ASSIGN_OR_RETURN(bool v, get_bool(src, key + ".individual_digits", *d));
      individual = v;
    }
    // HF tests char::is_numeric, i.e. Unicode N (Nd, Nl, No): the same set as \p{N}.
    patterns->emplace_back(individual ? R"(\p{N})" : R"(\p{N}+)");
    return absl::OkStatus();
  }
  if (type == "Punctuation") {
    const Json* behavior = member(pt, "behavior");
    if (behavior != nullptr && *behavior != "Isolated") {
      return src.error(key + ".behavior",
                       absl::StrCat("only \"Isolated\" is supported, got ", behavior->dump()));
    }
    // HF's is_punctuation: ASCII punctuation or Unicode P; each character is its own piece.
    patterns->emplace_back(R"([\p{P}!-/:-@\[-`{-~])");
    return absl::OkStatus();
  }
  return src.error(key + ".type", absl::StrFormat("pre-tokenizer type \"%s\" is not supported "
                                                  "(supported: ByteLevel, Split, Digits, "
                                                  "Punctuation, Sequence)",
                                                  type));
}

absl::Status check_normalizer(const Source& src, const std::string& key, const Json& n) {
  if (!n.is_object()) return src.type_error(key, "an object", n);
  const Json* type = member(n, "type");
  if (type == nullptr || !type->is_string()) return src.error(key + ".type", "expected a string");
  if (*type == "NFC") return absl::OkStatus();
  if (*type == "Sequence") {
    const Json* list = member(n, "normalizers");
    if (list == nullptr || !list->is_array()) {
      return src.error(key + ".normalizers", "expected an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      TESSERA_RETURN_IF_ERROR(
          check_normalizer(src, absl::StrCat(key, ".normalizers[", i, "]"), (*list)[i]));
    }
    return absl::OkStatus();
  }
  return src.error(key + ".type",
                   absl::StrFormat("normalizer \"%s\" is not supported (only null or NFC)",
                                   type->get<std::string>()));
}

absl::Status check_decoder(const Source& src, const std::string& key, const Json& d) {
  if (!d.is_object()) return src.type_error(key, "an object", d);
  const Json* type = member(d, "type");
  if (type == nullptr || !type->is_string()) return src.error(key + ".type", "expected a string");
  if (*type == "ByteLevel") return absl::OkStatus();
  if (*type == "Sequence") {
    const Json* list = member(d, "decoders");
    if (list == nullptr || !list->is_array())
      return src.error(key + ".decoders", "expected an array");
    for (size_t i = 0; i < list->size(); ++i) {
      TESSERA_RETURN_IF_ERROR(
          check_decoder(src, absl::StrCat(key, ".decoders[", i, "]"), (*list)[i]));
    }
    return absl::OkStatus();
  }
  return src.error(key + ".type",
                   absl::StrFormat("decoder \"%s\" is not supported (byte-level BPE decodes with "
                                   "ByteLevel)",
                                   type->get<std::string>()));
}

absl::Status parse_post_processor(const Source& src, const std::string& key, const Json& pp,
                                  PostProcessing* out) {
  if (!pp.is_object()) return src.type_error(key, "an object", pp);
  const Json* type = member(pp, "type");
  if (type == nullptr || !type->is_string()) return src.error(key + ".type", "expected a string");
  if (*type == "ByteLevel") return absl::OkStatus();  // offsets only; ids unchanged
  if (*type == "Sequence") {
    const Json* list = member(pp, "processors");
    if (list == nullptr || !list->is_array()) {
      return src.error(key + ".processors", "expected an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      TESSERA_RETURN_IF_ERROR(
          parse_post_processor(src, absl::StrCat(key, ".processors[", i, "]"), (*list)[i], out));
    }
    return absl::OkStatus();
  }
  if (*type != "TemplateProcessing") {
    return src.error(key + ".type",
                     absl::StrFormat("post-processor \"%s\" is not supported (ByteLevel, "
                                     "TemplateProcessing, Sequence)",
                                     type->get<std::string>()));
  }
  const Json* single = member(pp, "single");
  if (single == nullptr || !single->is_array())
    return src.error(key + ".single", "expected an array");
  std::vector<std::string> before, after;
  bool saw_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const std::string item_key = absl::StrCat(key, ".single[", i, "]");
    const Json& item = (*single)[i];
    if (member(item, "Sequence") != nullptr) {
      if (saw_sequence) return src.error(item_key, "more than one sequence in \"single\"");
      saw_sequence = true;
      continue;
    }
    const Json* special = member(item, "SpecialToken");
    if (special == nullptr) return src.error(item_key, "expected SpecialToken or Sequence");
    const Json* id = member(*special, "id");
    if (id == nullptr || !id->is_string())
      return src.error(item_key + ".SpecialToken.id", "expected a string");
    (saw_sequence ? after : before).push_back(id->get<std::string>());
  }
  if (before.size() > 1 || after.size() > 1) {
    return src.error(key + ".single", "more than one special token on a side is not supported");
  }
  if (!before.empty()) out->prefix = before[0];
  if (!after.empty()) out->suffix = after[0];
  return absl::OkStatus();
}

// Reads tokenizer.json into `vocab`; `ids` gets every token's id for later look-ups.
absl::Status parse_tokenizer_json(const Source& src, const Json& root, Vocab* vocab,
                                  std::unordered_map<std::string, int32_t>* ids,
                                  PostProcessing* post, bool* ignore_merges) {
  const Json* model = member(root, "model");
  if (model == nullptr) return src.error("model", "missing");
  if (!model->is_object()) return src.type_error("model", "an object", *model);
  if (const Json* type = member(*model, "type")) {
    if (!type->is_string()) return src.type_error("model.type", "a string", *type);
    if (*type != "BPE") {
      return src.error("model.type", absl::StrFormat("\"%s\" is not supported (only \"BPE\")",
                                                     type->get<std::string>()));
    }
  }
  if (const Json* bf = member(*model, "byte_fallback")) {
    TESSERA_ASSIGN_OR_RETURN(bool v, get_bool(src, "model.byte_fallback", *bf));
    if (v) return src.error("model.byte_fallback", "true is not supported (byte-level BPE only)");
  }
  if (const Json* dropout = member(*model, "dropout")) {
    if (!dropout->is_number()) return src.type_error("model.dropout", "a number or null", *dropout);
    if (dropout->get<double>() > 0)
      return src.error("model.dropout", "BPE dropout is not supported");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const Json* v = member(*model, key);
    if (v != nullptr && !(v->is_string() && v->get<std::string>().empty())) {
      return src.error(absl::StrCat("model.", key), "is not supported");
    }
  }
  if (const Json* im = member(*model, "ignore_merges")) {
    TESSERA_ASSIGN_OR_RETURN(bool v, get_bool(src, "model.ignore_merges", *im));
    *ignore_merges = v;
  }

  // Tokens: model.vocab plus added_tokens, indexed by id.
  const Json* vocab_json = member(*model, "vocab");
  if (vocab_json == nullptr) return src.error("model.vocab", "missing");
  if (!vocab_json->is_object()) return src.type_error("model.vocab", "an object", *vocab_json);
  struct Entry {
    std::string text;
    TokenType type;
  };
  std::unordered_map<int32_t, Entry> by_id;
  int32_t max_id = -1;
  for (const auto& [text, id_json] : vocab_json->items()) {
    TESSERA_ASSIGN_OR_RETURN(int32_t id,
                             get_id(src, absl::StrCat("model.vocab[\"", text, "\"]"), id_json));
    if (!by_id.emplace(id, Entry{text, TokenType::kNormal}).second) {
      return src.error("model.vocab", absl::StrFormat("id %d is used twice (\"%s\" and \"%s\")", id,
                                                      by_id[id].text, text));
    }
    max_id = std::max(max_id, id);
  }
  if (const Json* added = member(root, "added_tokens")) {
    if (!added->is_array()) return src.type_error("added_tokens", "an array", *added);
    for (size_t i = 0; i < added->size(); ++i) {
      const std::string key = absl::StrCat("added_tokens[", i, "]");
      const Json& tok = (*added)[i];
      if (!tok.is_object()) return src.type_error(key, "an object", tok);
      const Json* id_json = member(tok, "id");
      const Json* content_json = member(tok, "content");
      if (id_json == nullptr) return src.error(key + ".id", "missing");
      if (content_json == nullptr) return src.error(key + ".content", "missing");
      TESSERA_ASSIGN_OR_RETURN(int32_t id, get_id(src, key + ".id", *id_json));
      TESSERA_ASSIGN_OR_RETURN(std::string content,
                               get_string(src, key + ".content", *content_json));
      bool special = false;
      if (const Json* sp = member(tok, "special")) {
        TESSERA_ASSIGN_OR_RETURN(bool v, get_bool(src, key + ".special", *sp));
        special = v;
      }
      // An added token may restate a model token (same id); its added-token type wins.
      by_id[id] = Entry{content, special ? TokenType::kControl : TokenType::kUserDefined};
      max_id = std::max(max_id, id);
    }
  }
  if (max_id < 0) return src.error("model.vocab", "is empty");
  // Ids index a dense table: a stray huge id in a hostile file must not allocate gigabytes.
  if (static_cast<size_t>(max_id) >= 2 * by_id.size() + 1024) {
    return src.error("model.vocab", absl::StrFormat("ids go up to %d but there are only %d tokens",
                                                    max_id, by_id.size()));
  }
  // Ids nobody uses (rare) stay as empty, unused placeholders so that ids keep their meaning.
  vocab->tokens.assign(static_cast<size_t>(max_id) + 1, std::string());
  vocab->types.assign(static_cast<size_t>(max_id) + 1, TokenType::kUnused);
  for (auto& [id, entry] : by_id) {
    vocab->tokens[id] = std::move(entry.text);
    vocab->types[id] = entry.type;
  }
  for (int32_t id = 0; id <= max_id; ++id) {
    if (!vocab->tokens[id].empty()) ids->emplace(vocab->tokens[id], id);
  }

  // Merges: "left right" strings (older files) or [left, right] pairs (tokenizers >= 0.20).
  const Json* merges = member(*model, "merges");
  if (merges == nullptr) return src.error("model.merges", "missing");
  if (!merges->is_array()) return src.type_error("model.merges", "an array", *merges);
  vocab->merges.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const std::string key = absl::StrCat("model.merges[", i, "]");
    const Json& m = (*merges)[i];
    if (m.is_string()) {
      vocab->merges.push_back(m.get<std::string>());
      continue;
    }
    if (!m.is_array() || m.size() != 2 || !m[0].is_string() || !m[1].is_string()) {
      return src.error(key, "expected \"left right\" or [\"left\", \"right\"]");
    }
    const std::string left = m[0].get<std::string>();
    const std::string right = m[1].get<std::string>();
    if (left.find(' ') != std::string::npos || right.find(' ') != std::string::npos) {
      return src.error(key, "a merge part contains a space, which byte-level BPE never has");
    }
    vocab->merges.push_back(absl::StrCat(left, " ", right));
  }

  if (const Json* normalizer = member(root, "normalizer")) {
    TESSERA_RETURN_IF_ERROR(check_normalizer(src, "normalizer", *normalizer));
  }
  if (const Json* decoder = member(root, "decoder")) {
    TESSERA_RETURN_IF_ERROR(check_decoder(src, "decoder", *decoder));
  }

  bool saw_byte_level = false;
  if (const Json* pt = member(root, "pre_tokenizer")) {
    TESSERA_RETURN_IF_ERROR(
        parse_pre_tokenizer(src, "pre_tokenizer", *pt, &vocab->pre_regexes, &saw_byte_level));
  }
  if (vocab->pre_regexes.empty()) {
    // No splitting at all: the whole text is one BPE word. (Vocab treats an empty list as
    // "use the named pre-tokenizer", so say it with a pattern.)
    vocab->pre_regexes.emplace_back(R"([\s\S]+)");
  }
  if (const Json* pp = member(root, "post_processor")) {
    TESSERA_RETURN_IF_ERROR(parse_post_processor(src, "post_processor", *pp, post));
  }
  return absl::OkStatus();
}

// --- tokenizer_config.json and generation_config.json --------------------------------------------

absl::StatusOr<int32_t> resolve_token(const Source& src, std::string_view key,
                                      const std::string& text,
                                      const std::unordered_map<std::string, int32_t>& ids) {
  auto it = ids.find(text);
  if (it == ids.end()) {
    return src.error(key, absl::StrFormat("\"%s\" is not in the vocab", text));
  }
  return it->second;
}

absl::Status parse_tokenizer_config(const Source& src, const Json& root,
                                    const std::unordered_map<std::string, int32_t>& ids,
                                    Vocab* vocab) {
  if (const Json* tmpl = member(root, "chat_template")) {
    if (tmpl->is_string()) {
      vocab->chat_template = tmpl->get<std::string>();
    } else if (tmpl->is_array()) {
      // Named templates: "default" is the one used for plain chat; else the first one.
      for (size_t i = 0; i < tmpl->size(); ++i) {
        const std::string key = absl::StrCat("chat_template[", i, "]");
        const Json* name = member((*tmpl)[i], "name");
        const Json* source = member((*tmpl)[i], "template");
        if (name == nullptr || !name->is_string())
          return src.error(key + ".name", "expected a string");
        if (source == nullptr || !source->is_string()) {
          return src.error(key + ".template", "expected a string");
        }
        if (i == 0 || *name == "default") vocab->chat_template = source->get<std::string>();
        if (*name == "default") break;
      }
    } else {
      return src.type_error("chat_template", "a string or a list of {name, template}", *tmpl);
    }
  }
  const std::pair<const char*, int32_t*> named[] = {{"bos_token", &vocab->bos_id},
                                                    {"eos_token", &vocab->eos_id},
                                                    {"unk_token", &vocab->unk_id},
                                                    {"pad_token", &vocab->pad_id}};
  for (const auto& [key, slot] : named) {
    TESSERA_ASSIGN_OR_RETURN(std::optional<std::string> text, get_token_content(src, key, root));
    if (!text.has_value()) continue;
    TESSERA_ASSIGN_OR_RETURN(int32_t id, resolve_token(src, key, *text, ids));
    *slot = id;
  }
  if (const Json* v = member(root, "add_bos_token")) {
    TESSERA_ASSIGN_OR_RETURN(bool b, get_bool(src, "add_bos_token", *v));
    vocab->add_bos = b;
  }
  if (const Json* v = member(root, "add_eos_token")) {
    TESSERA_ASSIGN_OR_RETURN(bool b, get_bool(src, "add_eos_token", *v));
    vocab->add_eos = b;
  }
  return absl::OkStatus();
}

absl::Status parse_generation_config(const Source& src, const Json& root, Vocab* vocab) {
  if (const Json* eos = member(root, "eos_token_id")) {
    std::vector<int32_t> ids;
    if (eos->is_array()) {
      for (size_t i = 0; i < eos->size(); ++i) {
        TESSERA_ASSIGN_OR_RETURN(int32_t id,
                                 get_id(src, absl::StrCat("eos_token_id[", i, "]"), (*eos)[i]));
        ids.push_back(id);
      }
    } else {
      TESSERA_ASSIGN_OR_RETURN(int32_t id, get_id(src, "eos_token_id", *eos));
      ids.push_back(id);
    }
    for (int32_t id : ids) {
      if (id >= static_cast<int32_t>(vocab->tokens.size())) {
        return src.error("eos_token_id", absl::StrFormat("id %d is not in the vocab (%d tokens)",
                                                         id, vocab->tokens.size()));
      }
      vocab->stop_ids.push_back(id);
    }
    if (vocab->eos_id < 0 && !ids.empty()) vocab->eos_id = ids[0];
  }
  if (const Json* bos = member(root, "bos_token_id"); bos != nullptr && vocab->bos_id < 0) {
    TESSERA_ASSIGN_OR_RETURN(int32_t id, get_id(src, "bos_token_id", *bos));
    if (id >= static_cast<int32_t>(vocab->tokens.size())) {
      return src.error("bos_token_id", absl::StrFormat("id %d is not in the vocab", id));
    }
    vocab->bos_id = id;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Vocab> vocab_from_hf_dir(const std::string& dir) {
  const fs::path root(dir);
  Vocab vocab;
  vocab.model = "gpt2";
  vocab.pre = "";
  std::unordered_map<std::string, int32_t> ids;
  PostProcessing post;
  bool ignore_merges = false;

  // Anything nlohmann throws that the checks above did not anticipate still becomes a status
  // naming the file: exceptions must not leave the tokenizer module.
  Source src{(root / "tokenizer.json").string()};
  try {
    TESSERA_ASSIGN_OR_RETURN(std::optional<Json> tokenizer_json,
                             read_json(src.path, /*required=*/true));
    TESSERA_RETURN_IF_ERROR(
        parse_tokenizer_json(src, *tokenizer_json, &vocab, &ids, &post, &ignore_merges));

    // What the post-processor adds is what HF adds; tokenizer_config.json may override it.
    if (post.prefix) {
      TESSERA_ASSIGN_OR_RETURN(int32_t id, resolve_token(src, "post_processor", *post.prefix, ids));
      vocab.bos_id = id;
      vocab.add_bos = true;
    }
    if (post.suffix) {
      TESSERA_ASSIGN_OR_RETURN(int32_t id, resolve_token(src, "post_processor", *post.suffix, ids));
      vocab.eos_id = id;
      vocab.add_eos = true;
    }

    src.path = (root / "tokenizer_config.json").string();
    TESSERA_ASSIGN_OR_RETURN(std::optional<Json> config, read_json(src.path, /*required=*/false));
    if (config.has_value()) {
      const int32_t post_bos = vocab.bos_id, post_eos = vocab.eos_id;
      TESSERA_RETURN_IF_ERROR(parse_tokenizer_config(src, *config, ids, &vocab));
      // Vocab adds BOS/EOS by id, so the post-processor's token and the named one must agree.
      if (post.prefix && vocab.add_bos && vocab.bos_id != post_bos) {
        return src.error(
            "bos_token",
            absl::StrFormat("names token %d but tokenizer.json's post_processor adds \"%s\" (%d)",
                            vocab.bos_id, *post.prefix, post_bos));
      }
      if (post.suffix && vocab.add_eos && vocab.eos_id != post_eos) {
        return src.error(
            "eos_token",
            absl::StrFormat("names token %d but tokenizer.json's post_processor adds \"%s\" (%d)",
                            vocab.eos_id, *post.suffix, post_eos));
      }
    }

    src.path = (root / "generation_config.json").string();
    TESSERA_ASSIGN_OR_RETURN(std::optional<Json> generation,
                             read_json(src.path, /*required=*/false));
    if (generation.has_value()) {
      TESSERA_RETURN_IF_ERROR(parse_generation_config(src, *generation, &vocab));
    }
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(src.path, ": ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(src.path, ": ", e.what()));
  }

  vocab.ignore_merges = ignore_merges;

  if (vocab.eos_id >= 0) vocab.stop_ids.push_back(vocab.eos_id);
  add_end_of_turn_stop_ids(vocab);
  return vocab;
}

}  // namespace tessera
