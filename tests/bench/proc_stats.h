// ProcStats: what the benchmark reads from /proc about the processes it watches (kube-fanout,
// the apiserver, etcd, itself) and about the machine, and the one look-up it needs in the
// Prometheus text format. Plain functions over /proc files; no state.
#ifndef KUBE_FANOUT_TESTS_BENCH_PROC_STATS_H_
#define KUBE_FANOUT_TESTS_BENCH_PROC_STATS_H_

#include <sys/types.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kf::bench {

struct ProcSample {
  uint64_t rss_kib = 0;
  double cpu_seconds = 0;  // utime + stime, at the kernel's USER_HZ resolution.
  int threads = 0;
};
// std::nullopt when the process is gone.
std::optional<ProcSample> ReadProc(pid_t pid);

// CPU seconds of each thread of `pid` (/proc/PID/task/TID/stat).
struct ThreadCpu {
  int tid = 0;
  std::string name;
  double cpu_seconds = 0;
};
std::vector<ThreadCpu> ReadThreads(pid_t pid);

// This process's user+system CPU seconds (getrusage, microsecond resolution).
double SelfCpuSeconds();

// Whole-machine CPU time from /proc/stat, in seconds summed over all CPUs.
struct MachineCpu {
  double busy = 0;  // Everything but idle and iowait.
  double total = 0;
};
MachineCpu ReadMachineCpu();

// Bytes waiting in the kernel on loopback TCP connections (from /proc/net/tcp): on connections
// to `port`, received by the clients but not yet read by them, and written by the server but
// not yet acknowledged by the clients' kernel; on connections to `upstream_port`, received by
// the clients (kube-fanout's upstream watches, mostly) but not yet read.
struct SocketQueues {
  uint64_t client_unread = 0;
  uint64_t server_unacked = 0;
  uint64_t upstream_unread = 0;
  int connections = 0;
};
SocketQueues ReadSocketQueues(uint16_t port, uint16_t upstream_port);

// TCP buffer memory in use system-wide, in bytes (/proc/net/sockstat "TCP: ... mem" pages).
uint64_t ReadTcpMemoryBytes();

// The sum of the samples of metric `name` whose label set contains every one of `labels`
// (each written as `key="value"`), in Prometheus text. std::nullopt when none matched.
std::optional<double> MetricSum(std::string_view text, std::string_view name,
                                std::initializer_list<std::string_view> labels);

}  // namespace kf::bench

#endif  // KUBE_FANOUT_TESTS_BENCH_PROC_STATS_H_
