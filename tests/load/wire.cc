#include "tests/load/wire.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "common/api/kube_proto.h"
#include "common/api/protowire.h"
#include "common/api/upstream_list.h"
#include "common/strings.h"

namespace kf::load {
namespace {

std::optional<uint64_t> DigitsAt(std::string_view s, size_t i) {
  uint64_t v = 0;
  const size_t start = i;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (i - start >= 19) return std::nullopt;  // Beyond what fits in uint64_t safely.
    v = v * 10 + static_cast<uint64_t>(s[i] - '0');
  }
  if (i == start) return std::nullopt;
  return v;
}

}  // namespace

std::string QueryEscape(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out.push_back(c);
    } else if (c == ' ') {
      out.push_back('+');
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

std::string Query(std::vector<std::pair<std::string_view, std::string>> params) {
  std::sort(params.begin(), params.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out;
  for (const auto& [key, value] : params) {
    if (value.empty()) continue;
    out.append(out.empty() ? "?" : "&");
    out.append(key);
    out.push_back('=');
    out.append(QueryEscape(value));
  }
  return out;
}

std::optional<uint64_t> EventResourceVersion(std::string_view line) {
  if (!line.empty() && line[0] == '\x0a') {  // A protobuf WatchEvent.
    ProtoWatchEvent ev;
    std::string_view meta, rv;
    uint64_t n = 0;
    if (!ParseProtoWatchEvent(line, &ev) || !FindBytesField(ev.object.raw, 1, &meta) ||
        !FindBytesField(meta, 6, &rv) || !absl::SimpleAtoi(ToAbsl(rv), &n)) {
      return std::nullopt;
    }
    return n;
  }
  static constexpr std::string_view kMeta = "\"metadata\":{";
  static constexpr std::string_view kRv = "\"resourceVersion\":\"";
  const size_t meta = line.find(kMeta);
  if (meta == std::string_view::npos) return std::nullopt;
  const size_t rv = line.find(kRv, meta + kMeta.size());
  if (rv == std::string_view::npos) return std::nullopt;
  const size_t at = rv + kRv.size();
  auto v = DigitsAt(line, at);
  // The value must be the whole string, not a prefix of something else.
  if (!v) return std::nullopt;
  const size_t end = line.find('"', at);
  if (end == std::string_view::npos || end - at != std::to_string(*v).size()) return std::nullopt;
  return v;
}

std::optional<int> EventErrorCode(std::string_view line) {
  if (!line.empty() && line[0] == '\x0a') {  // A protobuf WatchEvent with a Status.
    ProtoWatchEvent ev;
    if (!ParseProtoWatchEvent(line, &ev)) return std::nullopt;
    const int code = ProtoStatusCode(ev.object.raw);
    return code != 0 ? std::optional<int>(code) : std::nullopt;
  }
  static constexpr std::string_view kCode = "\"code\":";
  const size_t at = line.find(kCode);
  if (at != std::string_view::npos) {
    if (auto v = DigitsAt(line, at + kCode.size()); v && *v < 1000) return static_cast<int>(*v);
  }
  if (line.find("\"reason\":\"Expired\"") != std::string_view::npos ||
      line.find("\"reason\":\"Gone\"") != std::string_view::npos) {
    return 410;
  }
  return std::nullopt;
}

std::chrono::milliseconds BackoffDelay(int attempt, double jitter) {
  constexpr double kBaseMs = 800, kCapMs = 30000;
  const double base = std::min(kCapMs, kBaseMs * std::pow(2.0, std::clamp(attempt, 0, 30)));
  const double stretched = base * (1 + std::clamp(jitter, 0.0, 0.999999));
  return std::chrono::milliseconds(static_cast<int64_t>(stretched));
}

}  // namespace kf::load
