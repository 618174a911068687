// The process_* families every Prometheus client library exports.
#ifndef KUBE_FANOUT_SERVER_PROCESS_METRICS_H_
#define KUBE_FANOUT_SERVER_PROCESS_METRICS_H_

#include <cstddef>
#include <cstdint>

#include "common/metrics_writer.h"

namespace kf {

// Resident memory, CPU seconds, open and maximum descriptors, start time, read from /proc/self
// at each call; nothing where /proc cannot be read.
void RenderProcessMetrics(metrics::Writer& w);

// The process's open file descriptors (process_open_fds).
size_t OpenFds();

// The process's resident memory in bytes (process_resident_memory_bytes; /proc/self/statm); 0
// where it cannot be read.
int64_t ResidentBytes();

}  // namespace kf

#endif  // KUBE_FANOUT_SERVER_PROCESS_METRICS_H_
