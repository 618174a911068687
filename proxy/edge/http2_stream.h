// Http2Stream: one request and its answer on an HTTP/2 connection (http2_session.h): the
// request head as nghttp2 decoded it, its body as a BodySource (Http2Body) and the answer as a
// Response (Http2Response), so the pipeline serves it as it serves an HTTP/1.1 request.
//
// Flow control is per stream both ways: the body is read from what the client sent, and the
// window is reopened only as the pipeline consumes it; the answer's bytes are handed to nghttp2
// only as the client's window for this stream allows, so WriteBody of a stream whose client
// stopped reading waits (a watch behind it is cut by its byte budget, then Cancel resets the
// stream) while the connection's other streams go on.
//
// Owned by shared_ptr: the session's table (until nghttp2 closes the stream) and the pipeline
// coroutine serving it. Used on the session's thread only. Every wait ends when the stream
// closes or the connection ends.
#ifndef KUBE_FANOUT_EDGE_HTTP2_STREAM_H_
#define KUBE_FANOUT_EDGE_HTTP2_STREAM_H_

#include <nghttp2/nghttp2.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "proxy/edge/exchange.h"
#include "proxy/edge/request.h"
#include "proxy/edge/response.h"

namespace kf {

class Http2Stream;

// What a stream needs of its connection's writer (Http2Session).
class Http2Writer {
 public:
  // Wakes the writer: something was queued for sending.
  virtual void Flush() = 0;
  // Whether FrameNow may run now (the connection is up, not inside nghttp2, its next write not
  // full).
  virtual bool can_frame_now() const = 0;
  // Has nghttp2 produce its frames now, into the connection's next write, until `stream`'s
  // queued answer bytes were all framed (true) or the next write is full; wakes the writer.
  virtual bool FrameNow(const Http2Stream& stream) = 0;
  // A stream's nghttp2 callback failed (an exception stopped at the C boundary): counted.
  virtual void CallbackFailed() = 0;

 protected:
  ~Http2Writer() = default;
};

// One waiter woken by Notify (a wake-up before the wait is kept). Its timer (120 bytes) exists
// only while a wait is under way, unless `keep_timer` (a waiter that waits all the time: the
// connection's writer): a stream holds none between waits. A watch's stream waits once for its
// initial state to be taken, then rarely (its events go out from its wake-ups).
class Http2Wakeup {
 public:
  // `executor` is its owner's, and outlives it.
  explicit Http2Wakeup(const asio::any_io_executor& executor, bool keep_timer = false)
      : executor_(&executor), keep_timer_(keep_timer) {}
  explicit Http2Wakeup(asio::any_io_executor&&, bool = false) = delete;  // Not a temporary.
  void Notify();
  // True when notified; false when the wait was cancelled otherwise, or `deadline` passed.
  asio::awaitable<bool> Wait(
      asio::steady_timer::time_point deadline = asio::steady_timer::time_point::max());

 private:
  const asio::any_io_executor* executor_;
  std::unique_ptr<asio::steady_timer> timer_;
  bool keep_timer_;
  bool fired_ = false;
};

class Http2Body : public BodySource {
 public:
  explicit Http2Body(Http2Stream& stream) : stream_(stream) {}
  bool done() const override;
  bool chunked() const override;
  // Past the stream's body deadline (--request-timeout from its head) with the body not
  // ended, a read that finds no bytes fails with beast::error::timeout; the stream stays
  // writable for the answer, and the connection's other streams go on.
  asio::awaitable<std::pair<beast::error_code, size_t>> ReadSome(std::span<char> into) override;
  bool timed_out() const override { return timed_out_; }

 private:
  Http2Stream& stream_;
  bool timed_out_ = false;
};

class Http2Response : public Response {
 public:
  explicit Http2Response(Http2Stream& stream) : stream_(stream) {}

  asio::awaitable<beast::error_code> WriteHead(ResponseHead head) override;
  asio::awaitable<beast::error_code> WriteBody(std::span<const asio::const_buffer> pieces) override;
  asio::awaitable<beast::error_code> End() override;
  asio::awaitable<bool> ClientGone() override;
  void WatchClient(const asio::any_io_executor& executor, std::function<void(bool)> gone) override;
  void StopWatchingClient() override;
  asio::awaitable<beast::error_code> Continue() override;
  void Cancel() override;
  // A watch's events without its coroutine: framed at once into the connection's next write
  // when the client's windows (the stream's and the connection's) take them all, so the bytes
  // are no longer needed when this returns (kWritten). Held (kHeld) only when nghttp2 framed
  // less than the windows promised; FinishWrite then waits as WriteBody does.
  bool can_write_now() const override;
  TryWrite TryWriteBody(std::span<const asio::const_buffer> pieces) override;
  asio::awaitable<beast::error_code> FinishWrite() override;
  void CloseAfter() override {}  // Streams end alone; the connection is not the request's.
  std::optional<Upgraded> TakeUpgraded() override { return std::nullopt; }

  bool head_written() const override { return status_ != 0; }
  int status() const override { return status_; }
  uint64_t body_bytes() const override { return body_bytes_; }

 private:
  Http2Stream& stream_;
  int status_ = 0;
  bool continued_ = false;
  bool held_ = false;  // TryWriteBody left bytes in the stream's queue (FinishWrite).
  uint64_t body_bytes_ = 0;
};

class Http2Stream {
 public:
  Http2Stream(nghttp2_session* session, int32_t id, const asio::any_io_executor& executor);
  Http2Stream(const Http2Stream&) = delete;
  Http2Stream& operator=(const Http2Stream&) = delete;

  int32_t id() const { return id_; }

  // Decoding the request head (nghttp2's header callbacks). False: past `max_bytes` (Go's
  // accounting: name, value and 32 bytes per field), or a name or value longer than a field
  // can hold (kMaxFieldBytes); the head is then answered 431, and no more of it is kept.
  bool AddHeader(std::string_view name, std::string_view value, size_t max_bytes);
  bool head_too_large() const { return head_too_large_; }
  // What the head holds, as counted above (until ForgetRequest; none once too large: its
  // fields were let go).
  size_t head_bytes() const { return head_ && !head_too_large_ ? head_bytes_ : 0; }
  // Beast's field offsets are 16 bits: a name or value past this cannot be held (Go takes one up
  // to the whole list limit, the one difference; nghttp2 1.52's HPACK decoder ends the
  // connection past 65,536).
  static constexpr size_t kMaxFieldBytes = 65533;
  // A request whose method has no body to the apiserver (GET, HEAD: get, list, watch): bytes
  // the client sends with it are given back to its windows as they come and dropped, and the
  // pipeline sees no body. Set once its head is complete.
  void DropBody() { drop_body_ = true; }
  bool drops_body() const { return drop_body_; }
  // The request as the pipeline sees it, once the head is complete.
  Request MakeRequest(std::chrono::milliseconds request_timeout, std::string_view remote_ip,
                      RequestInfo info, const ClientCertificate* client_cert);
  // Its request was handled and its answer's head written (a watch runs on): the head's bytes
  // go. Nothing reads them after that (a Continue then finds no Expect; the head is written).
  void ForgetRequest();
  std::string_view method() const { return head_ ? std::string_view(head_->method) : ""; }
  std::string_view path() const { return head_ ? std::string_view(head_->path) : ""; }

  // From the connection: body bytes, the end of the body, the stream's end.
  void OnData(const uint8_t* data, size_t n);
  void OnBodyEnd();
  // `abnormal`: reset by either side or cut with the connection, before the answer ended.
  void OnClose(bool abnormal);
  void OnConnectionGone();
  // Bytes received but not yet consumed (the connection window gets them back on close).
  size_t unconsumed() const { return body_in_.size() - body_offset_; }
  bool body_ended() const { return body_end_; }
  // The answer's head was queued and, when it has a body, its end too.
  bool answered() const;

  // nghttp2's data source for the answer: says how much of what WriteBody queued the next DATA
  // frame carries, without copying it (NGHTTP2_DATA_FLAG_NO_COPY): the session's send-data
  // callback appends it to the write batch (TakeAnswer), nghttp2's frame buffer holding only
  // the frame's header.
  static ssize_t ReadAnswer(nghttp2_session* session, int32_t stream_id, uint8_t* buf,
                            size_t length, uint32_t* flags, nghttp2_data_source* source,
                            void* user_data);

  // After the pipeline is done: resets a stream whose answer did not end, or whose request
  // body was left unread (as Go's server does), so it cannot hold its window.
  void Finish();

  Http2Response& response() { return response_; }
  Http2Body& body() { return body_; }
  StopSignal& stop() { return stop_; }
  const beast::http::fields& headers() const;

  // Set by the session (null in a stream without one): its connection's writer, woken after
  // anything was queued for sending.
  Http2Writer* writer = nullptr;
  // All of the answer's queued bytes were framed.
  bool out_drained() const { return out_index_ >= out_.size(); }
  // The session's send-data callback: appends `length` bytes of the queued answer (what
  // ReadAnswer said the frame carries) to `out`, and takes them off the queue.
  void TakeAnswer(size_t length, std::string& out);

 private:
  friend class Http2Body;
  friend class Http2Response;

  void Reset(uint32_t code);
  // ReadAnswer's work, inside its guard.
  ssize_t ReserveAnswer(size_t length, uint32_t* flags);
  // Moves past queued pieces of no bytes (nothing is framed for them).
  void SkipEmptyPieces();

  // Drops the pieces WriteBody was given (and a long list's room).
  void ClearOut();
  // Tells WatchClient's callback, once, when the stream ended (`gone_`) or was reset, or when
  // `stopped`.
  void TellClientWatch(bool stopped);
  bool usable() const { return !closed_ && !reset_ && session_ != nullptr; }

  nghttp2_session* session_;  // Null once the connection is gone.
  int32_t id_;
  asio::any_io_executor executor_;  // The connection's thread (the wake-ups' timers).
  // The request head as decoded, until ForgetRequest.
  struct Head {
    std::string method, path, authority, scheme;
    beast::http::fields fields;
  };
  std::unique_ptr<Head> head_ = std::make_unique<Head>();
  size_t head_bytes_ = 0;
  bool head_too_large_ = false;
  // The request body: received bytes, the part read, whether the client ended it.
  std::string body_in_;
  size_t body_offset_ = 0;
  bool body_end_ = false;
  bool bodiless_ = false;  // The head came with END_STREAM, or the body is dropped.
  bool drop_body_ = false;
  // The whole body's deadline (set with the request, from its complete head).
  std::chrono::steady_clock::time_point body_deadline_ =
      std::chrono::steady_clock::time_point::max();
  Http2Wakeup body_wake_;
  // The answer: the pieces WriteBody is waiting on, how far they were handed to nghttp2.
  std::vector<asio::const_buffer> out_;
  size_t out_index_ = 0;
  bool has_body_ = false;   // The answer's head promised a body (a data source is attached).
  bool ending_ = false;     // End() called.
  bool eof_sent_ = false;   // The data source reported the end (END_STREAM queued).
  bool submitted_ = false;  // The answer's head was queued.
  bool writing_ = false;    // WriteBody or End is waiting for the bytes to be taken.
  Http2Wakeup write_wake_;
  // The stream's end.
  bool closed_ = false;
  bool reset_ = false;  // Ended abnormally (either side reset it, or the connection ended).
  bool gone_ = false;   // ... by the client's doing.
  Http2Wakeup gone_wake_;
  // While WatchClient waits (`client_gone_` set): its callback, run on the stream's thread, or on
  // `client_elsewhere_` when given another (a watch's stream holds this for the watch's life).
  std::function<void(bool)> client_gone_;
  std::unique_ptr<asio::any_io_executor> client_elsewhere_;
  StopSignal stop_;
  Http2Body body_{*this};
  Http2Response response_{*this};
};

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_HTTP2_STREAM_H_
