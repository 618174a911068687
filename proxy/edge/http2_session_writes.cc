// Http2Session's writes (http2_session.h): nghttp2's frames gathered into batches of up to 64 KiB,
// sent by the connection's writer (WriteLoop), or, when a watch's wake-up framed them while the
// writer was idle, straight to the socket at the end of the thread's wake-ups (SendBatchedWrites:
// one io_uring submission for many connections, TLS records encrypted at once).
#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "common/use_nothrow.h"
#include "proxy/edge/deadlines.h"
#include "proxy/edge/http2_session.h"

namespace kf {
namespace {

// The connections whose FrameNow left frames for this thread's SendBatchedWrites.
struct BatchedWrites {
  std::vector<std::weak_ptr<Http2Session>> sessions;  // Not kept alive by this list.
  bool posted = false;                                // A handler that sends them is queued.
};
thread_local BatchedWrites batched_writes;

}  // namespace

void SendBatchedWrites() {
  BatchedWrites& b = batched_writes;
  if (b.sessions.empty()) return;
  // The connections' writes go to the kernel together (BatchedSends) where io_uring is in use;
  // each session is told its result as the burst ends.
  const BatchedSends::Burst burst;
  // SendBatched adds nothing to the list (it only writes, or wakes a writer).
  for (const std::weak_ptr<Http2Session>& weak : b.sessions) {
    if (const std::shared_ptr<Http2Session> s = weak.lock()) s->SendBatched();
  }
  b.sessions.clear();
}

template <typename Enough>
bool Http2Session::Gather(std::string& out, Enough enough) {
  in_nghttp2_ = true;
  gathering_ = &out;
  absl::Cleanup out_of_nghttp2 = [this] {
    in_nghttp2_ = false;
    gathering_ = nullptr;
  };
  while (out.size() < kWriteBatchBytes && !enough()) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) return false;
    if (n == 0) break;
    Framed();
    // A batch after a quiet spell starts with the last one's room: one allocation instead of a
    // doubling every few frames (the largest caller of malloc in a profile of 10,000 HTTP/2
    // watches), while a quiet connection still holds none.
    if (out.empty()) out.reserve(std::max(last_batch_, static_cast<size_t>(n)));
    out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
  return true;
}

bool Http2Session::can_frame_now() const {
  return !done_ && !send_failed_ && !in_nghttp2_ && session_ != nullptr && !queued_self_ &&
         pending_.size() < kWriteBatchBytes;
}

bool Http2Session::FrameNow(const Http2Stream& stream) {
  if (!can_frame_now()) return false;
  const bool was_empty = pending_.empty();
  if (!Gather(pending_, [&stream] { return stream.out_drained(); })) send_failed_ = true;
  // Sent once per batch, however many streams add to it: by SendBatchedWrites at the end of
  // the caller's burst (straight to the socket when the writer is idle), or by the writer.
  if (send_failed_ || (was_empty && !pending_.empty() && !ListForBatchedSend())) Flush();
  return stream.out_drained();
}

bool Http2Session::ListForBatchedSend() {
  // TLS: only a client's (TlsServerStream, which can write without waiting), and not while
  // ciphertext from the last batch waits for the writer.
  if (!writer_idle_ || tls_held_ || (stream_.is_tls() && stream_.tls_server() == nullptr)) {
    return false;
  }
  if (batched_) return true;
  batched_ = true;
  BatchedWrites& b = batched_writes;
  b.sessions.push_back(weak_from_this());
  if (!b.posted) {
    b.posted = true;
    asio::post(executor_, [] {
      batched_writes.posted = false;
      SendBatchedWrites();
    });
  }
  return true;
}

void Http2Session::SendBatched() {
  batched_ = false;
  if (pending_.empty() || queued_self_) return;
  if (done_ || !writer_idle_ || tls_held_) {
    Flush();  // The writer sends it after what it is writing (or sees the end).
    return;
  }
  // The frames are in nghttp2's order, and nothing else is being written.
  const int fd = stream_.tcp().socket().native_handle();
  beast::error_code ec;
  if (TlsServerStream* tls = stream_.tls_server()) {
    // Encrypted at once (one record per 16 KiB); what the socket does not take now waits as
    // ciphertext, which the writer sends before anything else.
    const std::array<asio::const_buffer, 1> batch{asio::buffer(pending_)};
    const bool encrypted = tls->EncryptAll(batch, ec);
    last_batch_ = pending_.size();
    std::string().swap(pending_);  // Encrypted (or failed): the plaintext is done with.
    if (!encrypted) {
      send_failed_ = true;
      Flush();
      return;
    }
    const std::array<asio::const_buffer, 1> records{asio::buffer(tls->ciphertext())};
    if (records[0].size() == 0) return;
    if (BatchedSends::Queue(fd, records, this)) {
      queued_self_ = shared_from_this();
      return;
    }
    const size_t written = stream_.WriteWithoutWaiting(records, ec);
    if (ec) send_failed_ = true;
    BatchWritten(ec ? 0 : written);
    return;
  }
  const std::array<asio::const_buffer, 1> batch{asio::buffer(pending_)};
  if (BatchedSends::Queue(fd, batch, this)) {
    queued_self_ = shared_from_this();
    return;
  }
  const size_t written = stream_.WriteWithoutWaiting(batch, ec);
  BatchWritten(ec ? 0 : written);  // An error is the writer's (its write fails too).
}

void Http2Session::Sent(int64_t result, std::span<const iovec> /*sent*/) {
  const std::shared_ptr<Http2Session> self = std::move(queued_self_);
  const bool failed = result < 0 && result != -EAGAIN && result != -EWOULDBLOCK;
  if (failed && stream_.tls_server() != nullptr) send_failed_ = true;
  BatchWritten(result > 0 ? static_cast<size_t>(result) : 0);
}

void Http2Session::BatchWritten(size_t written) {
  if (TlsServerStream* tls = stream_.tls_server()) {
    if (send_failed_) {
      Flush();
      return;
    }
    if (tls->Wrote(written) == TlsServerStream::TryWriteResult::kWritten) return;
    tls_held_ = true;
    Flush();
    return;
  }
  if (written == pending_.size()) {
    last_batch_ = written;
    std::string().swap(pending_);  // A quiet connection holds no batch.
    return;
  }
  pending_.erase(0, written);
  Flush();  // The rest, or the error, is the writer's.
}

asio::awaitable<void> Http2Session::WriteLoop() {
  std::string out;
  for (;;) {
    if (tls_held_) {  // SendBatched's ciphertext the socket did not take: first, and whole.
      tls_held_ = false;
      stream_.tcp().expires_after(kWriteTimeout);
      if (co_await stream_.tls_server()->Flush()) break;
    }
    // What was framed since the last write goes first (nghttp2's order), then more frames.
    out.clear();
    if (!pending_.empty()) {
      out = std::move(pending_);
      pending_.clear();
    }
    if (!send_failed_ && !Gather(out, [] { return false; })) send_failed_ = true;
    const bool failed = send_failed_;
    if (!out.empty()) {
      last_batch_ = out.size();
      stream_.tcp().expires_after(kWriteTimeout);
      auto [ec, written] = co_await asio::async_write(stream_, asio::buffer(out), use_nothrow);
      if (ec) break;
      continue;
    }
    if (failed || done_ ||
        (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_))) {
      break;
    }
    // Nothing to send for now: the batch's buffer goes with it, so a quiet connection holds
    // none (the next wake-up allocates what it gathers).
    std::string().swap(out);
    std::string().swap(pending_);
    writer_idle_ = true;
    const bool woken = co_await write_wake_.Wait();
    writer_idle_ = false;
    if (!woken) break;
  }
  done_ = true;
  idle_timer_.cancel();
  stream_.Cancel();  // Ends the reader.
}

}  // namespace kf
