// Filter and Handler: the steps of the pipeline (pipeline.h). A filter runs in front of a
// handler: it may answer the request itself (a 429) and stop, or let it go on by awaiting
// `next`, doing its part before and after (a seat held for the request's life, a response
// copied for coalesced readers), as the apiserver's handler chain and Envoy's filter chain do.
// A handler answers through the exchange's Response.
//
// Filters and handlers are shared by the sessions of one worker thread; they keep no state
// of one request between calls except what they document.
#ifndef KUBE_FANOUT_EDGE_FILTER_H_
#define KUBE_FANOUT_EDGE_FILTER_H_

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <span>

#include "proxy/edge/exchange.h"

namespace kf {

using Next = std::function<asio::awaitable<void>(Exchange&)>;

class Filter {
 public:
  virtual ~Filter() = default;
  virtual asio::awaitable<void> Serve(Exchange& x, const Next& next) = 0;
};

class Handler {
 public:
  virtual ~Handler() = default;
  // False: declined without writing anything (the cache cannot answer this one exactly).
  virtual asio::awaitable<bool> Serve(Exchange& x) = 0;
};

// Runs `filters` in order, then `last`.
asio::awaitable<void> RunChain(std::span<Filter* const> filters, Exchange& x, const Next& last);

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_FILTER_H_
