#include "proxy/serve/watch_gzip.h"

#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "proxy/serve/gzip_members.h"

namespace kf {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;

// Decodes a sequence of gzip members as Go's gzip.Reader does (multistream): every member in
// turn, each with its CRC and length checked by zlib. Fails on a stray byte between members.
std::string GunzipMembers(std::string_view in, int* members) {
  std::string out;
  *members = 0;
  while (!in.empty()) {
    z_stream z{};
    REQUIRE(inflateInit2(&z, 15 + 16) == Z_OK);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    int rv = Z_OK;
    char chunk[4096];
    while (rv == Z_OK) {
      z.next_out = reinterpret_cast<Bytef*>(chunk);
      z.avail_out = sizeof(chunk);
      rv = inflate(&z, Z_NO_FLUSH);
      out.append(chunk, sizeof(chunk) - z.avail_out);
    }
    REQUIRE(rv == Z_STREAM_END);
    in.remove_prefix(in.size() - z.avail_in);
    inflateEnd(&z);
    ++*members;
  }
  return out;
}

std::string Joined(const std::vector<asio::const_buffer>& bufs) {
  std::string out;
  for (const auto& b : bufs) out.append(static_cast<const char*>(b.data()), b.size());
  return out;
}

Piece Frame(const std::shared_ptr<const std::string>& s) { return Piece{s, *s}; }

TEST_CASE("IsWatchListRequest is the apiserver's isListWatchRequest after its defaults") {
  const std::pair<const char*, bool> cases[] = {
      {"watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
       true},
      {"watch=1&sendInitialEvents=1&resourceVersionMatch=NotOlderThan&resourceVersion=0"
       "&allowWatchBookmarks=True",
       true},
      // No bookmarks: not a WatchList (isListWatchRequest needs AllowWatchBookmarks).
      {"watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", false},
      {"watch=1&sendInitialEvents=false&resourceVersion=5&allowWatchBookmarks=true", false},
      // SetListOptionsDefaults: a watch from "" or "0" without a match rule sends initial events.
      {"watch=1&allowWatchBookmarks=true", true},
      {"watch=1&resourceVersion=&allowWatchBookmarks=true", true},
      {"watch=1&resourceVersion=0&allowWatchBookmarks=true", true},
      {"watch=1&resourceVersion=0", false},
      {"watch=1&resourceVersion=17&allowWatchBookmarks=true", false},
      {"watch=1&resourceVersion=0&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
       false},
      {"watch=1&allowWatchBookmarks=false", false},
  };
  for (const auto& [query, want] : cases) {
    INFO(query);
    CHECK(IsWatchListRequest(Query::Parse(query)) == want);
  }
}

TEST_CASE("CompressesWatch: a WatchList accepting gzip, as --watchlist-gzip and the upstream say") {
  using Up = Cacher::UpstreamWatchListGzip;
  const Query list = Query::Parse(
      "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true");
  const Query plain_watch = Query::Parse("watch=1&resourceVersion=12&allowWatchBookmarks=true");
  http::fields gzip, deflate, none;
  gzip.set(http::field::accept_encoding, "deflate, gzip");
  deflate.set(http::field::accept_encoding, "deflate");
  struct Row {
    const Query* q;
    const http::fields* h;
    WatchListGzip mode;
    Up upstream;
    bool want;
  };
  const Row rows[] = {
      {&list, &gzip, WatchListGzip::kAuto, Up::kCompresses, true},
      {&list, &gzip, WatchListGzip::kAuto, Up::kPlain, false},
      {&list, &gzip, WatchListGzip::kAuto, Up::kUnknown, false},  // Plain until it answers.
      {&list, &gzip, WatchListGzip::kAlways, Up::kPlain, true},
      {&list, &gzip, WatchListGzip::kNever, Up::kCompresses, false},
      {&list, &deflate, WatchListGzip::kAlways, Up::kCompresses, false},
      {&list, &none, WatchListGzip::kAlways, Up::kCompresses, false},
      {&plain_watch, &gzip, WatchListGzip::kAlways, Up::kCompresses, false},
  };
  for (size_t i = 0; i < std::size(rows); ++i) {
    INFO("row " << i);
    const Row& r = rows[i];
    CHECK(CompressesWatch(*r.q, *r.h, r.mode, r.upstream) == r.want);
  }
}

TEST_CASE("ParseWatchListGzip takes auto, always and never only") {
  CHECK(ParseWatchListGzip("auto") == WatchListGzip::kAuto);
  CHECK(ParseWatchListGzip("always") == WatchListGzip::kAlways);
  CHECK(ParseWatchListGzip("never") == WatchListGzip::kNever);
  CHECK_FALSE(ParseWatchListGzip("Auto").has_value());
  CHECK_FALSE(ParseWatchListGzip("").has_value());
  CHECK_FALSE(ParseWatchListGzip("true").has_value());
}

TEST_CASE("CompressBatch writes a small batch as the thread's shared member for its pieces") {
  GzipMembers members;
  // An event as the cache frames it: a static type prefix, the object's bytes, a static tail.
  static constexpr std::string_view kPrefix = "{\"type\":\"ADDED\",\"object\":";
  static constexpr std::string_view kEnd = "}\n";
  const auto object = std::make_shared<const std::string>("{\"metadata\":{\"name\":\"a\"}}");
  const auto bookmark = std::make_shared<const std::string>("{\"type\":\"BOOKMARK\"}\n");
  const std::vector<Piece> pieces{Piece{nullptr, kPrefix}, Frame(object), Piece{nullptr, kEnd}};
  const auto bufs_of = [&] {
    return std::vector<asio::const_buffer>{
        asio::buffer(kPrefix.data(), kPrefix.size()), asio::buffer(*object),
        asio::buffer(kEnd.data(), kEnd.size()), asio::buffer(*bookmark)};
  };
  WatchGzipHold first_hold, second_hold, other_hold;
  auto first = bufs_of();
  CompressBatch(pieces, bookmark, members, first_hold, first);
  auto second = bufs_of();
  CompressBatch(pieces, bookmark, members, second_hold, second);
  REQUIRE(first.size() == 1);
  int count = 0;
  CHECK(GunzipMembers(Joined(first), &count) ==
        std::string(kPrefix) + *object + std::string(kEnd) + *bookmark);
  CHECK(count == 1);  // One member per batch, as the apiserver's one per flush.
  // The second watcher's batch points at the same compressed bytes: compressed once.
  CHECK(first[0].data() == second[0].data());
  CHECK(members.misses() == 1);
  CHECK(members.hits() == 1);
  // Without the bookmark it is another batch: another member.
  auto other = bufs_of();
  other.pop_back();
  CompressBatch(pieces, nullptr, members, other_hold, other);
  CHECK(GunzipMembers(Joined(other), &count) == std::string(kPrefix) + *object + std::string(kEnd));
  CHECK(members.misses() == 2);
}

TEST_CASE("CompressBatch writes a large batch (a watch's initial state) as one member") {
  GzipMembers members;
  std::vector<std::shared_ptr<const std::string>> frames;
  std::vector<Piece> pieces;
  std::vector<asio::const_buffer> bufs;
  std::string plain;
  for (int i = 0; i < 40; ++i) {
    frames.push_back(std::make_shared<const std::string>(
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"cm-" + std::to_string(i) +
        "\"}}}\n"));
    pieces.push_back(Frame(frames.back()));
    bufs.push_back(asio::buffer(*frames.back()));
    plain += *frames.back();
  }
  WatchGzipHold hold;
  CompressBatch(pieces, nullptr, members, hold, bufs);
  REQUIRE(bufs.size() == 1);
  int count = 0;
  CHECK(GunzipMembers(Joined(bufs), &count) == plain);
  CHECK(count == 1);
  CHECK(members.entries() == 0);  // Nothing of it shared: no other watcher has this batch.
  hold.Clear();
  CHECK(hold.member.capacity() < 64);
}

TEST_CASE("CompressBatch leaves an empty batch empty: no member for nothing") {
  GzipMembers members;
  WatchGzipHold hold;
  std::vector<asio::const_buffer> bufs;
  CompressBatch({}, nullptr, members, hold, bufs);
  CHECK(bufs.empty());
}

TEST_CASE("GzipMembers compresses a frame freed and another at its address anew") {
  GzipMembers members;
  // One buffer standing for memory a freed frame leaves and a new frame takes.
  static char memory[] = "first frame\n";
  const std::string_view bytes(memory, sizeof(memory) - 1);
  auto owner = std::make_shared<int>(1);
  const auto m1 = members.Get(Piece{owner, bytes});
  CHECK(members.Get(Piece{owner, bytes}).get() == m1.get());  // While it lives: shared.
  owner.reset();
  std::memcpy(memory, "other", 5);  // Another frame, same address and size.
  auto other = std::make_shared<int>(2);
  const auto m2 = members.Get(Piece{other, bytes});
  int count = 0;
  CHECK(GunzipMembers(*m2, &count) == "other frame\n");
  CHECK(GunzipMembers(*m1, &count) == "first frame\n");
  CHECK(members.hits() == 1);
  CHECK(members.entries() == 1);
}

TEST_CASE("GzipMembers keeps at most its bounds, oldest out first") {
  GzipMembers members;
  std::vector<std::shared_ptr<const std::string>> frames;
  for (size_t i = 0; i < GzipMembers::kMaxEntries + 10; ++i) {
    frames.push_back(std::make_shared<const std::string>("frame " + std::to_string(i) + "\n"));
    members.Get(Frame(frames.back()));
  }
  CHECK(members.entries() == GzipMembers::kMaxEntries);
  members.Get(Frame(frames.back()));  // The newest is kept,
  CHECK(members.hits() == 1);
  members.Get(Frame(frames.front()));  // the oldest went.
  CHECK(members.hits() == 1);
  CHECK(members.bytes() <= GzipMembers::kMaxBytes);
}

TEST_CASE("GzipMembers keys static pieces (no owner) by their bytes' place") {
  GzipMembers members;
  static constexpr std::string_view kStatic = "static frame\n";
  const Piece unowned{nullptr, kStatic};
  const auto m1 = members.Get(unowned);
  const auto m2 = members.Get(unowned);
  CHECK(m1.get() == m2.get());
  CHECK(members.entries() == 1);
  int count = 0;
  CHECK(GunzipMembers(*m1, &count) == kStatic);
}

}  // namespace
}  // namespace kf
