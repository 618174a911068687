#include "tests/bench/event_stream_parser.h"

#include <algorithm>
#include <cctype>

namespace kf::bench {
namespace {

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

bool EventStreamParser::Fail(std::string message) {
  state_ = State::kError;
  error_ = std::move(message);
  return false;
}

size_t EventStreamParser::FeedHead(std::string_view data) {
  // The end of the head may straddle reads: look for it across what was kept and what came.
  const size_t kept = head_.size();
  const size_t take = std::min(data.size(), kMaxHead + 4 - std::min(kMaxHead + 4, kept));
  head_.append(data.substr(0, take));
  const size_t end = head_.find("\r\n\r\n", kept >= 3 ? kept - 3 : 0);
  if (end == std::string::npos) {
    if (head_.size() > kMaxHead) Fail("response head too long");
    return take;
  }
  const size_t consumed = end + 4 - kept;
  head_.resize(end);
  std::string_view head(head_);
  // Status line: HTTP/1.1 200 OK
  const size_t sp = head.find(' ');
  if (head.substr(0, 5) != "HTTP/" || sp == std::string_view::npos || head.size() < sp + 4) {
    Fail("bad status line");
    return consumed;
  }
  status_ = 0;
  for (size_t i = sp + 1; i < sp + 4; ++i) {
    if (head[i] < '0' || head[i] > '9') {
      Fail("bad status code");
      return consumed;
    }
    status_ = status_ * 10 + (head[i] - '0');
  }
  bool chunked = false;
  size_t pos = head.find("\r\n");
  while (pos != std::string_view::npos) {
    const size_t next = head.find("\r\n", pos + 2);
    const std::string_view field = head.substr(
        pos + 2, next == std::string_view::npos ? std::string_view::npos : next - pos - 2);
    const size_t colon = field.find(':');
    if (colon != std::string_view::npos &&
        IEquals(Trim(field.substr(0, colon)), "transfer-encoding") &&
        IEquals(Trim(field.substr(colon + 1)), "chunked")) {
      chunked = true;
    }
    pos = next;
  }
  if (status_ != 200) {
    Fail("HTTP status " + std::to_string(status_));
  } else if (!chunked) {
    Fail("response is not chunked");
  } else {
    state_ = State::kChunkSize;
  }
  return consumed;
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

}  // namespace kf::bench
