// Writer: the Prometheus text exposition format (version 0.0.4) that each component's
// Render*Metrics writes: families, samples, escaped label values. Header-only; no state beyond the
// text being built.
#ifndef KUBE_FANOUT_COMMON_METRICS_WRITER_H_
#define KUBE_FANOUT_COMMON_METRICS_WRITER_H_

#include <charconv>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace kf::metrics {

// A label value in the text exposition format: \, " and newline escaped (names from
// configuration files and discovery must not break a scrape).
inline std::string Label(std::string_view name, std::string_view value) {
  std::string out = absl::StrCat(ToAbsl(name), "=\"");
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

class Writer {
 public:
  void Family(std::string_view name, std::string_view type, std::string_view help) {
    absl::StrAppend(&out_, "# HELP ", ToAbsl(name), " ", ToAbsl(help), "\n# TYPE ", ToAbsl(name),
                    " ", ToAbsl(type), "\n");
  }
  // The value in the shortest form that reads back exactly (as Go's client writes it):
  // StrCat's six significant digits would round a resourceVersion or a byte counter.
  void Sample(std::string_view name, std::string_view labels, double value) {
    char digits[32];
    const auto end = std::to_chars(digits, digits + sizeof(digits), value).ptr;
    absl::StrAppend(&out_, ToAbsl(name), labels.empty() ? "" : "{", ToAbsl(labels),
                    labels.empty() ? "" : "}", " ", absl::string_view(digits, end - digits), "\n");
  }
  // A family of one sample, without labels.
  void Single(std::string_view name, std::string_view type, std::string_view help, double value) {
    Family(name, type, help);
    Sample(name, "", value);
  }
  // A family whose samples differ by one label: {label="value"} per (value, sample).
  void ByLabel(std::string_view name, std::string_view type, std::string_view help,
               std::string_view label,
               std::initializer_list<std::pair<std::string_view, double>> samples) {
    Family(name, type, help);
    for (const auto& [value, sample] : samples) {
      Sample(name, absl::StrCat(ToAbsl(label), "=\"", ToAbsl(value), "\""), sample);
    }
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace kf::metrics

#endif  // KUBE_FANOUT_COMMON_METRICS_WRITER_H_
