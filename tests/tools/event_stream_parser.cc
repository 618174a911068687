#include "tests/tools/event_stream_parser.h"

#include <utility>

namespace kf::tools {

bool EventStreamParser::Fail(std::string message) {
  state_ = State::kError;
  error_ = std::move(message);
  return false;
}

bool EventStreamParser::OnHead() {
  if (reader_.failed()) return Fail(reader_.error());
  if (reader_.status() != 200) return Fail("HTTP status " + std::to_string(reader_.status()));
  if (!reader_.chunked()) return Fail("response is not chunked");
  state_ = State::kEvents;
  return true;
}

char EventFields::TypeLetter(std::string_view line) {
  // Protobuf: field 1 (tag 0x0a), a one-byte length, the type.
  if (line.size() > 2 && line[0] == '\x0a') return line[2];
  static constexpr std::string_view kPrefix = "{\"type\":\"";
  if (line.size() <= kPrefix.size() || line.substr(0, kPrefix.size()) != kPrefix) return 0;
  return line[kPrefix.size()];
}

std::optional<int64_t> EventFields::Annotation(std::string_view line, std::string_view quoted_key) {
  size_t at = std::string_view::npos, i = 0;
  if (!line.empty() && line[0] == '\x0a' && quoted_key.size() > 4 && quoted_key.size() < 130) {
    // Protobuf: the map entry's key (tag 0x0a, its length, the key), then the value's tag 0x12
    // and one-byte length. managedFields hold "f:key", which the length byte rules out.
    const std::string_view key = quoted_key.substr(1, quoted_key.size() - 4);
    std::string pattern;
    pattern.push_back('\x0a');
    pattern.push_back(static_cast<char>(key.size()));
    pattern.append(key);
    pattern.push_back('\x12');
    at = line.find(pattern);
    if (at == std::string_view::npos || at + pattern.size() >= line.size()) return std::nullopt;
    i = at + pattern.size() + 1;  // Past the value's length.
  } else {
    // quoted_key is "\"key\":\""; managedFields spell it "f:key", so it never matches there.
    at = line.find(quoted_key);
    if (at == std::string_view::npos) return std::nullopt;
    i = at + quoted_key.size();
  }
  int64_t v = 0;
  const size_t start = i;
  for (; i < line.size() && line[i] >= '0' && line[i] <= '9' && i - start < 19; ++i) {
    v = v * 10 + (line[i] - '0');
  }
  if (i == start) return std::nullopt;
  if (line[0] == '{' && (i >= line.size() || line[i] != '"')) return std::nullopt;
  return v;
}

}  // namespace kf::tools
