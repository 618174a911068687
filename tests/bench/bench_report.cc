#include "tests/bench/bench_report.h"

#include <algorithm>
#include <cstdarg>

namespace kf::bench {

std::string Fmt(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out(static_cast<size_t>(std::max(n, 0)), '\0');
  std::vsnprintf(out.data(), out.size() + 1, format, args);
  va_end(args);
  return out;
}

void BenchReport::Print(std::FILE* out) const {
  size_t width = 7;
  for (const auto& [measure, value] : rows_) width = std::max(width, measure.size());
  std::fprintf(out, "| %-*s | value |\n|%s|---|\n", static_cast<int>(width), "measure",
               std::string(width + 2, '-').c_str());
  for (size_t i = 0; i < rows_.size(); ++i) {
    const bool section = std::find(sections_.begin(), sections_.end(), i) != sections_.end();
    if (section) {
      std::fprintf(out, "| **%s**%*s |  |\n", rows_[i].first.c_str(),
                   static_cast<int>(width - std::min(width, rows_[i].first.size() + 4)), "");
    } else {
      std::fprintf(out, "| %-*s | %s |\n", static_cast<int>(width), rows_[i].first.c_str(),
                   rows_[i].second.c_str());
    }
  }
  for (const auto& b : blocks_) std::fprintf(out, "\n%s", b.c_str());
  if (!notes_.empty()) std::fprintf(out, "\n");
  for (const auto& n : notes_) std::fprintf(out, "- %s\n", n.c_str());
  std::fprintf(out, "\nRESULT");
  for (const auto& [key, value] : results_) std::fprintf(out, " %s=%s", key.c_str(), value.c_str());
  std::fprintf(out, "\n");
  std::fflush(out);
}

}  // namespace kf::bench
