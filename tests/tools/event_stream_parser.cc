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
  static constexpr std::string_view kPrefix = "{\"type\":\"";
  if (line.size() <= kPrefix.size() || line.substr(0, kPrefix.size()) != kPrefix) return 0;
  return line[kPrefix.size()];
}

std::optional<int64_t> EventFields::Annotation(std::string_view line, std::string_view quoted_key) {
  // quoted_key is "\"key\":\""; managedFields spell it "f:key", so it never matches there.
  const size_t at = line.find(quoted_key);
  if (at == std::string_view::npos) return std::nullopt;
  int64_t v = 0;
  size_t i = at + quoted_key.size();
  const size_t start = i;
  for (; i < line.size() && line[i] >= '0' && line[i] <= '9' && i - start < 19; ++i) {
    v = v * 10 + (line[i] - '0');
  }
  if (i == start || i >= line.size() || line[i] != '"') return std::nullopt;
  return v;
}

}  // namespace kf::tools
