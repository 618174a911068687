// Pieces of kf_load's result JSON (tests/load/CONTRACT.md) that are more than field copying.
#ifndef KUBE_FANOUT_TESTS_LOAD_LOAD_REPORT_H_
#define KUBE_FANOUT_TESTS_LOAD_LOAD_REPORT_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "rapidjson/prettywriter.h"
#include "rapidjson/stringbuffer.h"
#include "tests/tools/latency_histogram.h"

namespace kf::load {

using JsonWriter = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

// About 40 points [microseconds, fraction of samples at or below] spanning the distribution,
// denser in the tail, ascending in both, the last one [max, 1]. Empty for an empty histogram.
std::vector<std::pair<uint64_t, double>> CdfPoints(const tools::LatencyHistogram& h);

// {"count":..,"p50":..,"p90":..,"p99":..,"max":..} and, when asked, "cdf": [[us, fraction], ...].
void WriteLatency(JsonWriter& w, const tools::LatencyHistogram& h, bool with_cdf);

}  // namespace kf::load

#endif  // KUBE_FANOUT_TESTS_LOAD_LOAD_REPORT_H_
