// Http1Response: a Response (response.h) written on an HTTP/1.x connection, framed as Go's
// net/http frames the apiserver's answers: Date added, Content-Length when known (a handler's
// whole output up to 2 KiB), chunked when not (close-delimited for HTTP/1.0), no body for HEAD,
// 1xx, 204 and 304, "Connection: close" when the connection ends after it. Every write has a
// deadline.
//
// Owned by the session for one request; used on its thread only.
#ifndef KUBE_FANOUT_EDGE_HTTP1_RESPONSE_H_
#define KUBE_FANOUT_EDGE_HTTP1_RESPONSE_H_

#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "proxy/edge/any_stream.h"
#include "proxy/edge/batched_sends.h"
#include "proxy/edge/exchange.h"
#include "proxy/edge/read_buffer.h"
#include "proxy/edge/response.h"

namespace kf {

class Http1Response : public Response, private BatchedSends::Done {
 public:
  // `buffer`: the session's read buffer (bytes read while watching for the client's end are
  // kept there, bounded; an upgrade hands them to the tunnel).
  Http1Response(AnyStream& stream, beast::flat_buffer& buffer, const Request& request,
                const StopSignal& stop)
      : stream_(stream),
        buffer_(buffer),
        request_(&request),
        stop_(stop),
        socket_hint_(stream.is_tls() ? static_cast<const void*>(stream.tls_server())
                                     : static_cast<const void*>(&stream.tcp().socket())) {}

  // The request's frame is ending while this answer goes on (a detached watch, its head
  // written: Detached): what is left to write needs none of it. A head or a 100 Continue
  // asked for after this fails (operation_not_supported).
  void ForgetRequest() { request_ = nullptr; }

  asio::awaitable<beast::error_code> WriteHead(ResponseHead head) override;
  asio::awaitable<beast::error_code> WriteBody(std::span<const asio::const_buffer> pieces) override;
  asio::awaitable<beast::error_code> End() override;
  asio::awaitable<bool> ClientGone() override;
  void WatchClient(const asio::any_io_executor& executor, std::function<void(bool)> gone) override;
  void StopWatchingClient() override;
  asio::awaitable<beast::error_code> Continue() override;
  void Cancel() override { stream_.Cancel(); }
  // Plain TCP, or a client's TlsServerStream (Asio's TLS stream cannot write without waiting).
  bool can_write_now() const override;
  TryWrite TryWriteBody(std::span<const asio::const_buffer> pieces) override;
  // Inside a fan-out's burst: a send in the thread's batch (BatchedSends), of the chunk or
  // (over TLS) of its records, encrypted at once.
  TryWrite TryWriteBodyOrQueue(std::span<const asio::const_buffer> pieces,
                               WriteDone& done) override;
  asio::awaitable<beast::error_code> FinishWrite() override;
  void CloseAfter() override { close_after_ = true; }
  void PrefetchTransport() const override {
    __builtin_prefetch(&stream_);
    if (socket_hint_ != nullptr) __builtin_prefetch(socket_hint_);
  }
  std::optional<Upgraded> TakeUpgraded() override;

  bool head_written() const override { return status_ != 0; }
  int status() const override { return status_; }
  uint64_t body_bytes() const override { return body_bytes_; }

  // The connection may read the next request: the answer was ended whole and nothing asked
  // for the connection to close. Reading the client meanwhile (ClientGone, WatchClient) keeps
  // it reusable unless that read saw the client's end or more than could be kept: what it read
  // (a pipelined next request) is in the session's buffer, as Go's server keeps its background
  // read's byte. An answer that said keep-alive is then followed by the next one, never by a
  // close the client was not told of.
  bool reusable() const {
    return ended_ && keep_alive_ && !close_after_ && !failed_ && !upgraded_ && !client_lost_;
  }

 private:
  enum class Body { kNone, kLength, kChunked, kUntilClose };
  TryWrite DirectWrite(std::span<const asio::const_buffer> pieces, WriteDone* done);
  // What the socket did not take of `framed` after `written` bytes goes to held_.
  template <class Buffers>
  TryWrite HoldRest(const Buffers& framed, size_t written);
  // The same over TLS: the stream keeps the records the socket did not take.
  TryWrite TlsWrote(TlsServerStream& tls, size_t written);
  void Sent(int64_t result, std::span<const iovec> sent) override;  // BatchedSends::Done
  asio::awaitable<beast::error_code> Write(std::span<const asio::const_buffer> buffers);
  std::string SerializeHead(const ResponseHead& head);
  // Reading the client while an answer is written (ClientGone, WatchClient): starts it, and
  // keeps what was read (bounded) in the session's buffer.
  void StartReadingClient();
  void KeepClientBytes(const char* data, size_t n);
  // A read of the client's side ended: `ec` says how (aborted: by us). True if the client left.
  bool ClientReadEnded(const beast::error_code& ec);
  // WatchClient's: waits until the client's side is readable holding no buffer, then reads
  // what came (again at once while reads fill the buffer), then waits again.
  void WaitForClient();
  void ReadClient();
  void ClientWatchEnded(const beast::error_code& ec);
  using ClientReadBuffer = ReadBuffer<512, 16 * 1024>;
  struct ClientWatch {
    std::function<void(bool)> gone;
    std::unique_ptr<ClientReadBuffer> in;  // Only while a read is under way.
  };

  AnyStream& stream_;
  beast::flat_buffer& buffer_;
  const Request* request_;  // Null once forgotten (ForgetRequest).
  const StopSignal& stop_;
  // Where the stream's socket (or TLS stream) is, for PrefetchTransport only.
  const void* socket_hint_;
  int status_ = 0;
  Body body_ = Body::kNone;
  bool keep_alive_ = false;
  bool close_after_ = false;
  bool ended_ = false;
  bool failed_ = false;
  bool upgraded_ = false;     // The connection went to a tunnel.
  bool client_lost_ = false;  // A read meanwhile saw the client's end, or dropped its bytes.
  bool continued_ = false;
  uint64_t body_bytes_ = 0;
  // TryWriteBody's: the chunk's size line, and what the socket did not take yet (empty, and
  // no room kept, unless a client is behind).
  std::string chunk_size_;
  std::vector<asio::const_buffer> held_;
  bool tls_held_ = false;        // TryWriteBody left ciphertext in the TLS stream (FinishWrite).
  WriteDone* queued_ = nullptr;  // A send in the thread's batch, to be told (Sent).
  std::unique_ptr<ClientWatch> watch_;  // While WatchClient reads.
};

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_HTTP1_RESPONSE_H_
