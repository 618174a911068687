#include "proxy/server/process_metrics.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kf {

size_t OpenFds() {
  // Linux 6.2 and later give the count as /proc/self/fd's size: listing the directory instead
  // took 7 % of kube-fanout's CPU with 10,000 connections and a scrape a second. Earlier
  // kernels say 0 there, and are listed.
  struct stat st {};
  if (stat("/proc/self/fd", &st) == 0 && st.st_size > 0) return static_cast<size_t>(st.st_size);
  std::error_code ec;
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

int64_t ResidentBytes() {
  // statm: size, resident, ... in pages.
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0;
  int64_t resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * sysconf(_SC_PAGESIZE);
}

void RenderProcessMetrics(metrics::Writer& w) {
  // /proc/self/stat: the fields after the command's closing parenthesis, numbered from 3
  // (proc(5)): 14 utime, 15 stime, 22 starttime (clock ticks).
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return;
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(paren + 2), ' ');
  auto field = [&fields](size_t n) {
    double v = 0;
    return n - 3 < fields.size() && absl::SimpleAtod(fields[n - 3], &v) ? v : 0.0;
  };
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  double boot_time = 0;  // /proc/stat's btime: the boot's Unix time.
  std::ifstream proc_stat("/proc/stat");
  for (std::string line; std::getline(proc_stat, line);) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "btime ")) absl::SimpleAtod(rest, &boot_time);
  }
  const double open_fds = static_cast<double>(OpenFds());
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);

  w.Single("process_cpu_seconds_total", "counter", "Total user and system CPU time in seconds.",
           (field(14) + field(15)) / ticks);
  w.Single("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
           static_cast<double>(ResidentBytes()));
  w.Single("process_open_fds", "gauge", "Number of open file descriptors.", open_fds);
  w.Single("process_max_fds", "gauge", "Maximum number of open file descriptors.",
           static_cast<double>(nofile.rlim_cur));
  w.Single("process_start_time_seconds", "gauge",
           "Start time of the process since unix epoch in seconds.", boot_time + field(22) / ticks);
}

}  // namespace kf
