#include "proxy/sync/shared_proof.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

namespace kf {
namespace {

// One step of a resource's reads and proofs: "join X" (read X arrives), "start" (the loop
// starts the next proof), "finish N" (the proof in flight ends at RV N; 0: failed), "abandon".
struct Step {
  std::string op;
  std::string read;
  uint64_t rv = 0;
};

struct Outcome {
  std::map<std::string, std::optional<uint64_t>> answers;
  std::map<std::string, int> times_answered;
  std::vector<bool> joins_start_loop;
  std::vector<bool> starts;
  size_t most_in_flight_batches = 0;
};

Outcome Run(const std::vector<Step>& steps) {
  SharedProof proof;
  Outcome out;
  size_t batches_in_flight = 0;
  for (const Step& s : steps) {
    if (s.op == "join") {
      out.joins_start_loop.push_back(proof.Join([&out, read = s.read](std::optional<uint64_t> rv) {
        out.answers[read] = rv;
        ++out.times_answered[read];
      }));
    } else if (s.op == "start") {
      const bool started = proof.Start();
      out.starts.push_back(started);
      if (started) ++batches_in_flight;
      out.most_in_flight_batches = std::max(out.most_in_flight_batches, batches_in_flight);
    } else if (s.op == "finish") {
      proof.Finish(s.rv == 0 ? std::nullopt : std::optional<uint64_t>(s.rv));
      batches_in_flight = 0;
    } else if (s.op == "abandon") {
      proof.Abandon();
    }
  }
  return out;
}

TEST_CASE("SharedProof answers a read only with a proof that started after it joined",
          "[shared_proof]") {
  struct Case {
    std::string name;
    std::vector<Step> steps;
    std::map<std::string, std::optional<uint64_t>> answers;
  };
  const std::vector<Case> cases = {
      {"a lone read gets its own proof",
       {{"join", "a"}, {"start"}, {"finish", "", 10}},
       {{"a", 10}}},
      {"reads waiting together share one proof",
       {{"join", "a"}, {"join", "b"}, {"join", "c"}, {"start"}, {"finish", "", 10}},
       {{"a", 10}, {"b", 10}, {"c", 10}}},
      {"a read arriving while a proof is in flight joins the next one",
       {{"join", "a"},
        {"start"},
        {"join", "b"},
        {"join", "c"},
        {"finish", "", 10},
        {"start"},
        {"finish", "", 12}},
       {{"a", 10}, {"b", 12}, {"c", 12}}},
      {"a failed proof answers its batch with nothing, the next batch is proven anew",
       {{"join", "a"}, {"start"}, {"join", "b"}, {"finish", "", 0}, {"start"}, {"finish", "", 12}},
       {{"a", std::nullopt}, {"b", 12}}},
      {"abandoning answers the batch in flight and the queued reads with nothing",
       {{"join", "a"}, {"start"}, {"join", "b"}, {"abandon"}},
       {{"a", std::nullopt}, {"b", std::nullopt}}},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      const Outcome out = Run(c.steps);
      CHECK(out.answers == c.answers);
      for (const auto& [read, n] : out.times_answered) {
        INFO(read);
        CHECK(n == 1);
      }
      CHECK(out.most_in_flight_batches <= 1);
    }
  }
}

TEST_CASE("SharedProof starts a loop for the first read and ends it when no read is queued",
          "[shared_proof]") {
  const Outcome out = Run({{"join", "a"},
                           {"join", "b"},
                           {"start"},
                           {"join", "c"},
                           {"finish", "", 10},
                           {"start"},
                           {"finish", "", 11},
                           {"start"},
                           {"join", "d"}});
  // a starts the loop; b and c find it running; after the loop ended for want of reads, d
  // starts a new one.
  CHECK(out.joins_start_loop == std::vector<bool>{true, false, false, true});
  CHECK(out.starts == std::vector<bool>{true, true, false});
}

TEST_CASE("SharedProof costs one proof per batch however many reads join", "[shared_proof]") {
  SharedProof proof;
  int answered = 0;
  // 1,000 reads arrive while a proof is in flight, then 1,000 more while the next one is.
  REQUIRE(proof.Join([&](std::optional<uint64_t>) { ++answered; }));
  REQUIRE(proof.Start());
  for (int i = 0; i < 1000; ++i) {
    CHECK_FALSE(proof.Join([&](std::optional<uint64_t>) { ++answered; }));
  }
  proof.Finish(5);
  REQUIRE(proof.Start());
  for (int i = 0; i < 1000; ++i) {
    CHECK_FALSE(proof.Join([&](std::optional<uint64_t>) { ++answered; }));
  }
  CHECK(proof.queued() == 1000);
  CHECK(proof.in_flight() == 1000);
  proof.Finish(6);
  REQUIRE(proof.Start());
  proof.Finish(7);
  CHECK_FALSE(proof.Start());
  CHECK(answered == 2001);
  CHECK(proof.proofs_started() == 3);
  CHECK_FALSE(proof.running());
}

TEST_CASE("SharedProof spaces proofs only after one that answered several reads",
          "[shared_proof]") {
  SharedProof proof;
  const auto nothing = [](std::optional<uint64_t>) {};
  CHECK_FALSE(proof.spaced());
  // A lone sequential reader: one read per proof, proofs back to back.
  for (int i = 0; i < 3; ++i) {
    proof.Join(nothing);
    REQUIRE(proof.Start());
    proof.Finish(10);
    CHECK_FALSE(proof.spaced());
  }
  // Readers arriving together: the next proof waits for the spacing.
  proof.Join(nothing);
  proof.Join(nothing);
  REQUIRE(proof.Start());
  proof.Finish(11);
  CHECK(proof.spaced());
  proof.Join(nothing);
  REQUIRE(proof.Start());
  proof.Finish(12);
  CHECK_FALSE(proof.spaced());
}

}  // namespace
}  // namespace kf
