#include "common/api/watch_framing.h"

#include <algorithm>
#include <string>

namespace kf {

WatchFraming::Format WatchFraming::ForContentType(std::string_view content_type) {
  if (content_type.find("application/json") != std::string_view::npos) return Format::kJsonLines;
  if (content_type.find("application/vnd.kubernetes.protobuf") != std::string_view::npos) {
    return Format::kLengthPrefixed;
  }
  return Format::kUnframed;
}

WatchFraming::Event WatchFraming::Cut(Format format, std::string_view buffer, size_t scanned) {
  Event e;
  if (format == Format::kJsonLines) {
    const size_t nl = buffer.find('\n', scanned);
    if (nl == std::string_view::npos) {
      e.size = buffer.size();
      return e;
    }
    return {true, nl, buffer.substr(0, nl), nl + 1};
  }
  if (buffer.size() < 4) return e;
  const auto* b = reinterpret_cast<const unsigned char*>(buffer.data());
  e.size = (size_t{b[0]} << 24) | (size_t{b[1]} << 16) | (size_t{b[2]} << 8) | b[3];
  if (buffer.size() - 4 >= e.size) {
    e.complete = true;
    e.bytes = buffer.substr(4, e.size);
    e.consumed = 4 + e.size;
  }
  return e;
}

bool WatchFraming::AtBoundary() const {
  switch (format_) {
    case Format::kJsonLines:
      return !line_open_;
    case Format::kLengthPrefixed:
      return header_bytes_ == 0 && payload_left_ == 0;
    case Format::kUnframed:
      return true;
  }
  return true;
}

size_t WatchFraming::PrefixToBoundary(std::string_view data) const {
  if (format_ == Format::kUnframed) return 0;
  if (format_ == Format::kJsonLines) {
    if (!line_open_) return 0;
    const size_t nl = data.find('\n');
    return nl == std::string_view::npos ? std::string_view::npos : nl + 1;
  }
  // Length-prefixed: walk a copy of the state forward until the current frame ends.
  if (AtBoundary()) return 0;
  WatchFraming probe = *this;
  for (size_t i = 0; i < data.size(); ++i) {
    probe.Consume(data.substr(i, 1));
    if (probe.AtBoundary()) return i + 1;
  }
  return std::string_view::npos;
}

void WatchFraming::Consume(std::string_view data) {
  switch (format_) {
    case Format::kUnframed:
      return;
    case Format::kJsonLines:
      if (!data.empty()) line_open_ = data.back() != '\n';
      return;
    case Format::kLengthPrefixed:
      break;
  }
  size_t i = 0;
  while (i < data.size()) {
    if (payload_left_ > 0) {
      const size_t take = static_cast<size_t>(std::min<uint64_t>(payload_left_, data.size() - i));
      payload_left_ -= take;
      i += take;
      continue;
    }
    length_ = (length_ << 8) | static_cast<uint8_t>(data[i++]);
    if (++header_bytes_ == 4) {
      payload_left_ = length_;
      header_bytes_ = 0;
      length_ = 0;
    }
  }
}

}  // namespace kf
