#include "proxy/edge/batched_sends.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio/buffer.hpp>
#include <catch2/catch.hpp>
#include <cstddef>
#include <string>
#include <vector>

namespace kf {
namespace {

namespace asio = boost::asio;

// A connected pair of stream sockets, both non-blocking, closed on destruction.
struct SocketPair {
  SocketPair() { REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds.data()) == 0); }
  ~SocketPair() {
    close(fds[0]);
    close(fds[1]);
  }
  SocketPair(const SocketPair&) = delete;
  SocketPair& operator=(const SocketPair&) = delete;
  std::string ReadAll() const {
    std::string out;
    char buf[65536];
    for (;;) {
      const ssize_t n = read(fds[1], buf, sizeof(buf));
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  std::array<int, 2> fds{};
};

struct Result final : BatchedSends::Done {
  virtual ~Result() = default;
  void Sent(int64_t r, std::span<const iovec> sent) override {
    ++calls;
    result = r;
    pieces = sent.size();
  }
  int calls = 0;
  int64_t result = 0;
  size_t pieces = 0;
};

void RequireIoUring() {
  const absl::Status s = BatchedSends::Probe();
  INFO("io_uring on this machine: " << s.ToString());
  REQUIRE(s.ok());
  BatchedSends::Enable(true);
}

TEST_CASE("BatchedSends queues only inside a burst") {
  RequireIoUring();
  SocketPair p;
  Result r;
  const std::string data = "abc";
  const std::array<asio::const_buffer, 1> b{asio::buffer(data)};
  CHECK_FALSE(BatchedSends::Queue(p.fds[0], b, &r));
  BatchedSends::StartBurst();
  BatchedSends::StartBurst();  // Nested: ignored, and so is its end.
  REQUIRE(BatchedSends::Queue(p.fds[0], b, &r));
  BatchedSends::EndBurst();
  CHECK(r.calls == 0);  // Not sent until the outer burst ends.
  CHECK(p.ReadAll().empty());
  BatchedSends::EndBurst();
  CHECK(r.calls == 1);
  CHECK(r.result == 3);
  CHECK(p.ReadAll() == "abc");
  // Too many buffers for one send: not queued.
  std::vector<asio::const_buffer> many(BatchedSends::kMaxPieces + 1, asio::buffer(data));
  BatchedSends::StartBurst();
  CHECK_FALSE(BatchedSends::Queue(p.fds[0], many, &r));
  BatchedSends::EndBurst();
  CHECK(r.calls == 1);
}

TEST_CASE(
    "BatchedSends sends a burst to many sockets, 256 per submission, each told its result, one "
    "buffer or two") {
  RequireIoUring();
  constexpr int kSockets = 300;
  std::vector<std::unique_ptr<SocketPair>> pairs;
  std::vector<std::string> heads;
  std::vector<Result> results(kSockets);
  for (int i = 0; i < kSockets; ++i) {
    pairs.push_back(std::make_unique<SocketPair>());
    heads.push_back("event " + std::to_string(i) + " ");
  }
  const std::string body(1000, 'x');
  const uint64_t submits = BatchedSends::submits();
  const uint64_t sends = BatchedSends::sends();
  BatchedSends::StartBurst();
  // Every third in one buffer (a plain send), the others in two (a sendmsg).
  std::vector<std::string> whole;
  for (int i = 0; i < kSockets; ++i) whole.push_back(heads[i] + body);
  for (int i = 0; i < kSockets; ++i) {
    const std::array<asio::const_buffer, 2> b{asio::buffer(heads[i]), asio::buffer(body)};
    const std::array<asio::const_buffer, 1> one{asio::buffer(whole[i])};
    if (i % 3 == 0) {
      REQUIRE(BatchedSends::Queue(pairs[i]->fds[0], one, &results[i]));
    } else {
      REQUIRE(BatchedSends::Queue(pairs[i]->fds[0], b, &results[i]));
    }
  }
  // The first 256 went when the ring was full; the rest wait for the burst's end.
  CHECK(results[0].calls == 1);
  CHECK(results[255].calls == 1);
  CHECK(results[256].calls == 0);
  BatchedSends::EndBurst();
  CHECK(BatchedSends::submits() - submits == 2);
  CHECK(BatchedSends::sends() - sends == kSockets);
  for (int i = 0; i < kSockets; ++i) {
    CAPTURE(i);
    REQUIRE(results[i].calls == 1);
    CHECK(results[i].pieces == (i % 3 == 0 ? 1 : 2));
    CHECK(results[i].result == static_cast<int64_t>(heads[i].size() + body.size()));
    CHECK(pairs[i]->ReadAll() == heads[i] + body);
  }
}

TEST_CASE("BatchedSends: a full socket takes part or nothing, and the burst does not wait") {
  RequireIoUring();
  SocketPair p;
  const int small = 4096;
  REQUIRE(setsockopt(p.fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) == 0);
  const std::string big(1 << 20, 'y');
  const std::array<asio::const_buffer, 1> b{asio::buffer(big)};
  Result first;
  Result second;
  BatchedSends::StartBurst();
  REQUIRE(BatchedSends::Queue(p.fds[0], b, &first));
  REQUIRE(BatchedSends::Queue(p.fds[0], b, &second));
  BatchedSends::EndBurst();
  REQUIRE(first.calls == 1);
  REQUIRE(second.calls == 1);
  INFO("first " << first.result << ", second " << second.result);
  CHECK(first.result > 0);
  CHECK(first.result < static_cast<int64_t>(big.size()));
  CHECK(second.result == -EAGAIN);  // The socket was full.
  CHECK(p.ReadAll().size() == static_cast<size_t>(first.result));
}

TEST_CASE("BatchedSends tells a send's error") {
  RequireIoUring();
  auto p = std::make_unique<SocketPair>();
  close(p->fds[1]);
  p->fds[1] = open("/dev/null", O_RDONLY);  // (Closed by the pair.)
  Result r;
  const std::string data = "abc";
  const std::array<asio::const_buffer, 1> b{asio::buffer(data)};
  BatchedSends::StartBurst();
  REQUIRE(BatchedSends::Queue(p->fds[0], b, &r));
  BatchedSends::EndBurst();
  REQUIRE(r.calls == 1);
  CHECK(r.result == -EPIPE);  // Without SIGPIPE (MSG_NOSIGNAL): the test goes on.
}

// In a child process: a seccomp filter that meets io_uring_setup with `action`, then Probe.
// Exit status: 0 Probe said yes, 2 it said no because the call is fatal, 3 another no, 4 the
// filter could not be installed.
int ProbeUnderSeccomp(uint32_t action) {
  const pid_t child = fork();
  if (child == 0) {
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, action),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{sizeof(filter) / sizeof(filter[0]), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
      _exit(4);
    }
    const absl::Status s = BatchedSends::Probe();
    if (s.ok()) _exit(0);
    _exit(s.message().find("fatal") != std::string_view::npos ? 2 : 3);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

TEST_CASE("BatchedSends::Probe says no, and lives, where seccomp refuses or kills io_uring") {
  RequireIoUring();                                          // Allowed here without a filter.
  CHECK(ProbeUnderSeccomp(SECCOMP_RET_ERRNO | EPERM) == 3);  // containerd's RuntimeDefault.
  CHECK(ProbeUnderSeccomp(SECCOMP_RET_KILL_PROCESS) == 2);   // A filter that kills.
  CHECK(ProbeUnderSeccomp(SECCOMP_RET_ALLOW) == 0);          // A filter that allows it.
}

}  // namespace
}  // namespace kf
