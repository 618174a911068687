#include "tests/bench/proc_stats.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kf::bench {
namespace {

std::optional<std::string> Slurp(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The fields of a /proc stat line after "(comm)" (which may itself hold spaces and parentheses):
// f[0] is field 3 (state), so utime (14) is f[11], stime (15) f[12], num_threads (20) f[17].
std::vector<std::string> StatFields(const std::string& stat, std::string* comm) {
  std::vector<std::string> f;
  const size_t open = stat.find('(');
  const size_t close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return f;
  if (comm != nullptr) *comm = stat.substr(open + 1, close - open - 1);
  std::istringstream fields(stat.substr(close + 1));
  for (std::string x; fields >> x;) f.push_back(x);
  return f;
}

double CpuSeconds(const std::vector<std::string>& f) {
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  return (std::strtod(f[11].c_str(), nullptr) + std::strtod(f[12].c_str(), nullptr)) / hz;
}

}  // namespace

std::vector<ThreadCpu> ReadThreads(pid_t pid) {
  std::vector<ThreadCpu> out;
  std::error_code ec;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    auto stat = Slurp(it->path().string() + "/stat");
    if (!stat) continue;
    ThreadCpu t;
    const auto f = StatFields(*stat, &t.name);
    if (f.size() < 18) continue;
    t.tid = std::atoi(it->path().filename().c_str());
    t.cpu_seconds = CpuSeconds(f);
    out.push_back(std::move(t));
  }
  return out;
}

std::optional<ProcSample> ReadProc(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  auto stat = Slurp(dir + "/stat");
  auto status = Slurp(dir + "/status");
  if (!stat || !status) return std::nullopt;
  ProcSample s;
  const auto f = StatFields(*stat, nullptr);
  if (f.size() < 18) return std::nullopt;
  s.cpu_seconds = CpuSeconds(f);
  s.threads = std::atoi(f[17].c_str());
  const size_t rss = status->find("\nVmRSS:");
  if (rss != std::string::npos) s.rss_kib = std::strtoull(status->c_str() + rss + 7, nullptr, 10);
  return s;
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

MachineCpu ReadMachineCpu() {
  MachineCpu m;
  auto stat = Slurp("/proc/stat");
  if (!stat) return m;
  std::istringstream line(stat->substr(0, stat->find('\n')));
  std::string cpu;
  line >> cpu;
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  double v = 0;
  for (int i = 0; line >> v; ++i) {
    if (i >= 8) break;  // guest and guest_nice are already inside user and nice.
    m.total += v / hz;
    if (i != 3 && i != 4) m.busy += v / hz;  // 3 idle, 4 iowait
  }
  return m;
}

SocketQueues ReadSocketQueues(uint16_t port, uint16_t upstream_port) {
  SocketQueues q;
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // Header.
  // "  12: 0100007F:1F90 0100007F:C350 01 00000000:00000000 ..." (ports and queues in hex)
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string slot, local, remote, state, queues;
    if (!(f >> slot >> local >> remote >> state >> queues)) continue;
    const size_t lc = local.find(':'), rc = remote.find(':'), qc = queues.find(':');
    if (lc == std::string::npos || rc == std::string::npos || qc == std::string::npos) continue;
    const auto local_port = std::strtoul(local.c_str() + lc + 1, nullptr, 16);
    const auto remote_port = std::strtoul(remote.c_str() + rc + 1, nullptr, 16);
    const uint64_t tx = std::strtoull(queues.substr(0, qc).c_str(), nullptr, 16);
    const uint64_t rx = std::strtoull(queues.c_str() + qc + 1, nullptr, 16);
    if (state != "01") continue;  // ESTABLISHED only.
    if (remote_port == port) {
      q.client_unread += rx;
      ++q.connections;
    } else if (local_port == port) {
      q.server_unacked += tx;
    } else if (remote_port == upstream_port) {
      q.upstream_unread += rx;
    }
  }
  return q;
}

uint64_t ReadTcpMemoryBytes() {
  auto text = Slurp("/proc/net/sockstat");
  if (!text) return 0;
  const size_t tcp = text->find("TCP:");
  if (tcp == std::string::npos) return 0;
  const size_t mem = text->find(" mem ", tcp);
  const size_t eol = text->find('\n', tcp);
  if (mem == std::string::npos || mem > eol) return 0;
  return std::strtoull(text->c_str() + mem + 5, nullptr, 10) *
         static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

std::optional<double> MetricSum(std::string_view text, std::string_view name,
                                std::initializer_list<std::string_view> labels) {
  std::optional<double> sum;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() <= name.size() || line.substr(0, name.size()) != name) continue;
    const char next = line[name.size()];
    if (next != '{' && next != ' ') continue;
    std::string_view label_set;
    if (next == '{') {
      const size_t close = line.find('}');
      if (close == std::string_view::npos) continue;
      label_set = line.substr(name.size(), close - name.size() + 1);
    }
    bool all = true;
    for (std::string_view l : labels) {
      // Match whole labels: preceded by { or , so resource="pods" does not match
      // subresource="pods".
      bool found = false;
      for (size_t at = label_set.find(l); at != std::string_view::npos;
           at = label_set.find(l, at + 1)) {
        const char before = at == 0 ? '{' : label_set[at - 1];
        if (before == '{' || before == ',') {
          found = true;
          break;
        }
      }
      if (!found) {
        all = false;
        break;
      }
    }
    if (!all) continue;
    // The value is the first token after the name and labels (a timestamp may follow it).
    std::string_view rest = line.substr(name.size() + label_set.size());
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    const std::string value(rest.substr(0, rest.find(' ')));
    char* stop = nullptr;
    const double v = std::strtod(value.c_str(), &stop);
    if (stop == value.c_str()) continue;
    sum = sum.value_or(0) + v;
  }
  return sum;
}

}  // namespace kf::bench
