// Http2Session: one HTTP/2 client connection (TLS with ALPN "h2", or plain with prior knowledge),
// driven by nghttp2's server session. Each stream is a request served by the worker's Pipeline
// in its own coroutine (Http2Stream gives it a Request and a Response), so every route works
// as over HTTP/1.1, and streams are independent: each has its own flow-control window both
// ways, and a stream whose client stops reading only stalls itself.
//
//   ReadLoop  ── bytes ──► nghttp2_session_mem_recv ── callbacks: streams open, headers, body,
//                                                     close ──► Http2Stream / Serve coroutine
//   WriteLoop ◄── nghttp2_session_mem_send (frames: answers' heads, DATA as windows allow)
//             ◄── frames made from a watch's wake-up (FrameNow: its events framed at once
//                 when the windows take them), which the end of the thread's wake-ups
//                 (SendBatchedWrites) writes itself while the writer is idle on plain TCP
//   IdleLoop  ── no stream for the idle timeout: GOAWAY, close (as Go's http2.Server)
//
// Settings and limits are those kube-apiserver gives Go's http2.Server (Http2Limits), plus
// kube-fanout's own bounds on what an unauthenticated client can hold or cause: a stream exists
// (listed, counted, served) only from END_HEADERS, after the read that ended its head, so a
// stream reset in the same read starts nothing; a header block has a deadline and a
// CONTINUATION limit; heads held per connection are bounded; resets are rate limited; a
// client's reset cancels its handler's upstream call (StopSignal::Cancel); GET and HEAD bodies
// are consumed and dropped. No exception crosses nghttp2's callbacks (Guarded). A graceful stop
// sends GOAWAY: open streams finish (watches end between events), new ones are refused, and the
// connection closes when the last stream ends.
//
// Created and run by HttpSession (which owns the socket, and ends it after Run); lives on one
// worker thread; kept alive by Run, by each stream's coroutine and by each watch's handlers
// (shared_from_this).
#ifndef KUBE_FANOUT_EDGE_HTTP2_SESSION_H_
#define KUBE_FANOUT_EDGE_HTTP2_SESSION_H_

#include <nghttp2/nghttp2.h>

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "proxy/edge/any_stream.h"
#include "proxy/edge/batched_sends.h"
#include "proxy/edge/client_cert.h"
#include "proxy/edge/deadlines.h"
#include "proxy/edge/http2_memory.h"
#include "proxy/edge/http2_stream.h"
#include "proxy/edge/pipeline.h"

namespace kf {

// What kube-apiserver configures (k8s.io/apiserver/pkg/server/secure_serving.go, Go's
// golang.org/x/net/http2 server): MaxConcurrentStreams 100 when --http2-max-streams-per-
// connection is 0 (its default for kube-apiserver; 1000 only in the options for aggregated
// apiservers), MaxUploadBufferPerStream and MaxReadFrameSize 256 KiB, MaxUploadBufferPerConnection
// their product with the stream limit, MaxHeaderBytes 1 MiB (+ 10 × 32 in HTTP/2's units),
// IdleTimeout 90 s.
struct Http2Limits {
  uint32_t max_concurrent_streams = 100;
  uint32_t initial_window_size = 256 * 1024;
  uint32_t max_frame_size = 256 * 1024;
  uint32_t max_header_list_size = (1u << 20) + 10 * 32;
  uint32_t header_table_size = 4096;
  std::chrono::milliseconds idle_timeout = kKeepAliveIdleTimeout;
  // A request's body must arrive whole within this of its head (--request-timeout; HTTP/1.1
  // connections take theirs from here too).
  std::chrono::milliseconds request_timeout = kRequestBodyDeadline;
  // What kube-fanout adds to bound what a client can hold or make it do (docs/limits.md):
  // A header block (HEADERS and its CONTINUATIONs) must end within this of its first frame, as
  // an HTTP/1.1 head must (Go's ReadHeaderTimeout); past it: GOAWAY, closed.
  std::chrono::milliseconds header_block_timeout = kHeadTimeout;
  // CONTINUATION frames after one HEADERS (nghttp2's own default since 1.61, which a 1 MiB
  // list at our 256 KiB frames needs 4 of); a block that needs more: GOAWAY ENHANCE_YOUR_CALM
  // as the last one allowed begins without END_HEADERS.
  uint32_t max_continuations = 8;
  // Request heads held at once by one connection's streams (its handlers running, and the
  // block being read), counted as Go counts a list; a head past what is left is answered 431.
  size_t max_header_bytes_per_connection = 4 * ((1u << 20) + 10 * 32);
  // Streams the client resets (and streams nghttp2 resets for its protocol errors), as a
  // token bucket: nghttp2's rapid-reset defaults since 1.57, 1,000 at once and 33 per second
  // after; past it: GOAWAY ENHANCE_YOUR_CALM, as Go's server for CVE-2023-44487.
  uint32_t stream_reset_burst = 1000;
  uint32_t stream_reset_rate = 33;
  // A connection that framed nothing for this long (a whole period between two looks) gives
  // its frame buffer's pages back (Http2Memory::Release): a quiet agent holds none. Zero: never.
  std::chrono::milliseconds frame_buffer_quiet = std::chrono::seconds(5);
  // The reset bucket's clock (tests inject theirs).
  std::function<std::chrono::steady_clock::time_point()> now = [] {
    return std::chrono::steady_clock::now();
  };
  uint32_t connection_window() const { return initial_window_size * max_concurrent_streams; }
};
// One set for every connection of a server (a copy in each was 104 bytes per connection).
using SharedHttp2Limits = std::shared_ptr<const Http2Limits>;
// The defaults above, shared.
const SharedHttp2Limits& DefaultHttp2Limits();

// Offers "h2" then "http/1.1" by ALPN on a TLS server context (the server's order, as Go's).
void OfferHttp2(asio::ssl::context& tls);
// True when the TLS handshake chose "h2".
bool NegotiatedHttp2(AnyStream& stream);

// The client connection preface (RFC 9113 §3.4) that starts HTTP/2 with prior knowledge.
inline constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

class Http2Session final : public std::enable_shared_from_this<Http2Session>,
                           public Http2Writer,
                           private BatchedSends::Done {
 public:
  Http2Session(AnyStream& stream, std::string remote, std::string remote_ip, Pipeline& pipeline,
               TransportStats& stats, PeerCertificate client_cert,
               SharedHttp2Limits limits = nullptr);  // null: DefaultHttp2Limits()
  ~Http2Session();
  Http2Session(const Http2Session&) = delete;
  Http2Session& operator=(const Http2Session&) = delete;

  // Serves the connection until it ends. `received`: bytes already read from it (the preface).
  asio::awaitable<void> Run(std::string received);
  // Graceful stop: GOAWAY, every open stream's stop signal.
  void Stop();

  // Http2Writer: for its streams.
  void Flush() override { write_wake_.Notify(); }
  bool can_frame_now() const override;
  bool FrameNow(const Http2Stream& stream) override;
  void CallbackFailed() override;
  // What FrameNow left for this thread's SendBatchedWrites (response.h): written now when the
  // writer is idle and the socket takes it (over TLS: encrypted now, and what the socket does
  // not take is the writer's); else the writer is woken for it. Inside a burst of batched
  // sends (SendBatchedWrites makes one) it is one of the burst's sends, its result in Sent.
  void SendBatched();

 private:
  using TimePoint = std::chrono::steady_clock::time_point;
  // Every callback's body runs inside this: an exception stops at nghttp2's C frames, is
  // counted, and ends the connection with GOAWAY INTERNAL_ERROR.
  template <typename Body>
  static int Guarded(void* self, Body body) noexcept;
  static int OnBeginFrame(nghttp2_session* session, const nghttp2_frame_hd* hd, void* self);
  static int OnInvalidFrame(nghttp2_session* session, const nghttp2_frame* frame, int error,
                            void* self);
  static int OnBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame, void* self);
  static int OnHeader(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t flags,
                      void* self);
  static int OnFrameRecv(nghttp2_session* session, const nghttp2_frame* frame, void* self);
  static int OnFrameSend(nghttp2_session* session, const nghttp2_frame* frame, void* self);
  static int OnDataChunk(nghttp2_session* session, uint8_t flags, int32_t stream_id,
                         const uint8_t* data, size_t len, void* self);
  static int OnStreamClose(nghttp2_session* session, int32_t stream_id, uint32_t error_code,
                           void* self);
  // Frames gathered into one socket write (at most one frame more).
  static constexpr size_t kWriteBatchBytes = 64 * 1024;
  // A DATA frame whose payload nghttp2 did not copy (Http2Stream::ReadAnswer): its header and
  // payload go straight into the batch Gather is filling; a full batch pauses nghttp2 there.
  static int OnSendData(nghttp2_session* session, nghttp2_frame* frame, const uint8_t* framehd,
                        size_t length, nghttp2_data_source* source, void* self);

  // BatchedSends::Done: what the socket took of the batch SendBatched queued.
  void Sent(int64_t result, std::span<const iovec> sent) override;
  // After `written` bytes of the batch (pending_, or over TLS the ciphertext) went out: the
  // rest is the writer's.
  void BatchWritten(size_t written);

  bool Init();
  // A GOAWAY that ends the connection for what its client did (counted by `why`); the rest of
  // what was read is not processed.
  void EndConnection(Http2Closed why, uint32_t error_code);
  // A stream reset by the client (or for its protocol error): false past the reset bucket.
  bool TakeResetToken();
  // The first frame of a header block began (its deadline set), or the block ended.
  void HeaderBlockBegan();
  void HeaderBlockEnded() { header_block_deadline_ = TimePoint::max(); }
  // The head `s` held is let go (its handler is done with it, or never ran).
  void ReleaseHead(Http2Stream& s);
  bool Receive(const char* data, size_t n);
  asio::awaitable<void> ReadLoop();
  asio::awaitable<void> WriteLoop();
  asio::awaitable<void> IdleLoop();
  // Frames were gathered: the frame buffer is resident, and looked at again after a quiet spell.
  void Framed();
  // IdleLoop's look at the frame buffer: given back when nothing was framed since the last
  // look and nghttp2 holds no frame. Returns when to look next (max: nothing resident).
  TimePoint LookAtFrameBuffer(TimePoint now);
  void GoAway();
  // Appends what nghttp2 has to send to `out` until `enough` or `out` holds a batch. False:
  // nghttp2 failed (the connection is over).
  template <typename Enough>
  bool Gather(std::string& out, Enough enough);
  // Lists this connection for the thread's SendBatchedWrites (a handler posted if none is),
  // when its writer is idle. False: the writer must be woken instead.
  bool ListForBatchedSend();
  Http2Stream* StreamOf(int32_t id);
  // END_HEADERS of a request's head: its stream is listed, counted and served.
  void Opened(nghttp2_session* session, const nghttp2_frame* frame);
  void Start(std::shared_ptr<Http2Stream> stream);
  asio::awaitable<void> Serve(std::shared_ptr<Http2Stream> stream);
  // A stream's request through the pipeline. A watch it leaves running comes back with the
  // access log's fields copied: the request, its parsed form and the chain's frames end here.
  struct Handled {
    std::unique_ptr<Detached> watch;
    RequestRecord record;
  };
  asio::awaitable<Handled> Handle(Http2Stream& stream);
  // A watch left running on a stream (Serve): what its handlers keep until it ended.
  struct StreamWatch : std::enable_shared_from_this<StreamWatch> {
    StreamWatch(std::shared_ptr<Http2Session> s, std::shared_ptr<Http2Stream> st, Handled h)
        : session(std::move(s)), stream(std::move(st)), handled(std::move(h)) {}
    std::shared_ptr<Http2Session> session;
    std::shared_ptr<Http2Stream> stream;
    Handled handled;
  };
  // Its end: logged and counted, the stream finished.
  void WatchEnded(StreamWatch& watch);
  // Go's answer to a header list past its limit: 431 with its own small HTML body.
  asio::awaitable<void> WriteHeaderListTooLong(Http2Stream& stream);

  AnyStream& stream_;
  std::string remote_;
  std::string remote_ip_;
  Pipeline& pipeline_;
  TransportStats& stats_;
  PeerCertificate client_cert_;  // The connection's, for every stream: read at the first.
  const SharedHttp2Limits limits_owner_;
  const Http2Limits& limits_;  // *limits_owner_
  // The stream whose header block is being read (at most one: a block's frames are
  // contiguous). No table entry, no gauge, no handler before END_HEADERS.
  std::shared_ptr<Http2Stream> opening_;
  TimePoint header_block_deadline_ = TimePoint::max();
  // Streams whose heads ended in the read being processed: started after it (Receive).
  std::vector<std::shared_ptr<Http2Stream>> starting_;
  bool header_block_armed_ = false;  // Its deadline is the idle timer's.
  uint32_t continuations_ = 0;       // CONTINUATION frames of the block being read.
  size_t held_header_bytes_ = 0;     // The heads of streams whose handlers have not let go.
  double reset_tokens_;
  TimePoint reset_refilled_;
  bool ended_ = false;  // EndConnection ran: callbacks refuse the rest.
  // The connection's thread, for what runs after the socket is gone (a watch's end).
  asio::any_io_executor executor_;
  // nghttp2's frame buffer (Http2Memory): session_'s allocator points at it.
  Http2FrameBuffer frame_buffer_;
  bool frames_resident_ = false;    // Framed since the buffer was last given back.
  bool framed_since_look_ = false;  // Framed since IdleLoop's last look.
  TimePoint frames_look_at_ = TimePoint::max();
  nghttp2_session* session_ = nullptr;
  // The open streams (a flat table: no node per stream).
  absl::flat_hash_map<int32_t, std::shared_ptr<Http2Stream>> streams_;
  Http2Wakeup write_wake_;
  // Frames made between the writer's writes (FrameNow: a watch's events framed from its
  // wake-up), in nghttp2's order; the writer sends them first. Empty, and without room, while
  // the connection is quiet.
  std::string pending_;
  // The size of the last batch gathered: the next one starts with that much room.
  size_t last_batch_ = 0;
  bool in_nghttp2_ = false;  // Inside mem_recv or mem_send (their callbacks may not re-enter).
  std::string* gathering_ = nullptr;  // The batch Gather is filling (OnSendData's), while it runs.
  // The writer waits for a wake-up with nothing of its own under way: `pending_` may be
  // written by SendBatched.
  bool writer_idle_ = false;
  bool batched_ = false;  // In this thread's list for SendBatchedWrites.
  // TLS: SendBatched left ciphertext the socket did not take (in the TlsServerStream); the
  // writer sends it before anything else.
  bool tls_held_ = false;
  bool send_failed_ = false;
  // SendBatched's batch is a send of this thread's burst (BatchedSends) until Sent; the
  // session keeps itself until then.
  std::shared_ptr<Http2Session> queued_self_;
  asio::steady_timer idle_timer_;
  std::chrono::steady_clock::time_point idle_since_;
  bool done_ = false;
  bool stopping_ = false;
  bool goaway_ = false;
};

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_HTTP2_SESSION_H_
