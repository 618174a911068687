// LatencyHistogram: a log-linear histogram of durations in microseconds (exact below 128 µs,
// then 64 buckets per power of two, so a percentile is within 1.6% of the true value) with an
// exact count and maximum. Fixed size (about 30 KiB), so recording never allocates.
//
// Not thread-safe: each thread records into its own histogram; Merge() combines them after.
#ifndef KUBE_FANOUT_TESTS_TOOLS_LATENCY_HISTOGRAM_H_
#define KUBE_FANOUT_TESTS_TOOLS_LATENCY_HISTOGRAM_H_

#include <array>
#include <cstdint>

namespace kf::tools {

class LatencyHistogram {
 public:
  // Records one duration; negative durations count as zero.
  void RecordNanos(int64_t ns);
  void Merge(const LatencyHistogram& other);

  uint64_t count() const { return count_; }
  uint64_t max_us() const { return max_us_; }
  // The duration at quantile q in [0, 1] (0 when empty), in microseconds: the midpoint of the
  // bucket holding the ceil(q * count)-th smallest value, capped at the exact maximum (which q = 1
  // returns).
  uint64_t PercentileMicros(double q) const;

 private:
  static constexpr int kSubBits = 6;                   // 64 buckets per power of two.
  static constexpr uint64_t kLinear = 2u << kSubBits;  // Exact below 128 µs.
  static constexpr int kBuckets = kLinear + (64 - kSubBits - 1) * (1 << kSubBits);

  static int BucketOf(uint64_t us);
  static uint64_t MidpointOf(int bucket);

  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  uint64_t max_us_ = 0;
};

}  // namespace kf::tools

#endif  // KUBE_FANOUT_TESTS_TOOLS_LATENCY_HISTOGRAM_H_
