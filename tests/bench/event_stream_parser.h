// EventStreamParser: reads one watch response as its bytes arrive, in any split: the status line
// and headers, then the chunked transfer coding, then the newline-delimited JSON events inside
// it. Hands each complete event line to a callback without copying it unless the line straddles
// a read or a chunk boundary. It does not parse JSON (see EventFields for the cheap look-ups).
//
// One parser per connection; not thread-safe.
#ifndef KUBE_FANOUT_TESTS_BENCH_EVENT_STREAM_PARSER_H_
#define KUBE_FANOUT_TESTS_BENCH_EVENT_STREAM_PARSER_H_

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace kf::bench {

class EventStreamParser {
 public:
  enum class State {
    kHead,
    kChunkSize,
    kChunkExtension,
    kChunkSizeLf,
    kData,
    kDataCr,
    kDataLf,
    kDone,
    kError
  };

  // Consumes `data`; calls on_line(std::string_view) per complete event line (without its
  // newline). Returns false once the stream is finished or broken (see state() and error()).
  template <typename OnLine>
  bool Feed(std::string_view data, OnLine&& on_line);

  State state() const { return state_; }
  bool head_done() const { return state_ != State::kHead; }
  int status() const { return status_; }
  const std::string& error() const { return error_; }
  // The first bytes of a non-200 response (for the report).
  const std::string& head() const { return head_; }

 private:
  static constexpr size_t kMaxHead = 16 << 10;
  static constexpr size_t kMaxLine = 64 << 20;

  // Returns the number of bytes of `data` the head took; sets state_.
  size_t FeedHead(std::string_view data);
  bool Fail(std::string message);
  template <typename OnLine>
  bool FeedData(std::string_view seg, OnLine& on_line);

  State state_ = State::kHead;
  int status_ = 0;
  uint64_t chunk_left_ = 0;
  int size_digits_ = 0;
  std::string head_;
  std::string line_;  // Start of an event line that has not ended yet.
  std::string error_;
};

// Cheap field look-ups on one watch event line ({"type":"...","object":{...}}).
struct EventFields {
  // The first letter of the type (A, M, D, B for BOOKMARK, E for ERROR); 0 if not an event.
  static char TypeLetter(std::string_view line);
  // The decimal value of the string annotation `key` ("key":"123"), if present.
  static std::optional<int64_t> Annotation(std::string_view line, std::string_view quoted_key);
};

template <typename OnLine>
bool EventStreamParser::Feed(std::string_view data, OnLine&& on_line) {
  while (!data.empty()) {
    switch (state_) {
      case State::kHead: {
        data.remove_prefix(FeedHead(data));
        break;
      }
      case State::kChunkSize: {
        const char c = data.front();
        int digit = -1;
        if (c >= '0' && c <= '9') digit = c - '0';
        if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
        if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
        if (digit >= 0) {
          if (++size_digits_ > 15) return Fail("chunk size too long");
          chunk_left_ = chunk_left_ * 16 + static_cast<uint64_t>(digit);
        } else if (size_digits_ > 0 && c == ';') {
          state_ = State::kChunkExtension;
        } else if (size_digits_ > 0 && c == '\r') {
          state_ = State::kChunkSizeLf;
        } else {
          return Fail("bad chunk size");
        }
        data.remove_prefix(1);
        break;
      }
      case State::kChunkExtension: {
        const size_t cr = data.find('\r');
        if (cr == std::string_view::npos) return true;  // Extension continues in the next read.
        state_ = State::kChunkSizeLf;
        data.remove_prefix(cr + 1);
        break;
      }
      case State::kChunkSizeLf: {
        if (data.front() != '\n') return Fail("chunk size line without LF");
        data.remove_prefix(1);
        size_digits_ = 0;
        if (chunk_left_ == 0) {
          state_ = State::kDone;  // Trailers, if any, are of no interest.
          return false;
        }
        state_ = State::kData;
        break;
      }
      case State::kData: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_left_, data.size()));
        if (!FeedData(data.substr(0, n), on_line)) return false;
        data.remove_prefix(n);
        chunk_left_ -= n;
        if (chunk_left_ == 0) state_ = State::kDataCr;
        break;
      }
      case State::kDataCr:
      case State::kDataLf: {
        const char want = state_ == State::kDataCr ? '\r' : '\n';
        if (data.front() != want) return Fail("chunk data without CRLF");
        data.remove_prefix(1);
        state_ = state_ == State::kDataCr ? State::kDataLf : State::kChunkSize;
        break;
      }
      case State::kDone:
      case State::kError:
        return false;
    }
    if (state_ == State::kError || state_ == State::kDone) return false;
  }
  return state_ != State::kError && state_ != State::kDone;
}

template <typename OnLine>
bool EventStreamParser::FeedData(std::string_view seg, OnLine& on_line) {
  while (!seg.empty()) {
    const void* nl = std::memchr(seg.data(), '\n', seg.size());
    if (nl == nullptr) {
      if (line_.size() + seg.size() > kMaxLine) return Fail("event line too long");
      line_.append(seg);
      return true;
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
  return true;
}

}  // namespace kf::bench

#endif  // KUBE_FANOUT_TESTS_BENCH_EVENT_STREAM_PARSER_H_
