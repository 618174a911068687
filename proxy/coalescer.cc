#include "proxy/coalescer.h"

namespace kf {

Coalescer::Ticket Coalescer::Join(const std::string& key) {
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[key];
  if (!e.running) {
    e.running = std::make_shared<Flight>();
    return Ticket{true, e.running, nullptr};
  }
  if (!e.next) {
    e.next = std::make_shared<Flight>();
    return Ticket{true, e.next, e.running};
  }
  return Ticket{false, e.next, nullptr};
}

void Coalescer::Start(const std::string& key, const std::shared_ptr<Flight>& flight) {
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[key];
  if (e.next == flight) e.next.reset();
  e.running = flight;
}

void Coalescer::Complete(const std::string& key, const std::shared_ptr<Flight>& flight,
                         CapturedPtr result) {
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      if (it->second.running == flight) it->second.running.reset();
      if (it->second.next == flight) it->second.next.reset();
      if (!it->second.running && !it->second.next) entries_.erase(it);
    }
  }
  std::vector<std::function<void(CapturedPtr)>> waiters;
  {
    absl::MutexLock lock(&flight->mu);
    flight->done = true;
    flight->result = result;
    waiters.swap(flight->waiters);
  }
  for (auto& w : waiters) w(result);
}

void Coalescer::OnDone(const std::shared_ptr<Flight>& flight,
                       std::function<void(CapturedPtr)> done) {
  CapturedPtr result;
  {
    absl::MutexLock lock(&flight->mu);
    if (!flight->done) {
      flight->waiters.push_back(std::move(done));
      return;
    }
    result = flight->result;
  }
  done(result);
}

uint64_t Coalescer::coalesced() const {
  absl::MutexLock lock(&mu_);
  return coalesced_;
}

void Coalescer::CountCoalesced() {
  absl::MutexLock lock(&mu_);
  ++coalesced_;
}

}  // namespace kf
