// Histogram: a Prometheus histogram of durations with fixed buckets, safe to observe from any
// thread (relaxed atomic counters: a scrape may see one observation's bucket before its count,
// never a count that goes down). Header-only.
#ifndef KUBE_FANOUT_COMMON_HISTOGRAM_H_
#define KUBE_FANOUT_COMMON_HISTOGRAM_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/metrics_writer.h"
#include "common/strings.h"

namespace kf::metrics {

// Upper bounds in seconds, ascending; +Inf is implied.
inline constexpr std::array<double, 13> kLatencyBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

class Histogram {
 public:
  static constexpr size_t kBuckets = kLatencyBuckets.size() + 1;  // The last: past every bound.
  using Counts = std::array<uint64_t, kBuckets>;

  // The bucket `d` falls in (its upper bound the first at or above it).
  static size_t BucketOf(std::chrono::nanoseconds d) {
    const double seconds = std::chrono::duration<double>(d).count();
    return static_cast<size_t>(
        std::lower_bound(kLatencyBuckets.begin(), kLatencyBuckets.end(), seconds) -
        kLatencyBuckets.begin());
  }

  // Observations counted by bucket without atomics (a thread's own), added at once by Add.
  struct Tally {
    Counts counts{};
    uint64_t sum_ns = 0;
    void Count(std::chrono::nanoseconds d) {
      ++counts[BucketOf(d)];
      sum_ns += static_cast<uint64_t>(std::max<int64_t>(0, d.count()));
    }
  };

  void Observe(std::chrono::nanoseconds d) {
    Tally one;
    one.Count(d);
    Add(one);
  }
  // Many observations at once: one atomic addition per bucket used instead of one per
  // observation.
  void Add(const Tally& tally) {
    for (size_t i = 0; i < kBuckets; ++i) {
      if (tally.counts[i] != 0) counts_[i].fetch_add(tally.counts[i], std::memory_order_relaxed);
    }
    sum_ns_.fetch_add(tally.sum_ns, std::memory_order_relaxed);
  }

  uint64_t count() const {
    uint64_t n = 0;
    for (const auto& c : counts_) n += c.load(std::memory_order_relaxed);
    return n;
  }

  // The family: cumulative _bucket samples (le="..." and le="+Inf"), _sum in seconds, _count.
  void Write(Writer& w, std::string_view name, std::string_view help) const {
    w.Family(name, "histogram", help);
    const std::string bucket = absl::StrCat(ToAbsl(name), "_bucket");
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kLatencyBuckets.size(); ++i) {
      cumulative += counts_[i].load(std::memory_order_relaxed);
      w.Sample(bucket, absl::StrCat("le=\"", kLatencyBuckets[i], "\""),
               static_cast<double>(cumulative));
    }
    cumulative += counts_.back().load(std::memory_order_relaxed);
    w.Sample(bucket, "le=\"+Inf\"", static_cast<double>(cumulative));
    w.Sample(absl::StrCat(ToAbsl(name), "_sum"), "",
             static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9);
    w.Sample(absl::StrCat(ToAbsl(name), "_count"), "", static_cast<double>(cumulative));
  }

 private:
  std::array<std::atomic<uint64_t>, kBuckets> counts_{};
  std::atomic<uint64_t> sum_ns_{0};
};

}  // namespace kf::metrics

#endif  // KUBE_FANOUT_COMMON_HISTOGRAM_H_
