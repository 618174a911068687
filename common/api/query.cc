#include "common/api/query.h"

#include <algorithm>

#include "absl/strings/str_split.h"
#include "common/strings.h"

namespace kf {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> Unescape(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      const int hi = HexValue(s[i + 1]);
      const int lo = HexValue(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> QueryUnescape(std::string_view s) { return Unescape(s, true); }
std::optional<std::string> PathUnescape(std::string_view s) { return Unescape(s, false); }

Query Query::Parse(std::string_view raw) {
  Query q;
  // Go's url.ParseQuery (the apiserver's) gives up on more than 10,000 parameters and the
  // apiserver then reads the query as empty: so does kube-fanout (the count bounded as well).
  if (std::count(raw.begin(), raw.end(), '&') + 1 > kMaxParams) return q;
  for (absl::string_view piece_absl : absl::StrSplit(ToAbsl(raw), '&')) {
    const std::string_view piece = ToStd(piece_absl);
    if (piece.empty() || piece.find(';') != std::string_view::npos) continue;
    std::string_view key = piece;
    std::string_view value;
    if (size_t eq = piece.find('='); eq != std::string_view::npos) {
      key = piece.substr(0, eq);
      value = piece.substr(eq + 1);
    }
    auto k = QueryUnescape(key);
    auto v = QueryUnescape(value);
    if (!k || !v) continue;
    q.pairs_.emplace_back(std::move(*k), std::move(*v));
  }
  return q;
}

std::optional<std::string_view> Query::First(std::string_view key) const {
  for (const auto& [k, v] : pairs_) {
    if (k == key) return std::string_view(v);
  }
  return std::nullopt;
}

std::optional<bool> ParseGoBool(std::string_view s) {
  if (s == "1" || s == "t" || s == "T" || s == "TRUE" || s == "true" || s == "True") return true;
  if (s == "0" || s == "f" || s == "F" || s == "FALSE" || s == "false" || s == "False")
    return false;
  return std::nullopt;
}

}  // namespace kf
