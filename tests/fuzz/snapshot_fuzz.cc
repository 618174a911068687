// libFuzzer target: a warm-restart snapshot file as SnapshotStore::Load reads it from
// --cache-snapshot-dir (cache/snapshot.h): DecodeSnapshot, SnapshotToState, then
// Cacher::ImportState into a cache of the snapshot's type and encoding (JSON or protobuf), which is
// then listed and watched from its window's start. The checksum stops nearly every mutation at the
// first step, so each input is also tried with its payload size and CRC-32 made right (the reader's
// later checks are what a torn or hand-made file with a valid checksum meets). Invariants: nothing
// throws or crashes; a refused file is DataLoss or FailedPrecondition (the errors Load counts as
// corrupt or version); what decodes holds no more than the file's bytes; a state that converts
// re-encodes to a snapshot that decodes to the same state (the encoding of that state is a fixed
// point); an imported cache lists its objects sorted by key, once each, at the snapshot's
// resourceVersion.
#include <zlib.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

#include "cache/cacher.h"
#include "cache/snapshot.h"

namespace {

constexpr std::string_view kMagic("KFSNAP\r\n", 8);
constexpr size_t kHeaderBytes = 24;  // Magic, version u32, CRC-32 u32, payload size u64.

void Require(bool ok) {
  if (!ok) std::abort();
}

std::string Reencode(const kf::SnapshotHeader& header, const kf::Cacher::State& state) {
  auto bytes = kf::EncodeSnapshot(header, state, std::numeric_limits<size_t>::max());
  Require(bytes.ok());
  return *std::move(bytes);
}

void Check(std::string_view bytes) {
  auto decoded = kf::DecodeSnapshot(bytes);
  if (!decoded.ok()) {
    Require(absl::IsDataLoss(decoded.status()) || absl::IsFailedPrecondition(decoded.status()));
    return;
  }
  size_t held = decoded->header.upstream.size() + decoded->bookmark_template.size();
  for (const std::string& o : decoded->objects) held += o.size();
  for (const kf::DecodedSnapshot::Event& e : decoded->events) {
    held += e.object.size() + (e.prev ? e.prev->size() : 0);
  }
  Require(held <= bytes.size());
  const kf::SnapshotHeader header = decoded->header;
  const size_t objects = decoded->objects.size(), events = decoded->events.size();
  const uint64_t rv = decoded->resource_version, window_start = decoded->window_start_rv;
  auto state = kf::SnapshotToState(*std::move(decoded));
  if (!state.ok()) return;  // Objects that do not parse as the header's type: refused by Load.
  Require(state->objects.size() == objects && state->events.size() == events);
  Require(state->resource_version == rv && state->window_start_rv == window_start);

  // The state written again reads back as the same state.
  const std::string once = Reencode(header, *state);
  auto again = kf::DecodeSnapshot(once);
  Require(again.ok());
  auto state_again = kf::SnapshotToState(*std::move(again));
  Require(state_again.ok());
  Require(Reencode(header, *state_again) == once);

  kf::Cacher cacher(
      header.type, kf::EventRingLimits{}, [] { return std::chrono::steady_clock::now(); },
      header.encoding);
  if (!cacher.ImportState(*std::move(state)).ok()) return;  // Events out of order: refused.
  Require(cacher.synced() && cacher.resource_version() == rv);
  const kf::Cacher::ListResult list = cacher.List(kf::WatchFilter{});
  Require(list.items.size() <= objects);
  for (size_t i = 1; i < list.items.size(); ++i) {
    Require(list.items[i - 1]->key() < list.items[i]->key());
  }
  auto watch = cacher.Watch(
      {kf::WatchFilter{}, kf::Cacher::Start::kAfterVersion, window_start, 1u << 20, [] {}});
  if (watch.ok()) {
    (*watch)->Take();
    cacher.RemoveWatcher(watch->get());
  }
}

void PutLe(std::string* bytes, size_t at, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) (*bytes)[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  Check(input);
  if (input.size() >= kHeaderBytes && input.substr(0, kMagic.size()) == kMagic) {
    std::string fixed(input);
    const std::string_view payload = std::string_view(fixed).substr(kHeaderBytes);
    const uLong crc = crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(payload.data()),
                            static_cast<uInt>(payload.size()));
    PutLe(&fixed, 12, crc, 4);
    PutLe(&fixed, 16, payload.size(), 8);
    Check(fixed);
  }
  return 0;
}
