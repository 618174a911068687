#include "proxy/sync/snapshot_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "cache/snapshot.h"
#include "common/strings.h"

namespace kf {
namespace {

// Writes all of `bytes` to `path` through a temporary file: after a crash at any point the
// path holds either the previous file or the new one, whole.
absl::Status WriteAtomically(const std::string& dir, const std::string& path,
                             std::string_view bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", tmp));
  absl::Status status;
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      status = absl::ErrnoToStatus(errno, absl::StrCat("write ", tmp));
      break;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  if (status.ok() && ::fsync(fd) != 0) status = absl::ErrnoToStatus(errno, "fsync");
  ::close(fd);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = absl::ErrnoToStatus(errno, absl::StrCat("rename ", tmp));
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  // The rename itself is durable once the directory is synced.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

std::string OctalMode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%03o", static_cast<unsigned>(mode & 0777));
  return text;
}

int64_t NowUnix() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

const char* SnapshotStats::ResultName(int result) {
  static const char* kNames[] = {"loaded", "missing",  "corrupt", "version",
                                 "stale",  "upstream", "invalid"};
  return result >= 0 && result < kCount ? kNames[result] : "";
}

SnapshotStore::SnapshotStore(SnapshotOptions options, const Logger& log)
    : options_(std::move(options)), log_(log) {}

SnapshotStore::~SnapshotStore() { Stop(); }

bool SnapshotStore::Open() {
  if (options_.dir.empty()) return false;
  struct stat st {};
  if (::stat(options_.dir.c_str(), &st) != 0) {
    if (errno != ENOENT || ::mkdir(options_.dir.c_str(), 0700) != 0 ||
        ::stat(options_.dir.c_str(), &st) != 0) {
      log_.Error("cache snapshots off: cannot create --cache-snapshot-dir",
                 {{"dir", options_.dir}, {"error", std::string_view(std::strerror(errno))}});
      stats_.disabled = true;
      return false;
    }
  }
  if (!S_ISDIR(st.st_mode)) {
    log_.Error("cache snapshots off: --cache-snapshot-dir is not a directory",
               {{"dir", options_.dir}});
    stats_.disabled = true;
    return false;
  }
  if (st.st_uid != ::geteuid()) {
    log_.Error("cache snapshots off: --cache-snapshot-dir belongs to another user",
               {{"dir", options_.dir}, {"owner", static_cast<int64_t>(st.st_uid)}});
    stats_.disabled = true;
    return false;
  }
  if ((st.st_mode & 077) != 0) {
    // The files hold every cached object; a directory others may read (or plant files in)
    // is refused rather than quietly used.
    log_.Error(
        "cache snapshots off: --cache-snapshot-dir is accessible to group or others; chmod 700 "
        "it",
        {{"dir", options_.dir}, {"mode", OctalMode(st.st_mode)}});
    stats_.disabled = true;
    return false;
  }
  enabled_ = true;
  return true;
}

bool SnapshotStore::Writes(const ResourceType& type) const {
  return options_.include_secrets || !(type.group.empty() && type.resource == "secrets");
}

std::string SnapshotStore::PathFor(const std::string& group, const std::string& version,
                                   const std::string& resource, Encoding encoding) const {
  return absl::StrCat(options_.dir, "/", group.empty() ? resource : resource + "." + group, "_",
                      version, encoding == Encoding::kProtobuf ? ".protobuf" : "", ".snap");
}

std::optional<std::pair<SnapshotStats::Result, std::string>> SnapshotStore::HeaderProblem(
    const SnapshotHeader& h, const Expected& want, int64_t age) const {
  if (h.upstream != want.upstream) {
    return std::pair(SnapshotStats::kUpstream,
                     absl::StrCat("taken from ", h.upstream, ", upstream now ", want.upstream));
  }
  if (age > options_.max_age.count() || age < -60) {
    return std::pair(SnapshotStats::kStale,
                     absl::StrCat("written ", age, "s ago, limit ", options_.max_age.count(), "s"));
  }
  if (h.type.group != want.group || h.type.version != want.version ||
      h.type.resource != want.resource || h.type.kind.empty() || h.encoding != want.encoding) {
    return std::pair(SnapshotStats::kInvalid, std::string("another resource's snapshot"));
  }
  return std::nullopt;
}

std::optional<SnapshotStore::Loaded> SnapshotStore::Load(const std::string& group,
                                                         const std::string& version,
                                                         const std::string& resource,
                                                         const std::string& upstream,
                                                         Encoding encoding) {
  if (!enabled_) return std::nullopt;
  const std::string path = PathFor(group, version, resource, encoding);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (encoding == Encoding::kJson) ++stats_.loads[SnapshotStats::kMissing];
    return std::nullopt;
  }
  auto ignore = [&](SnapshotStats::Result why, std::string_view reason) {
    ++stats_.loads[why];
    log_.Warning("cache snapshot ignored; the resource lists from the upstream",
                 {{"file", path}, {"why", SnapshotStats::ResultName(why)}, {"detail", reason}});
    return std::nullopt;
  };
  // Never larger than the writer's bound: a bigger file is not read into memory.
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(std::max<std::streamoff>(0, in.tellg()));
  in.seekg(0);
  if (size > options_.max_bytes) {
    return ignore(SnapshotStats::kInvalid,
                  absl::StrCat(size, " bytes, more than --cache-snapshot-max-bytes"));
  }
  std::stringstream bytes;
  bytes << in.rdbuf();
  auto decoded = DecodeSnapshot(bytes.str());
  if (!decoded.ok()) {
    return ignore(absl::IsFailedPrecondition(decoded.status()) ? SnapshotStats::kVersion
                                                               : SnapshotStats::kCorrupt,
                  ToStd(decoded.status().message()));
  }
  const SnapshotHeader& h = decoded->header;
  const int64_t age = NowUnix() - h.written_unix_seconds;
  const Expected expected{group, version, resource, upstream, encoding};
  if (auto problem = HeaderProblem(h, expected, age)) {
    return ignore(problem->first, problem->second);
  }
  Loaded loaded{h.type, {}};
  auto state = SnapshotToState(*std::move(decoded));
  if (!state.ok()) return ignore(SnapshotStats::kInvalid, ToStd(state.status().message()));
  loaded.state = *std::move(state);
  ++stats_.loads[SnapshotStats::kLoaded];
  log_.Info("cache loaded from snapshot",
            {{"resource", loaded.type.GroupResource()},
             {"encoding", encoding == Encoding::kProtobuf ? "protobuf" : "json"},
             {"objects", static_cast<int64_t>(loaded.state.objects.size())},
             {"events", static_cast<int64_t>(loaded.state.events.size())},
             {"resourceVersion", static_cast<int64_t>(loaded.state.resource_version)},
             {"age_seconds", age}});
  return loaded;
}

void SnapshotStore::Start(std::vector<Target> targets) {
  if (!enabled_ || writer_.joinable()) return;
  targets_.clear();
  for (Target& t : targets) {
    if (Writes(t.cacher->type())) targets_.push_back(std::move(t));
  }
  written_rv_.assign(targets_.size(), 0);
  writer_ = std::thread([this] { WriterLoop(); });
}

void SnapshotStore::Stop() {
  if (!writer_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  writer_.join();
}

void SnapshotStore::WriterLoop() {
  for (;;) {
    bool stopping = false;
    {
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, options_.interval, [this] { return stop_; });
      stopping = stop_;
    }
    WriteChanged();  // Also once stopping: the graceful stop's final state.
    if (stopping) return;
  }
}

void SnapshotStore::WriteChanged() {
  for (size_t i = 0; i < targets_.size(); ++i) {
    // Copies pointers under the cache's lock; the bytes are encoded and written without it.
    std::optional<Cacher::State> state = targets_[i].cacher->ExportState();
    if (!state || state->resource_version == written_rv_[i]) continue;
    if (WriteOne(targets_[i], *state)) written_rv_[i] = state->resource_version;
  }
}

bool SnapshotStore::WriteOne(const Target& target, const Cacher::State& state) {
  const ResourceType& type = target.cacher->type();
  const Encoding encoding = target.cacher->encoding();
  SnapshotHeader header{target.upstream, NowUnix(), type, encoding};
  auto bytes = EncodeSnapshot(header, state, options_.max_bytes);
  absl::Status s = bytes.status();
  if (bytes.ok()) {
    s = WriteAtomically(options_.dir, PathFor(type.group, type.version, type.resource, encoding),
                        *bytes);
  }
  if (!s.ok()) {
    ++stats_.write_failures;
    log_.Warning("cache snapshot not written",
                 {{"resource", type.GroupResource()},
                  {"encoding", encoding == Encoding::kProtobuf ? "protobuf" : "json"},
                  {"error", ToStd(s.message())}});
    return false;
  }
  ++stats_.writes;
  stats_.bytes_written += bytes->size();
  return true;
}

}  // namespace kf
