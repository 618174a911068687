// CapturingResponse: a Response that passes everything to another and keeps a copy of what
// went through (status, end-to-end fields, body up to the capture's limit), complete once the
// answer ended whole. For coalesced readers (coalescing_filter.h).
//
// Owned by the filter for one request; used on the session's thread only.
#ifndef KUBE_FANOUT_PASSTHROUGH_CAPTURING_RESPONSE_H_
#define KUBE_FANOUT_PASSTHROUGH_CAPTURING_RESPONSE_H_

#include "proxy/edge/response.h"
#include "proxy/passthrough/coalescer.h"

namespace kf {

class CapturingResponse : public Response {
 public:
  CapturingResponse(Response& inner, CapturedResponse& capture)
      : inner_(inner), capture_(capture) {}

  asio::awaitable<beast::error_code> WriteHead(ResponseHead head) override;
  asio::awaitable<beast::error_code> WriteBody(std::span<const asio::const_buffer> pieces) override;
  asio::awaitable<beast::error_code> End() override;
  asio::awaitable<bool> ClientGone() override { return inner_.ClientGone(); }
  void WatchClient(const asio::any_io_executor& executor, std::function<void(bool)> gone) override {
    inner_.WatchClient(executor, std::move(gone));
  }
  void StopWatchingClient() override { inner_.StopWatchingClient(); }
  asio::awaitable<beast::error_code> Continue() override { return inner_.Continue(); }
  void Cancel() override { inner_.Cancel(); }
  void CloseAfter() override { inner_.CloseAfter(); }
  std::optional<Upgraded> TakeUpgraded() override { return inner_.TakeUpgraded(); }
  bool head_written() const override { return inner_.head_written(); }
  int status() const override { return inner_.status(); }
  uint64_t body_bytes() const override { return inner_.body_bytes(); }

 private:
  Response& inner_;
  CapturedResponse& capture_;
  bool overflow_ = false;  // Too big to share: the followers go upstream themselves.
};

}  // namespace kf

#endif  // KUBE_FANOUT_PASSTHROUGH_CAPTURING_RESPONSE_H_
