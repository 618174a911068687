// What the benchmark and the load harness programs share about their own process: a watchdog
// that ends an overrunning run whatever it waits on, and raising the file-descriptor limit.
#ifndef KUBE_FANOUT_TESTS_BENCH_PROCESS_LIMITS_H_
#define KUBE_FANOUT_TESTS_BENCH_PROCESS_LIMITS_H_

#include <sys/resource.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace kf::bench {

// Ends the process (exit status 3) if it is still alive `limit` after construction, unless
// destroyed first.
class Watchdog {
 public:
  Watchdog(std::string program, std::chrono::seconds limit) {
    thread_ = std::thread([this, program = std::move(program), limit] {
      std::unique_lock lock(mu_);
      if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
        std::fprintf(stderr, "%s: watchdog: still running after %lds, exiting\n", program.c_str(),
                     static_cast<long>(limit.count()));
        std::_Exit(3);
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// Raises RLIMIT_NOFILE's soft limit to the hard limit, and the hard limit too when it is short
// of `need` (which takes privilege). Returns the soft limit now in force.
inline rlim_t RaiseNoFile(rlim_t need) {
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  if (r.rlim_max < need) {
    const rlimit raised{need, need};
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return need;
  }
  r.rlim_cur = r.rlim_max;
  setrlimit(RLIMIT_NOFILE, &r);
  getrlimit(RLIMIT_NOFILE, &r);
  return r.rlim_cur;
}

}  // namespace kf::bench

#endif  // KUBE_FANOUT_TESTS_BENCH_PROCESS_LIMITS_H_
