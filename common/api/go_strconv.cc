#include "common/api/go_strconv.h"

namespace kf {

std::optional<uint64_t> ParseGoUint(std::string_view s) {
  if (s.empty()) return std::nullopt;
  uint64_t n = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<uint64_t>(c - '0');
    if (n > (UINT64_MAX - digit) / 10) return std::nullopt;  // Go's ErrRange.
    n = n * 10 + digit;
  }
  return n;
}

std::optional<int64_t> ParseGoInt(std::string_view s) {
  const bool negative = !s.empty() && s.front() == '-';
  if (!s.empty() && (s.front() == '+' || s.front() == '-')) s.remove_prefix(1);
  const std::optional<uint64_t> n = ParseGoUint(s);
  if (!n) return std::nullopt;
  const auto max = static_cast<uint64_t>(INT64_MAX);
  if (negative) {
    if (*n > max + 1) return std::nullopt;
    return *n == max + 1 ? INT64_MIN : -static_cast<int64_t>(*n);
  }
  if (*n > max) return std::nullopt;
  return static_cast<int64_t>(*n);
}

}  // namespace kf
