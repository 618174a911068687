// ResponseReader: reads one HTTP/1.1 response as its bytes arrive, in any split: the status line
// and headers, then a body framed by Content-Length, by the chunked transfer coding (trailers
// included, so a keep-alive connection is left at the next response), or by the end of the
// connection. The decoded body goes to a callback, piece by piece, and is not kept. The test
// tools' one HTTP/1.1 response decoder: the load agents read LISTs and GETs with it directly, and
// EventStreamParser reads watch streams with it.
//
// One reader per response; not thread-safe.
#ifndef KUBE_FANOUT_TESTS_TOOLS_RESPONSE_READER_H_
#define KUBE_FANOUT_TESTS_TOOLS_RESPONSE_READER_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

namespace kf::tools {

class ResponseReader {
 public:
  // Consumes `data`; calls on_body(std::string_view) with each piece of decoded body. Returns
  // false once the response is complete or broken (then see done() and error()). Bytes after the
  // end of the response are not consumed.
  template <typename OnBody>
  bool Feed(std::string_view data, OnBody&& on_body);
  // Consumes the head only; returns how many bytes of `data` it took (all of them while the head
  // has not ended). Feed goes on from there.
  size_t FeedHead(std::string_view data);
  // The connection ended: completes a body that runs to the end of the connection, else breaks
  // the response.
  void OnEof();

  bool head_done() const { return state_ != State::kHead; }
  // The last chunk of a chunked body has come (its trailers may still be on their way).
  bool body_done() const { return state_ == State::kTrailer || state_ == State::kDone; }
  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kError; }
  bool got_some() const { return got_some_; }
  int status() const { return status_; }
  // The body has the chunked transfer coding.
  bool chunked() const { return chunked_; }
  // The connection may carry another request: the server did not ask to close it, and the body
  // had its own framing.
  bool keep_alive() const { return keep_alive_ && framed_; }
  const std::string& error() const { return error_; }
  // The head as it came, without its final empty line (for reports).
  const std::string& head() const { return head_; }

 private:
  enum class State {
    kHead,
    kLength,      // Content-Length bytes left.
    kUntilClose,  // Body runs to the end of the connection.
    kChunkSize,
    kChunkExt,
    kChunkSizeLf,
    kChunkData,
    kChunkDataCr,
    kChunkDataLf,
    kTrailer,  // After the last chunk: header lines up to an empty one.
    kDone,
    kError
  };
  static constexpr size_t kMaxHead = 64 << 10;

  bool ParseHead();
  // One step of the chunked coding's framing (a chunk size, a CRLF, trailers) at the front of
  // `*data`, consuming what it read; false once the response is broken.
  bool FeedChunkFraming(std::string_view* data);
  bool Fail(std::string message);

  State state_ = State::kHead;
  std::string head_;
  std::string trailer_;  // The current trailer line so far.
  int status_ = 0;
  uint64_t left_ = 0;
  int size_digits_ = 0;
  bool chunked_ = false;
  bool keep_alive_ = true;
  bool framed_ = true;
  bool got_some_ = false;
  std::string error_;
};

template <typename OnBody>
bool ResponseReader::Feed(std::string_view data, OnBody&& on_body) {
  if (!data.empty()) got_some_ = true;
  while (!data.empty()) {
    switch (state_) {
      case State::kHead:
        data.remove_prefix(FeedHead(data));
        break;
      case State::kLength:
      case State::kChunkData: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(left_, data.size()));
        on_body(data.substr(0, n));
        data.remove_prefix(n);
        left_ -= n;
        if (left_ == 0) state_ = state_ == State::kLength ? State::kDone : State::kChunkDataCr;
        break;
      }
      case State::kUntilClose:
        on_body(data);
        data = {};
        break;
      case State::kDone:
      case State::kError:
        return false;
      default:
        if (!FeedChunkFraming(&data)) return false;
        break;
    }
    if (state_ == State::kDone || state_ == State::kError) return false;
  }
  return state_ != State::kDone && state_ != State::kError;
}

}  // namespace kf::tools

#endif  // KUBE_FANOUT_TESTS_TOOLS_RESPONSE_READER_H_
