// The write stamp: the churn writes the wall-clock time of each write, in nanoseconds since the
// Unix epoch, in an annotation of the object; the watchers read it back from the event to time
// the write's delivery.
#ifndef KUBE_FANOUT_TESTS_TOOLS_WRITE_STAMP_H_
#define KUBE_FANOUT_TESTS_TOOLS_WRITE_STAMP_H_

#include <cstdint>
#include <string_view>

namespace kf::tools {

// The annotation the churn writes and the watchers read.
inline constexpr std::string_view kWrittenAtAnnotation = "kube-fanout.bench/written-at";

// The wall clock (CLOCK_REALTIME) in nanoseconds since the Unix epoch.
int64_t UnixNanos();

}  // namespace kf::tools

#endif  // KUBE_FANOUT_TESTS_TOOLS_WRITE_STAMP_H_
