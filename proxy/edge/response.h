// Response: how every handler answers, whatever carries the answer. A head (status and
// fields), then body pieces, each sent at once (a watch's events reach the client as they
// come), then the end. The transport frames it (HTTP/1.1: Content-Length or chunks, Date,
// Connection) and knows whether its connection can serve another request afterwards.
//
// Owned by the session for one request; used on the session's thread only.
#ifndef KUBE_FANOUT_EDGE_RESPONSE_H_
#define KUBE_FANOUT_EDGE_RESPONSE_H_

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/fields.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "common/api/status_response.h"

namespace kf {

namespace asio = boost::asio;
namespace beast = boost::beast;

class AnyStream;

struct ResponseHead {
  enum class Framing {
    kLength,    // `length` bytes follow (a relayed Content-Length).
    kStreamed,  // Length unknown: pieces as they come (a watch, a relayed chunked body).
    kWhole,     // `length` bytes written at once by a handler: framed as Go's net/http frames
                // a handler's output (HTTP/1.1: Content-Length up to 2 KiB, else chunked).
  };
  int status = 200;
  std::string reason;          // Empty: the standard phrase.
  beast::http::fields fields;  // End-to-end fields, in the order they are to be sent.
  Framing framing = Framing::kWhole;
  uint64_t length = 0;
};

// Whether an answer with this status carries a body: 1xx, 204 and 304 do not (RFC 9110).
inline bool StatusHasBody(int status) { return status >= 200 && status != 204 && status != 304; }

// The connection of an answered protocol upgrade (101), for a tunnel.
struct Upgraded {
  AnyStream& stream;
  std::string pending;  // Bytes the client sent past its request head.
};

class Response {
 public:
  virtual ~Response() = default;

  // Asks the CPU for the first lines of this object, where a transport keeps what a write reads
  // first (a hint, for a fan-out about to write to many responses in turn).
  void Prefetch() const {
    const char* p = reinterpret_cast<const char*>(this);
    __builtin_prefetch(p);
    __builtin_prefetch(p + 64);
    __builtin_prefetch(p + 128);
  }
  // The same for the transport's objects a direct write (TryWriteBody) reads: asked for after
  // Prefetch's lines have arrived.
  virtual void PrefetchTransport() const {}

  virtual asio::awaitable<beast::error_code> WriteHead(ResponseHead head) = 0;
  virtual asio::awaitable<beast::error_code> WriteBody(
      std::span<const asio::const_buffer> pieces) = 0;
  virtual asio::awaitable<beast::error_code> End() = 0;
  // Completes when the client goes away (or sends what it may not) while the answer is being
  // written: true. False: cancelled first (raced against the writer with awaitable operators).
  virtual asio::awaitable<bool> ClientGone() = 0;
  // The same without a coroutine, for an answer that stays open and mostly waits (a watch, for
  // hours: a second coroutine racing the writer would be kept as long): `gone(true)` once the
  // client goes away; after StopWatchingClient, `gone(false)` if it had not. `gone` is called
  // once, later, on `executor`'s thread (never from inside these calls), and the Response
  // must stay until it was.
  virtual void WatchClient(const asio::any_io_executor& executor,
                           std::function<void(bool)> gone) = 0;
  virtual void StopWatchingClient() = 0;
  // An interim "100 Continue" when the client waits for one before sending its body.
  virtual asio::awaitable<beast::error_code> Continue() = 0;
  // Cancels the write under way (a watcher cut for slowness whose client stopped reading).
  virtual void Cancel() = 0;

  // Without a coroutine, for a watch's events (proxy/serve/watch_run.cc): writes `pieces` as one
  // body piece now, as far as the connection takes them without waiting. Only while no write
  // is under way. kWritten: all went out (over HTTP/2: was framed into the connection's next
  // write, within the client's windows). kHeld: part went out (maybe none); the rest still
  // points into `pieces` (over TLS: is held as ciphertext), which must stay valid until
  // FinishWrite() completed, and nothing else may be written before. kFailed: the connection
  // failed. kUnsupported (the default, and whenever can_write_now() is false): nothing was done;
  // use WriteBody. kQueued: from TryWriteBodyOrQueue only (below).
  enum class TryWrite { kWritten, kHeld, kFailed, kUnsupported, kQueued };
  virtual bool can_write_now() const { return false; }
  virtual TryWrite TryWriteBody(std::span<const asio::const_buffer> /*pieces*/) {
    return TryWrite::kUnsupported;
  }
  // A direct write's result, told later (TryWriteBodyOrQueue's kQueued).
  class WriteDone {
   public:
    virtual void Written(TryWrite result) = 0;

   protected:
    ~WriteDone() = default;
  };
  // As TryWriteBody, or kQueued: the write joined this thread's batch of sends (inside a
  // fan-out's burst: proxy/edge/batched_sends.h), and before the burst ends `done.Written` is told
  // kWritten, kHeld or kFailed, meaning what TryWriteBody's would. Until then `pieces` must
  // stay valid and nothing else may be written (can_write_now() is false).
  virtual TryWrite TryWriteBodyOrQueue(std::span<const asio::const_buffer> pieces,
                                       WriteDone& /*done*/) {
    return TryWriteBody(pieces);
  }
  // Writes what TryWriteBody held (nothing when it held nothing).
  virtual asio::awaitable<beast::error_code> FinishWrite() { co_return beast::error_code{}; }
  // The connection must close after this answer (the request body was not all read, ...).
  virtual void CloseAfter() = 0;
  // After a 101 head: the raw connection for a tunnel; null where the transport has none.
  virtual std::optional<Upgraded> TakeUpgraded() = 0;

  virtual bool head_written() const = 0;
  virtual int status() const = 0;           // 0 until the head is written.
  virtual uint64_t body_bytes() const = 0;  // Body bytes written so far.
};

// Sends what direct writes (Response::TryWriteBody) on this thread left batched per connection
// (HTTP/2 frames a connection's streams into its next write): one write per connection, from
// the caller, with no wake-up of the connection's writer when the socket takes it all. Called
// after a burst of direct writes (serve's Wakeups drain); without it they go out from a handler
// posted at the first of them.
void SendBatchedWrites();

// An answer in one go: `head`, then `body` as one piece, then the end; the first error.
asio::awaitable<beast::error_code> WriteAnswer(Response& response, ResponseHead head,
                                               std::span<const asio::const_buffer> body);

// A whole answer in one go: head, body, end. `content_type` and `retry_after` become fields
// after Cache-Control (as the apiserver's handlers set them).
asio::awaitable<beast::error_code> WriteWhole(Response& response, int status,
                                              std::string_view content_type,
                                              std::span<const asio::const_buffer> body,
                                              std::optional<int> retry_after = std::nullopt);
asio::awaitable<beast::error_code> WriteWhole(Response& response, int status,
                                              std::string_view content_type, std::string_view body);
// A Kubernetes Status answer (status_response.h), as the apiserver writes one.
asio::awaitable<beast::error_code> WriteStatus(Response& response, const KubeStatus& status);

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_RESPONSE_H_
