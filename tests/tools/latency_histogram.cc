#include "tests/tools/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace kf::tools {

int LatencyHistogram::BucketOf(uint64_t us) {
  if (us < kLinear) return static_cast<int>(us);
  const int exponent = std::bit_width(us) - 1;  // >= kSubBits + 1
  const uint64_t sub = (us >> (exponent - kSubBits)) & ((1u << kSubBits) - 1);
  return static_cast<int>(kLinear +
                          static_cast<uint64_t>(exponent - kSubBits - 1) * (1u << kSubBits) + sub);
}

uint64_t LatencyHistogram::MidpointOf(int bucket) {
  if (bucket < static_cast<int>(kLinear)) return static_cast<uint64_t>(bucket);
  const int rel = bucket - static_cast<int>(kLinear);
  const int exponent = rel / (1 << kSubBits) + kSubBits + 1;
  const uint64_t sub = static_cast<uint64_t>(rel % (1 << kSubBits));
  const uint64_t width = uint64_t{1} << (exponent - kSubBits);
  return ((uint64_t{1} << kSubBits) + sub) * width + width / 2;
}

void LatencyHistogram::RecordNanos(int64_t ns) {
  const uint64_t us = ns <= 0 ? 0 : static_cast<uint64_t>(ns) / 1000;
  ++counts_[static_cast<size_t>(BucketOf(us))];
  ++count_;
  max_us_ = std::max(max_us_, us);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  max_us_ = std::max(max_us_, other.max_us_);
}

uint64_t LatencyHistogram::PercentileMicros(double q) const {
  if (count_ == 0) return 0;
  const double clamped = std::clamp(q, 0.0, 1.0);
  const uint64_t rank = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(clamped * static_cast<double>(count_))));
  if (rank >= count_) return max_us_;  // The largest value is known exactly.
  uint64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::min(MidpointOf(static_cast<int>(i)), max_us_);
  }
  return max_us_;
}

}  // namespace kf::tools
