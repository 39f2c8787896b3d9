// Boost.Asio (Debian's libboost-dev) watches a watchable uepoll instance
// with posix::stream_descriptor::async_wait(wait_read) on the instance's
// number. Asio's reactor registers descriptors edge-triggered, so each
// completion harvests until the instance is empty. The descriptor is the
// instance's: release() gives it back instead of letting the
// stream_descriptor's destructor close it.
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <gtest/gtest.h>

#include "integration/traffic.h"

namespace uepoll_test {
namespace {

namespace asio = boost::asio;

void Arm(asio::posix::stream_descriptor& sd, Traffic& t) {
  sd.async_wait(asio::posix::stream_descriptor::wait_read,
                [&sd, &t](const boost::system::error_code& ec) {
                  EXPECT_FALSE(ec) << ec.message();
                  // No new wait after the stop: run() returns.
                  if (!ec && t.OnReadable()) Arm(sd, t);
                });
}

void AsioLoop(Traffic& t) {
  asio::io_context io;
  asio::posix::stream_descriptor sd(io, t.epfd());
  Arm(sd, t);
  t.LoopReady();
  io.run();
  EXPECT_EQ(sd.release(), t.epfd());
}

TEST(IntegrationAsio, stream_descriptor_async_wait_on_the_instance) {
  Traffic::Run(Harvest::kUntilEmpty, &AsioLoop);
}

}  // namespace
}  // namespace uepoll_test
