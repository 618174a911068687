#include "tests/load/load_report.h"

namespace kf::load {

std::vector<std::pair<uint64_t, double>> CdfPoints(const tools::LatencyHistogram& h) {
  std::vector<std::pair<uint64_t, double>> out;
  if (h.count() == 0) return out;
  std::vector<double> qs;
  for (int i = 1; i <= 36; ++i) qs.push_back(i / 40.0);  // Not i * 0.025: no 0.07500000000000001.
  for (double q : {0.925, 0.95, 0.975, 0.99, 0.995, 0.999, 1.0}) qs.push_back(q);
  for (double q : qs) {
    const uint64_t us = h.PercentileMicros(q);
    // Several quantiles in one bucket: keep the highest fraction for that value.
    if (!out.empty() && out.back().first >= us) {
      out.back().second = q;
    } else {
      out.emplace_back(us, q);
    }
  }
  return out;
}

void WriteLatency(JsonWriter& w, const tools::LatencyHistogram& h, bool with_cdf) {
  w.StartObject();
  w.Key("count");
  w.Uint64(h.count());
  for (const auto& [name, q] :
       {std::pair{"p50", 0.5}, std::pair{"p90", 0.9}, std::pair{"p99", 0.99}}) {
    w.Key(name);
    w.Uint64(h.PercentileMicros(q));
  }
  w.Key("max");
  w.Uint64(h.max_us());
  if (with_cdf) {
    w.Key("cdf");
    // One line: forty pairs one number per line would drown the rest of the file.
    w.SetFormatOptions(rapidjson::kFormatSingleLineArray);
    w.StartArray();
    for (const auto& [us, fraction] : CdfPoints(h)) {
      w.StartArray();
      w.Uint64(us);
      w.Double(fraction);
      w.EndArray();
    }
    w.EndArray();
    w.SetFormatOptions(rapidjson::kFormatDefault);
  }
  w.EndObject();
}

}  // namespace kf::load
