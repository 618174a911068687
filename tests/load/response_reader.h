// ResponseReader: reads one HTTP/1.1 response (to a GET) as its bytes arrive, in any split:
// the status line and headers, then a body framed by Content-Length, by the chunked transfer
// coding (trailers included, so a keep-alive connection is left at the next response), or by
// the end of the connection. The decoded body goes to a callback, piece by piece, and is not
// kept. For LISTs and GETs; watches use bench::EventStreamParser, which also splits events.
//
// One reader per response; not thread-safe.
#ifndef KUBE_FANOUT_TESTS_LOAD_RESPONSE_READER_H_
#define KUBE_FANOUT_TESTS_LOAD_RESPONSE_READER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace kf::load {

class ResponseReader {
 public:
  using OnBody = std::function<void(std::string_view)>;

  // Consumes `data`; returns false once the response is complete or broken (then see done()
  // and error()). Bytes after the end of the response are not consumed.
  bool Feed(std::string_view data, const OnBody& on_body);
  // The connection ended: completes a body that runs to the end of the connection, else breaks
  // the response.
  void OnEof();

  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kError; }
  bool got_some() const { return got_some_; }
  int status() const { return status_; }
  // The connection may carry another request: the server did not ask to close it, and the body
  // had its own framing.
  bool keep_alive() const { return keep_alive_ && framed_; }
  const std::string& error() const { return error_; }

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

  size_t FeedHead(std::string_view data);
  bool ParseHead();
  bool Fail(std::string message);

  State state_ = State::kHead;
  std::string head_;  // The head so far; then the current trailer line.
  int status_ = 0;
  uint64_t left_ = 0;
  int size_digits_ = 0;
  bool keep_alive_ = true;
  bool framed_ = true;
  bool got_some_ = false;
  std::string error_;
};

}  // namespace kf::load

#endif  // KUBE_FANOUT_TESTS_LOAD_RESPONSE_READER_H_
