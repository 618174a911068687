// EventStreamParser: reads one watch response as its bytes arrive, in any split: the status line
// and headers, then the chunked transfer coding (both decoded by ResponseReader), then the
// newline-delimited JSON events inside it (or, for a protobuf watch, its length-delimited
// frames: set_protobuf). Hands each complete event line to a callback without
// copying it unless the line straddles a read or a chunk boundary. It does not parse JSON (see
// EventFields for the cheap look-ups). The watch-stream reader of both the fan-out benchmark's
// watchers and the load test's reflectors.
//
// One parser per connection; not thread-safe.
#ifndef KUBE_FANOUT_TESTS_TOOLS_EVENT_STREAM_PARSER_H_
#define KUBE_FANOUT_TESTS_TOOLS_EVENT_STREAM_PARSER_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "tests/tools/response_reader.h"

namespace kf::tools {

class EventStreamParser {
 public:
  enum class State {
    kHead,    // The status line and headers.
    kEvents,  // A 200 with a chunked body: event lines.
    kDone,    // The last chunk came: the server ended the watch.
    kError
  };

  // Consumes `data`; calls on_line(std::string_view) per complete event line (without its
  // newline). Returns false once the stream is finished or broken (see state() and error()).
  template <typename OnLine>
  bool Feed(std::string_view data, OnLine&& on_line);

  // Protobuf: events are 4-byte big-endian lengths and messages (WatchEvent); each message is
  // handed over as a "line".
  void set_protobuf(bool on) { protobuf_ = on; }
  // The transport has already framed the response (an HTTP/2 stream's DATA after a 200): Feed
  // then takes body bytes only.
  void StartBody() {
    state_ = State::kEvents;
    body_only_ = true;
  }
  State state() const { return state_; }
  bool head_done() const { return state_ != State::kHead; }
  int status() const { return reader_.status(); }
  const std::string& error() const { return error_; }
  // The response's head (for the report of a non-200 answer).
  const std::string& head() const { return reader_.head(); }

 private:
  static constexpr size_t kMaxLine = 64 << 20;

  // The head has ended: a 200 with a chunked body goes on to the events, anything else fails.
  bool OnHead();
  bool Fail(std::string message);
  template <typename OnLine>
  void FeedData(std::string_view seg, OnLine& on_line);

  State state_ = State::kHead;
  ResponseReader reader_;
  std::string line_;  // Start of an event line that has not ended yet.
  bool protobuf_ = false;
  bool body_only_ = false;
  std::string error_;
};

// Cheap field look-ups on one watch event line ({"type":"...","object":{...}}) or protobuf
// WatchEvent message ({1: type, 2: {1: object}}).
struct EventFields {
  // The first letter of the type (A, M, D, B for BOOKMARK, E for ERROR); 0 if not an event.
  static char TypeLetter(std::string_view line);
  // The decimal value of the string annotation `key` ("key":"123"), if present. In protobuf
  // the annotation is a map entry (1: key, 2: value) found by its bytes.
  static std::optional<int64_t> Annotation(std::string_view line, std::string_view quoted_key);
};

template <typename OnLine>
bool EventStreamParser::Feed(std::string_view data, OnLine&& on_line) {
  if (body_only_) {
    if (state_ == State::kEvents) FeedData(data, on_line);
    return state_ == State::kEvents;
  }
  if (state_ == State::kHead) {
    data.remove_prefix(reader_.FeedHead(data));
    if (!reader_.head_done()) return true;
    if (!OnHead()) return false;
  }
  if (state_ != State::kEvents) return false;
  reader_.Feed(data, [this, &on_line](std::string_view seg) {
    if (state_ == State::kEvents) FeedData(seg, on_line);
  });
  if (state_ == State::kError) return false;  // An event line too long.
  if (reader_.failed()) return Fail(reader_.error());
  if (reader_.body_done()) {
    state_ = State::kDone;  // Trailers, if any, are of no interest.
    return false;
  }
  return true;
}

template <typename OnLine>
void EventStreamParser::FeedData(std::string_view seg, OnLine& on_line) {
  if (protobuf_) {
    auto frame_len = [](std::string_view d) -> size_t {
      const auto* b = reinterpret_cast<const unsigned char*>(d.data());
      return (size_t{b[0]} << 24) | (size_t{b[1]} << 16) | (size_t{b[2]} << 8) | b[3];
    };
    // Whole frames straight from the segment while nothing is pending; the rest buffered.
    while (line_.empty() && seg.size() >= 4 && seg.size() >= 4 + frame_len(seg)) {
      const size_t n = frame_len(seg);
      on_line(seg.substr(4, n));
      seg.remove_prefix(4 + n);
    }
    line_.append(seg);
    while (line_.size() >= 4) {
      const size_t n = frame_len(line_);
      if (n > kMaxLine) {
        Fail("event frame too long");
        return;
      }
      if (line_.size() < 4 + n) return;
      on_line(std::string_view(line_).substr(4, n));
      line_.erase(0, 4 + n);
    }
    return;
  }
  while (!seg.empty()) {
    const void* nl = std::memchr(seg.data(), '\n', seg.size());
    if (nl == nullptr) {
      if (line_.size() + seg.size() > kMaxLine) {
        Fail("event line too long");
        return;
      }
      line_.append(seg);
      return;
    }
    const size_t len = static_cast<size_t>(static_cast<const char*>(nl) - seg.data());
    if (line_.empty()) {
      on_line(seg.substr(0, len));
    } else {
      line_.append(seg.data(), len);
      on_line(std::string_view(line_));
      line_.clear();
    }
    seg.remove_prefix(len + 1);
  }
}

}  // namespace kf::tools

#endif  // KUBE_FANOUT_TESTS_TOOLS_EVENT_STREAM_PARSER_H_
