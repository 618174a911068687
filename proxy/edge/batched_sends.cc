#include "proxy/edge/batched_sends.h"

#include <liburing.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"

namespace kf {
namespace {

std::atomic<bool> enabled{false};
std::atomic<uint64_t> submit_count{0};
std::atomic<uint64_t> send_count{0};

constexpr int kSendFlags = MSG_DONTWAIT | MSG_NOSIGNAL;
constexpr uint64_t kCancelTag = ~uint64_t{0};  // user_data of a cancel's own completion.

// A ring for this thread alone: SINGLE_ISSUER and DEFER_TASKRUN (completion work runs when this
// thread asks for it) where the kernel has them (6.1 and later), else a plain ring.
int InitRing(io_uring* ring) {
  io_uring_params p{};
  p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  int r = io_uring_queue_init_params(BatchedSends::kEntries, ring, &p);
  if (r == -EINVAL) {
    p = io_uring_params{};
    r = io_uring_queue_init_params(BatchedSends::kEntries, ring, &p);
  }
  return r;
}

// Whether a seccomp filter applies to this process ("Seccomp: 2" in /proc/self/status).
bool SeccompFiltered() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Seccomp:", 0) == 0) return line.find('2') != std::string::npos;
  }
  return false;
}

class Batch {
 public:
  static std::unique_ptr<Batch> Make() {
    std::unique_ptr<Batch> b(new Batch);
    if (InitRing(&b->ring_) < 0) return nullptr;
    b->ready_ = true;
    return b;
  }
  ~Batch() {
    if (ready_) io_uring_queue_exit(&ring_);
  }
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  bool Queue(int fd, std::span<const boost::asio::const_buffer> buffers, BatchedSends::Done* done) {
    if (!ready_ || flushing_ || buffers.size() > BatchedSends::kMaxPieces) return false;
    if (queued_ == BatchedSends::kEntries) {
      Flush();
      if (!ready_) return false;  // The ring failed in that flush.
    }
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return false;
    Entry& e = entries_[queued_];
    for (size_t i = 0; i < buffers.size(); ++i) {
      e.iov[i].iov_base = const_cast<void*>(buffers[i].data());
      e.iov[i].iov_len = buffers[i].size();
    }
    e.msg = msghdr{};
    e.msg.msg_iov = e.iov.data();
    e.msg.msg_iovlen = buffers.size();
    e.fd = fd;
    e.done = done;
    e.result = kNoResult;
    if (buffers.size() == 1) {
      // One buffer (a TLS batch's records, an HTTP/2 batch): a plain send, without the message
      // header and vector the kernel copies and checks for a sendmsg.
      io_uring_prep_send(sqe, fd, e.iov[0].iov_base, e.iov[0].iov_len, kSendFlags);
    } else {
      io_uring_prep_sendmsg(sqe, fd, &e.msg, kSendFlags);
    }
    io_uring_sqe_set_data64(sqe, queued_);
    ++queued_;
    return true;
  }

  // Submits what is queued, collects every result, then tells each writer its own.
  void Flush() {
    if (queued_ == 0) return;
    flushing_ = true;
    const unsigned n = queued_;
    int r;
    do {
      r = io_uring_submit_and_get_events(&ring_);
    } while (r == -EINTR);
    submit_count.fetch_add(1, std::memory_order_relaxed);
    send_count.fetch_add(n, std::memory_order_relaxed);
    unsigned missing = n - Reap();
    if (missing > 0 && r >= 0) missing = CancelAndReap(missing);
    if (r < 0 || missing > 0) {
      // The ring failed (or a send would not end): this thread writes directly from now on,
      // and what has no result is written here, once.
      io_uring_queue_exit(&ring_);
      ready_ = false;
      for (unsigned i = 0; i < n; ++i) {
        Entry& e = entries_[i];
        if (e.result != kNoResult) continue;
        const ssize_t w = sendmsg(e.fd, &e.msg, kSendFlags);
        e.result = w >= 0 ? w : -errno;
      }
    }
    queued_ = 0;
    for (unsigned i = 0; i < n; ++i) {
      Entry& e = entries_[i];
      e.done->Sent(e.result, std::span<const iovec>(e.iov.data(), e.msg.msg_iovlen));
    }
    flushing_ = false;
  }

  bool ready() const { return ready_; }

 private:
  static constexpr int64_t kNoResult = INT64_MIN;

  struct Entry {
    msghdr msg;
    BatchedSends::Done* done;
    int64_t result;
    int fd;
    std::array<iovec, BatchedSends::kMaxPieces> iov;
  };

  Batch() = default;

  // Takes the completions there are; returns how many were sends'.
  unsigned Reap() {
    unsigned got = 0;
    unsigned head;
    unsigned seen = 0;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      const uint64_t tag = io_uring_cqe_get_data64(cqe);
      if (tag < queued_ && entries_[tag].result == kNoResult) {
        entries_[tag].result = cqe->res;
        ++got;
      }
    }
    io_uring_cq_advance(&ring_, seen);
    return got;
  }

  // A send without its result after the submit was not done at once (the kernel set it to
  // wait for room despite MSG_DONTWAIT): it is cancelled, and its result (-ECANCELED: nothing
  // sent) awaited. Returns how many still have none.
  unsigned CancelAndReap(unsigned missing) {
    for (unsigned i = 0; i < queued_; ++i) {
      if (entries_[i].result != kNoResult) continue;
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) break;
      io_uring_prep_cancel64(sqe, i, 0);
      io_uring_sqe_set_data64(sqe, kCancelTag);
    }
    for (int round = 0; round < 100 && missing > 0; ++round) {
      __kernel_timespec ts{0, 1'000'000};
      io_uring_cqe* cqe = nullptr;
      const int r = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
      if (r < 0 && r != -ETIME && r != -EINTR) break;
      missing -= Reap();
    }
    for (unsigned i = 0; i < queued_; ++i) {
      if (entries_[i].result == -ECANCELED) entries_[i].result = -EAGAIN;
    }
    return missing;
  }

  io_uring ring_{};
  bool ready_ = false;
  bool flushing_ = false;
  unsigned queued_ = 0;
  std::array<Entry, BatchedSends::kEntries> entries_{};
};

struct ThreadState {
  std::unique_ptr<Batch> batch;
  bool tried = false;
  int depth = 0;  // Bursts started and not ended (only the outer one counts).
};
thread_local ThreadState thread_state;

}  // namespace

void BatchedSends::Enable(bool on) { enabled.store(on, std::memory_order_relaxed); }

absl::Status BatchedSends::Probe() {
  // Under a seccomp filter io_uring_setup may be refused (containerd's and Docker's default
  // profiles answer EPERM) or may kill the process (a filter whose default action is to kill,
  // as systemd's SystemCallFilter= has): it is tried in a child first.
  if (SeccompFiltered()) {
    const pid_t child = fork();
    if (child < 0) return absl::UnavailableError(absl::StrCat("fork: ", std::strerror(errno)));
    if (child == 0) {
      io_uring_params p{};
      const long fd = syscall(__NR_io_uring_setup, 1, &p);  // Only system calls after fork.
      _exit(fd >= 0 ? 0 : 1);
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status)) {
      return absl::UnavailableError(
          absl::StrCat("io_uring_setup is fatal under this process's seccomp filter (signal ",
                       WTERMSIG(status), ")"));
    }
  }
  io_uring ring{};
  const int r = InitRing(&ring);
  if (r < 0) return absl::UnavailableError(absl::StrCat("io_uring_setup: ", std::strerror(-r)));
  io_uring_queue_exit(&ring);
  return absl::OkStatus();
}

void BatchedSends::StartBurst() {
  ThreadState& t = thread_state;
  if (t.depth++ > 0) return;
  if (!t.tried && enabled.load(std::memory_order_relaxed)) {
    t.tried = true;
    t.batch = Batch::Make();
  }
}

void BatchedSends::EndBurst() {
  ThreadState& t = thread_state;
  if (t.depth == 0 || --t.depth > 0) return;
  if (t.batch) {
    t.batch->Flush();
    if (!t.batch->ready()) t.batch.reset();
  }
}

bool BatchedSends::Queue(int fd, std::span<const boost::asio::const_buffer> buffers, Done* done) {
  ThreadState& t = thread_state;
  return t.depth > 0 && t.batch && enabled.load(std::memory_order_relaxed) &&
         t.batch->Queue(fd, buffers, done);
}

uint64_t BatchedSends::submits() { return submit_count.load(std::memory_order_relaxed); }
uint64_t BatchedSends::sends() { return send_count.load(std::memory_order_relaxed); }

}  // namespace kf
