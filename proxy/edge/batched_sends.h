// BatchedSends: many sockets' writes in one system call. A fan-out writes each event to
// thousands of sockets in one burst (serve's Wakeups drain); a write(2) per socket pays a system
// call's entry and exit and a descriptor lookup each time. Here the burst's writes are queued
// as io_uring sends and go to the kernel up to kEntries at a time, in one io_uring_enter each.
// Every send carries MSG_DONTWAIT: it takes what the socket takes at once (all, part, or
// nothing: -EAGAIN) and never waits, so each has its result before the burst ends (Flush) and
// the writer goes on as after a write of its own.
//
// One per thread, used only on it, and only inside a burst (StartBurst .. EndBurst); outside
// one, or where io_uring cannot be set up (an old kernel, a seccomp profile that forbids it,
// Enable(false)), Queue says no and writers write directly.
#ifndef KUBE_FANOUT_EDGE_BATCHED_SENDS_H_
#define KUBE_FANOUT_EDGE_BATCHED_SENDS_H_

#include <sys/uio.h>

#include <boost/asio/buffer.hpp>
#include <cstdint>
#include <span>

#include "absl/status/status.h"

namespace kf {

class BatchedSends {
 public:
  // Told a queued send's result: the bytes the socket took, or -errno (-EAGAIN: none, the
  // socket was full). `sent` is what was queued, valid during the call only.
  class Done {
   public:
    virtual void Sent(int64_t result, std::span<const iovec> sent) = 0;

   protected:
    ~Done() = default;
  };

  static constexpr unsigned kEntries = 256;  // Sends per io_uring_enter.
  static constexpr size_t kMaxPieces = 20;   // Buffers per send; more: not queued.

  // Process-wide, set before the threads' first burst; turning it off takes effect at once.
  // Default: off.
  static void Enable(bool on);
  // Whether io_uring can be set up on this machine (a ring made and closed at once).
  static absl::Status Probe();

  // Marks the start and end of this thread's burst. EndBurst sends what is queued and tells
  // each writer its result. Bursts do not nest: an inner StartBurst is ignored, and so is its
  // EndBurst.
  static void StartBurst();
  static void EndBurst();
  // StartBurst, and EndBurst when it goes out of scope.
  class Burst {
   public:
    Burst() { StartBurst(); }
    ~Burst() { EndBurst(); }
    Burst(const Burst&) = delete;
    Burst& operator=(const Burst&) = delete;
  };

  // Queues a send of `buffers` on `fd` in this thread's burst. True: `done->Sent` is called
  // before EndBurst returns (or earlier, when the ring is full), and `buffers`' bytes must stay
  // valid until then. False: nothing was queued (no burst, io_uring not in use, too many
  // buffers, or the results of a flush being told); write directly.
  static bool Queue(int fd, std::span<const boost::asio::const_buffer> buffers, Done* done);

  // Totals over all threads, for metrics: io_uring_enter calls that submitted sends, and sends.
  static uint64_t submits();
  static uint64_t sends();
};

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_BATCHED_SENDS_H_
