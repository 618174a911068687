// HeapTrimmer: gives the heap's free pages back to the kernel after a burst of transient
// allocations. A connect storm's TLS handshakes and initial lists allocate and free tens of
// MiB on the I/O threads; glibc's malloc keeps those pages resident in the threads' arenas
// (they shrink only from their top), so without a trim a fleet that connected once costs its
// peak for good: 300 client-go agents left 35 MiB free but resident in two arenas, more than the
// 21 MiB the heap held in use. malloc_trim(0) returns every free page of every arena
// (madvise(MADV_DONTNEED)); the pages are faulted in again when reused.
//
// One look now and then (Server::HeapTrimLoop, --heap-trim-interval): a trim comes when the
// bytes free in malloc's arenas have grown kThreshold past their lowest since the last trim
// (bytes freed since, so resident), so a steady process never trims and a storm's leftovers go
// within one interval after they are freed. A trim leaves the free bytes free (only their pages
// go), so they are the next trim's floor. Memory mapped outside the heap (nghttp2's frame
// buffers, which come and go with traffic) does not count. Looks and trims are counted for
// /metrics.
#ifndef KUBE_FANOUT_SERVER_HEAP_TRIM_H_
#define KUBE_FANOUT_SERVER_HEAP_TRIM_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include "common/metrics_writer.h"

namespace kf {

class HeapTrimmer {
 public:
  // The growth of the heap's free bytes past their lowest that brings a trim.
  static constexpr int64_t kThreshold = 8 << 20;

  struct Sample {
    int64_t resident = 0;  // The process's resident memory (ResidentBytes).
    int64_t in_use = 0;    // Bytes malloc has handed out and not had back (mallinfo2).
    int64_t free = 0;      // Bytes free in malloc's arenas, resident or not (mallinfo2).
  };
  using Probe = std::function<Sample()>;
  using Trim = std::function<void()>;

  struct Result {
    bool trimmed = false;
    Sample before;
    Sample after;  // As before when not trimmed.
    std::chrono::nanoseconds took{0};
  };

  // The default probe and trim are the process's own (glibc); tests pass their own.
  HeapTrimmer();
  HeapTrimmer(Probe probe, Trim trim);

  // One look; trims when the heap's free bytes have grown kThreshold past their lowest since
  // the last trim (since the start: from none).
  Result Check();

  void Render(metrics::Writer& w) const;

 private:
  static Sample ProcessSample();

  Probe probe_;
  Trim trim_;
  int64_t lowest_free_ = 0;  // From none: a burst freed before the first look is trimmed too.
  std::atomic<int64_t> trims_{0};
  std::atomic<int64_t> released_bytes_{0};
  std::atomic<int64_t> trim_nanoseconds_{0};
  std::atomic<int64_t> in_use_{0};
  std::atomic<int64_t> free_{0};
};

}  // namespace kf

#endif  // KUBE_FANOUT_SERVER_HEAP_TRIM_H_
