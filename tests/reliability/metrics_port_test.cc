// The metrics port under attack (issue 23, items 5 and 6), against the pkserve binary on
// loopback with the harness of attack.h (a good gRPC caller beside, RSS bounded, SIGTERM within
// the drain timeout + 1 s while the attack goes on):
//   - slowloris: connections that trickle a header byte every 1.5 s hold neither the scrapes
//     (each answered within 2 s throughout) nor the drain;
//   - a GET with a 1 GiB body is answered 413 without the body being read;
//   - a 100 MiB request line is answered 414 after the first few KiB.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/reliability/attack.h"
#include "tests/reliability/raw_http2.h"

namespace pkserve {
namespace {

using testing::AttackHarness;
using testing::http2::Connection;

// Sleeps up to `duration` in short steps; false as soon as `stop` is set.
bool SleepUnlessStopped(absl::Duration duration, const std::atomic<bool>& stop) {
  const absl::Time until = absl::Now() + duration;
  while (absl::Now() < until) {
    if (stop) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return !stop;
}

// The scrapes a test made while the attack ran.
struct Scrapes {
  std::mutex mutex;
  int64_t made = 0;
  int64_t answered_in_time = 0;  // 200 within 2 s
  absl::Duration slowest;
};

void Scrape(int port, Scrapes& scrapes) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  const absl::Time start = absl::Now();
  const httplib::Result result = client.Get("/metrics");
  const absl::Duration took = absl::Now() - start;
  std::lock_guard<std::mutex> lock(scrapes.mutex);
  ++scrapes.made;
  if (result && result->status == 200 && took <= absl::Seconds(2)) ++scrapes.answered_in_time;
  scrapes.slowest = std::max(scrapes.slowest, took);
}

TEST(MetricsPortTest, SlowlorisHoldsNeitherTheScrapesNorTheDrain) {
  AttackHarness harness({"--metrics_address=127.0.0.1:0"});
  ASSERT_TRUE(harness.server().WaitServing(absl::Seconds(20), /*metrics=*/true));
  const int port = harness.server().metrics_port();
  Scrapes scrapes;
  // The first thread of the first run scrapes every 500 ms; every other thread (and the run
  // under SIGTERM) trickles.
  std::atomic<int> role{0};
  harness.RunAndCheck("metrics slowloris", 9, [&](const std::atomic<bool>& stop) {
    if (role.fetch_add(1) == 0) {
      while (SleepUnlessStopped(absl::Milliseconds(500), stop)) Scrape(port, scrapes);
      return;
    }
    while (!stop) {
      std::unique_ptr<Connection> connection = Connection::TryOpen(port);
      if (connection == nullptr) {
        SleepUnlessStopped(absl::Milliseconds(100), stop);
        continue;
      }
      connection->Send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
      while (SleepUnlessStopped(absl::Milliseconds(1500), stop) && connection->Send("a")) {
        connection->ReadFor(absl::Milliseconds(1));
        if (connection->closed_by_peer()) break;
      }
    }
  });
  std::cout << "scrapes: " << scrapes.answered_in_time << "/" << scrapes.made
            << " answered 200 within 2 s, slowest " << absl::FormatDuration(scrapes.slowest)
            << "\n";
  EXPECT_GT(scrapes.made, 0);
  EXPECT_EQ(scrapes.answered_in_time, scrapes.made);
}

TEST(MetricsPortTest, BodiesAndHugeRequestLinesAreRefusedWithoutBeingRead) {
  AttackHarness harness({"--metrics_address=127.0.0.1:0"});
  ASSERT_TRUE(harness.server().WaitServing(absl::Seconds(20), /*metrics=*/true));
  const int port = harness.server().metrics_port();
  std::atomic<int64_t> refused_413{0};
  std::atomic<int64_t> refused_414{0};
  std::atomic<int64_t> attempts{0};
  std::atomic<int64_t> most_sent{0};  // the most bytes one connection got off before it closed
  std::atomic<int> role{0};
  harness.RunAndCheck("metrics bodies and request lines", 2, [&](const std::atomic<bool>& stop) {
    const bool body = role.fetch_add(1) % 2 == 0;
    const std::string chunk(64 << 10, body ? '\0' : 'a');
    while (!stop) {
      std::unique_ptr<Connection> connection = Connection::TryOpen(port);
      if (connection == nullptr) {
        SleepUnlessStopped(absl::Milliseconds(100), stop);
        continue;
      }
      ++attempts;
      int64_t sent = 0;
      bool ok = connection->Send(body ? "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                        "Content-Length: 1073741824\r\n\r\n"
                                      : "GET /");
      const int64_t limit = body ? int64_t{1} << 30 : int64_t{100} << 20;
      std::string answer;
      while (ok && !stop && sent < limit) {
        ok = connection->Send(chunk);
        if (ok) sent += static_cast<int64_t>(chunk.size());
        answer += connection->ReadFor(absl::ZeroDuration());
        if (connection->closed_by_peer()) break;
      }
      answer += connection->ReadFor(absl::Milliseconds(200));
      if (absl::StartsWith(answer, "HTTP/1.1 413")) ++refused_413;
      if (absl::StartsWith(answer, "HTTP/1.1 414")) ++refused_414;
      int64_t most = most_sent.load();
      while (sent > most && !most_sent.compare_exchange_weak(most, sent)) {
      }
    }
  });
  std::cout << attempts.load() << " connections: " << refused_413.load() << " answered 413, "
            << refused_414.load() << " answered 414; at most " << most_sent.load() / 1024
            << " KiB sent on one before it closed\n";
  EXPECT_GT(refused_413.load(), 0);
  EXPECT_GT(refused_414.load(), 0);
  EXPECT_LT(most_sent.load(), int64_t{16} << 20) << "the server read on past the refusal";
}

}  // namespace
}  // namespace pkserve
