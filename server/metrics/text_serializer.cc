#include "server/metrics/text_serializer.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace tessera::metrics {

namespace {

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not one (overlong
// forms, surrogates and code points past U+10FFFF are invalid).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

std::string escape(std::string_view in, bool quotes) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size();) {
    const char c = in[i];
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      const size_t n = utf8_sequence_length(in, i);
      if (n == 0) {
        out += kReplacementChar;
        ++i;
        continue;
      }
      out.append(in.substr(i, n));
      i += n;
      continue;
    }
    ++i;
  }
  return out;
}

void append_labels(std::string& out, const std::vector<ClientMetric::Label>& labels,
                   const char* le = nullptr) {
  if (labels.empty() && le == nullptr) return;
  out += '{';
  bool first = true;
  for (const ClientMetric::Label& label : labels) {
    if (!first) out += ',';
    first = false;
    out += label.name;
    out += "=\"";
    out += escape_label_value(label.value);
    out += '"';
  }
  if (le != nullptr) {
    if (!first) out += ',';
    out += "le=\"";
    out += le;
    out += '"';
  }
  out += '}';
}

void append_sample(std::string& out, const std::string& name, std::string_view suffix,
                   const std::vector<ClientMetric::Label>& labels, double value,
                   const char* le = nullptr) {
  out += name;
  out += suffix;
  append_labels(out, labels, le);
  out += ' ';
  out += format_metric_value(value);
  out += '\n';
}

void append_family(std::string& out, const MetricFamily& family) {
  out += "# HELP ";
  out += family.name;
  out += ' ';
  out += escape_help(family.help);
  out += "\n# TYPE ";
  out += family.name;
  out += ' ';
  out += metric_type_name(family.type);
  out += '\n';
  for (const ClientMetric& m : family.metric) {
    switch (family.type) {
      case MetricType::Counter:
        append_sample(out, family.name, "", m.label, m.counter.value);
        break;
      case MetricType::Gauge:
        append_sample(out, family.name, "", m.label, m.gauge.value);
        break;
      case MetricType::Untyped:
        append_sample(out, family.name, "", m.label, m.untyped.value);
        break;
      case MetricType::Histogram: {
        for (const ClientMetric::Bucket& b : m.histogram.bucket) {
          const std::string le = format_metric_value(b.upper_bound);
          append_sample(out, family.name, "_bucket", m.label,
                        static_cast<double>(b.cumulative_count), le.c_str());
        }
        append_sample(out, family.name, "_sum", m.label, m.histogram.sample_sum);
        append_sample(out, family.name, "_count", m.label,
                      static_cast<double>(m.histogram.sample_count));
        break;
      }
    }
  }
}

}  // namespace

std::string format_metric_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, r.ptr);
}

std::string escape_label_value(std::string_view value) {
  return escape(value, true);
}

std::string escape_help(std::string_view help) {
  return escape(help, false);
}

std::string TextSerializer::Serialize(const std::vector<MetricFamily>& families) const {
  std::vector<const MetricFamily*> sorted;
  sorted.reserve(families.size());
  for (const MetricFamily& f : families) {
    if (!f.metric.empty()) sorted.push_back(&f);
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const MetricFamily* a, const MetricFamily* b) { return a->name < b->name; });
  std::string out;
  for (const MetricFamily* f : sorted) append_family(out, *f);
  return out;
}

}  // namespace tessera::metrics
