// Http2Upstream: one HTTP/2 client connection to an upstream apiserver (TLS, ALPN "h2"), driven
// by nghttp2's client session, carrying many passthrough requests at once as client-go's
// transport does. Http2UpstreamStream is one request on it: a head (no body), then the
// answer's head and body read in pieces.
//
//   ReadLoop  ── bytes ──► nghttp2_session_mem_recv ── callbacks: answer heads, DATA, stream
//                                                     closes ──► Http2UpstreamStream
//   WriteLoop ◄── nghttp2_session_mem_send (SETTINGS, HEADERS, WINDOW_UPDATE, RST_STREAM)
//
// Flow control: each stream's window (kStreamWindow) bounds what it holds unread; its window
// reopens only as the relay takes bytes (ReadSome), so a stream whose client is slow stops
// being sent to while the connection's other streams go on (the connection's window is
// reopened as bytes arrive: what all streams hold is bounded by their windows). A stream the
// relay cancels is reset (RST_STREAM CANCEL). When the connection ends, every open stream's
// next read fails, as a read of an HTTP/1.1 connection that dropped does.
//
// Owned by UpstreamPool (a shared_ptr it lists; each stream keeps its connection alive); lives
// on one worker thread; no locks.
#ifndef KUBE_FANOUT_UPSTREAM_HTTP2_UPSTREAM_H_
#define KUBE_FANOUT_UPSTREAM_HTTP2_UPSTREAM_H_

#include <nghttp2/nghttp2.h>

#include <atomic>
#include <boost/beast/http/fields.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "proxy/edge/any_stream.h"
#include "proxy/edge/http2_stream.h"

namespace kf {

// A stream's receive window: the most an answer's body holds here unread.
inline constexpr uint32_t kUpstreamHttp2StreamWindow = 256 * 1024;

// The HTTP/2 connections to the upstream, for /metrics (every worker's; any thread).
struct Http2UpstreamStats {
  std::atomic<int64_t> connections{0};
  std::atomic<int64_t> streams{0};
  std::atomic<uint64_t> dialed{0};
  // Connections that ended with streams still open on them (each stream's client saw its
  // answer cut, as when an HTTP/1.1 upstream connection drops).
  std::atomic<uint64_t> lost_with_streams{0};
};

// One request's field list as HTTP/2 sends it: pseudo-fields first.
using Http2HeaderList = std::vector<std::pair<std::string, std::string>>;

class Http2Upstream;

class Http2UpstreamStream {
 public:
  Http2UpstreamStream(std::shared_ptr<Http2Upstream> connection, const asio::any_io_executor& ex);
  ~Http2UpstreamStream();
  Http2UpstreamStream(const Http2UpstreamStream&) = delete;
  Http2UpstreamStream& operator=(const Http2UpstreamStream&) = delete;

  // Waits for the answer's head (1xx heads skipped) until `deadline`. Errors: the stream was
  // refused before the upstream processed it (refused() then true: safe to send again), reset,
  // the connection ended, timeout.
  asio::awaitable<beast::error_code> ReadHead(std::chrono::steady_clock::time_point deadline);
  int status() const { return status_; }
  const beast::http::fields& fields() const { return fields_; }
  std::optional<uint64_t> content_length() const { return content_length_; }
  bool refused() const { return refused_; }

  // Up to `into.size()` bytes of the body, waiting until `deadline` when none are held. (ec,
  // 0) with !ec only at the end (done()). A cancelled stream's read fails with
  // operation_aborted.
  asio::awaitable<std::pair<beast::error_code, size_t>> ReadSome(
      std::span<char> into, std::chrono::steady_clock::time_point deadline);
  // The whole body was received and taken.
  bool done() const { return ended_ && held_.size() == taken_; }
  // Body bytes received and not yet read (at most the stream's window).
  size_t held() const { return held_.size() - taken_; }
  // Resets the stream (RST_STREAM CANCEL) unless it already ended; a pending read fails.
  void Cancel();

 private:
  friend class Http2Upstream;
  void OnHeader(std::string_view name, std::string_view value);
  void OnHeadersEnd(bool end_stream);
  void OnData(const uint8_t* data, size_t len);
  void OnClose(uint32_t error_code);
  void OnConnectionGone();

  std::shared_ptr<Http2Upstream> connection_;
  int32_t id_ = -1;
  int status_ = 0;
  int pending_status_ = 0;  // The head being read (a 1xx is skipped).
  beast::http::fields fields_;
  std::optional<uint64_t> content_length_;
  bool head_done_ = false;
  std::string held_;  // Body bytes received, from taken_ on not yet read.
  size_t taken_ = 0;
  bool ended_ = false;  // END_STREAM received.
  bool closed_ = false;
  bool refused_ = false;
  bool cancelled_ = false;
  beast::error_code error_;  // Why the stream ended early.
  asio::any_io_executor executor_;
  Http2Wakeup wake_;
};

class Http2Upstream : public std::enable_shared_from_this<Http2Upstream> {
 public:
  // `stream`: a connection whose TLS handshake chose "h2". `stats` may be null.
  Http2Upstream(std::unique_ptr<AnyStream> stream, size_t endpoint, Http2UpstreamStats* stats);
  ~Http2Upstream();
  Http2Upstream(const Http2Upstream&) = delete;
  Http2Upstream& operator=(const Http2Upstream&) = delete;

  // Sends the preface and SETTINGS and waits (until `deadline`) for the server's SETTINGS, so
  // its stream limit is known before any stream is opened; then reads and writes until the
  // connection ends. Error: the server never spoke HTTP/2.
  asio::awaitable<absl::Status> Start(std::chrono::steady_clock::time_point deadline);

  // A new stream for a request without a body; null when the connection cannot take one (it
  // ended, the server sent GOAWAY, or it holds as many streams as the server allows).
  std::unique_ptr<Http2UpstreamStream> Submit(const Http2HeaderList& head);

  bool usable() const;
  bool ended() const { return done_; }
  size_t open_streams() const { return streams_.size(); }
  uint32_t max_streams() const;
  size_t endpoint() const { return endpoint_; }
  std::chrono::steady_clock::time_point idle_since() const { return idle_since_; }
  // Ends the connection (its streams fail).
  void Close();

 private:
  friend class Http2UpstreamStream;
  static int OnHeader(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t flags,
                      void* self);
  static int OnFrameRecv(nghttp2_session* session, const nghttp2_frame* frame, void* self);
  static int OnDataChunk(nghttp2_session* session, uint8_t flags, int32_t stream_id,
                         const uint8_t* data, size_t len, void* self);
  static int OnStreamClose(nghttp2_session* session, int32_t stream_id, uint32_t error_code,
                           void* self);
  bool Init();
  Http2UpstreamStream* StreamOf(int32_t id);
  // The relay took `n` bytes of stream `id`: its window reopens by as much.
  void Consumed(int32_t id, size_t n);
  void Reset(int32_t id);
  void Forget(int32_t id);
  void Ended();
  asio::awaitable<void> ReadLoop();
  asio::awaitable<void> WriteLoop();

  std::unique_ptr<AnyStream> stream_;
  size_t endpoint_;
  Http2UpstreamStats* stats_;
  asio::any_io_executor executor_;
  nghttp2_session* session_ = nullptr;
  absl::flat_hash_map<int32_t, Http2UpstreamStream*> streams_;  // Open streams (not owned).
  Http2Wakeup write_wake_;
  Http2Wakeup settings_wake_;
  bool settings_received_ = false;
  bool goaway_ = false;
  bool done_ = false;
  std::chrono::steady_clock::time_point idle_since_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_HTTP2_UPSTREAM_H_
