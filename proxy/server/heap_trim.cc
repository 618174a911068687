#include "proxy/server/heap_trim.h"

#include <malloc.h>

#include <algorithm>
#include <utility>

#include "proxy/server/process_metrics.h"

namespace kf {

HeapTrimmer::HeapTrimmer() : HeapTrimmer(&HeapTrimmer::ProcessSample, [] { malloc_trim(0); }) {}

HeapTrimmer::HeapTrimmer(Probe probe, Trim trim)
    : probe_(std::move(probe)), trim_(std::move(trim)) {}

HeapTrimmer::Sample HeapTrimmer::ProcessSample() {
  Sample s;
  s.resident = ResidentBytes();
  const struct mallinfo2 heap = mallinfo2();
  s.in_use = static_cast<int64_t>(heap.uordblks + heap.hblkhd);
  s.free = static_cast<int64_t>(heap.fordblks);
  return s;
}

HeapTrimmer::Result HeapTrimmer::Check() {
  Result r;
  r.before = probe_();
  r.after = r.before;
  in_use_.store(r.before.in_use, std::memory_order_relaxed);
  free_.store(r.before.free, std::memory_order_relaxed);
  lowest_free_ = std::min(lowest_free_, r.before.free);
  if (r.before.free - lowest_free_ < kThreshold) return r;
  const auto start = std::chrono::steady_clock::now();
  trim_();
  r.took = std::chrono::steady_clock::now() - start;
  r.after = probe_();
  r.trimmed = true;
  lowest_free_ = r.after.free;
  trims_.fetch_add(1, std::memory_order_relaxed);
  released_bytes_.fetch_add(std::max<int64_t>(0, r.before.resident - r.after.resident),
                            std::memory_order_relaxed);
  trim_nanoseconds_.fetch_add(r.took.count(), std::memory_order_relaxed);
  in_use_.store(r.after.in_use, std::memory_order_relaxed);
  free_.store(r.after.free, std::memory_order_relaxed);
  return r;
}

void HeapTrimmer::Render(metrics::Writer& w) const {
  auto value = [](const std::atomic<int64_t>& v) {
    return static_cast<double>(v.load(std::memory_order_relaxed));
  };
  w.Single("kube_fanout_heap_in_use_bytes", "gauge",
           "Bytes the heap (glibc's malloc) had handed out and not had back at its last look "
           "(--heap-trim-interval).",
           value(in_use_));
  w.Single("kube_fanout_heap_free_bytes", "gauge",
           "Bytes free in the heap's arenas at its last look, resident or given back.",
           value(free_));
  w.Single("kube_fanout_heap_trims_total", "counter",
           "Times the heap's free pages were given back to the kernel (malloc_trim) because the "
           "bytes free in its arenas had grown 8 MiB past their lowest since the last time.",
           value(trims_));
  w.Single("kube_fanout_heap_trim_released_bytes_total", "counter",
           "Resident memory those trims gave back.", value(released_bytes_));
  w.Single("kube_fanout_heap_trim_seconds_total", "counter", "Time those trims took.",
           value(trim_nanoseconds_) / 1e9);
}

}  // namespace kf
