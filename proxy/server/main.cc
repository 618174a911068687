// kube-fanout: entry point. Parses flags, resolves the upstream, starts the server.
#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <iostream>

#include "absl/synchronization/mutex.h"
#include "common/log.h"
#include "proxy/server/options.h"
#include "proxy/server/server.h"
#include "proxy/server/version.h"

int main(int argc, char** argv) {
  // A peer that closed its end must cost a write error, never the process (as in Go): every
  // socket write already asks for no signal; this covers any that does not.
  std::signal(SIGPIPE, SIG_IGN);
  auto options = kf::ParseFlags(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "Error: %s\nRun 'kube-fanout --help' for usage.\n",
                 std::string(options.status().message()).c_str());
    return 2;
  }
  if (options->help) {
    std::cout << kf::HelpText();
    return 0;
  }
  if (options->version) {
    std::cout << "kube-fanout " << kf::kVersion << "\n";
    return 0;
  }
  if (auto s = kf::Validate(*options); !s.ok()) {
    std::fprintf(stderr, "Error: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  // Debian's abseil is built with absl::Mutex's deadlock detection on (its debug default): a
  // lock-order graph updated on every Lock, 4.5 % of kube-fanout's CPU in the fan-out
  // benchmark's profile. The unit tests keep it; the process does not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Thousands of watchers are thousands of sockets: use all the descriptors allowed.
  if (rlimit nofile{};
      getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  const kf::Logger log(
      2, options->verbosity >= 4 ? kf::Logger::Level::kDebug : kf::Logger::Level::kInfo);
  auto upstream = kf::ResolveUpstream(*options);
  if (!upstream.ok()) {
    log.Error("cannot configure the upstream",
              {{"error", std::string(upstream.status().message())}});
    return 1;
  }
  kf::Server server(*std::move(options), *std::move(upstream), log);
  if (auto s = server.Start(); !s.ok()) {
    log.Error("cannot start", {{"error", std::string(s.message())}});
    return 1;
  }
  return server.Run();
}
