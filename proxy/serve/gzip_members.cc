#include "proxy/serve/gzip_members.h"

#include <array>

#include "proxy/edge/gzip.h"

namespace kf {
namespace {

std::shared_ptr<const std::string> Compress(std::string_view bytes) {
  const std::array<boost::asio::const_buffer, 1> piece{
      boost::asio::const_buffer(bytes.data(), bytes.size())};
  return std::make_shared<const std::string>(Gzip(piece));
}

}  // namespace

std::shared_ptr<const std::string> GzipMembers::Get(const Piece& frame) {
  if (!frame.owner) {
    ++misses_;
    return Compress(frame.bytes);
  }
  const Key key{frame.bytes.data(), frame.bytes.size()};
  auto [it, inserted] = map_.try_emplace(key);
  Entry& e = it->second;
  if (!inserted && !e.owner.expired()) {
    ++hits_;
    return e.member;
  }
  ++misses_;
  if (inserted) {
    order_.push_back(key);
  } else {
    bytes_ -= e.member->size();  // Another frame at a freed one's address: replaced in place.
  }
  e.owner = frame.owner;
  e.member = Compress(frame.bytes);
  bytes_ += e.member->size();
  std::shared_ptr<const std::string> member = e.member;
  Evict();
  return member;
}

void GzipMembers::Evict() {
  while (!order_.empty() && (map_.size() > kMaxEntries || bytes_ > kMaxBytes)) {
    const auto it = map_.find(order_.front());
    order_.pop_front();
    if (it == map_.end()) continue;
    bytes_ -= it->second.member->size();
    map_.erase(it);
  }
}

}  // namespace kf
