// Pipes (src/sources/pipe.cc): the slot ring, merging, packet mode, masks,
// EPIPE/SIGPIPE and blocking I/O, each on the kernel and on uepoll.
#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "sources/source_test.h"

namespace uepoll_test {
namespace {

class PipeSource : public SourceTest {};

constexpr short kPollIn = POLLIN | POLLRDNORM;
constexpr short kPollOut = POLLOUT | POLLWRNORM;

// --- Slot accounting -------------------------------------------------------

TEST_P(PipeSource,
       slots__sixteen_page_writes_fill_and_one_byte_read_frees_nothing) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  EXPECT_EQ(FillWith(p[1], 4096), 16);
  EXPECT_EQ(PollMask(p[1]), 0);
  ASSERT_EQ(ReadBytes(p[0], 1), 1);
  EXPECT_EQ(PollMask(p[1]), 0) << "a part-read slot still counts";
  EXPECT_ERRNO(WriteBytes(p[1], 1), EAGAIN);
  ASSERT_EQ(ReadBytes(p[0], 4095), 4095);
  EXPECT_EQ(PollMask(p[1]), kPollOut);
  EXPECT_EQ(WriteBytes(p[1], 1), 1);
}

TEST_P(PipeSource, slots__each_unmerged_small_write_takes_a_slot) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  // O_DIRECT writes never merge: 16 one-byte packets fill the pipe.
  ASSERT_EQ(B().fcntl(p[1], F_SETFL, O_NONBLOCK | O_DIRECT), 0);
  EXPECT_EQ(FillWith(p[1], 1), 16);
  EXPECT_EQ(PollMask(p[1]), 0);
}

// --- Merge rules -----------------------------------------------------------

TEST_P(PipeSource, merge__small_writes_share_the_last_slot) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(WriteBytes(p[1], 1), 1);
  // All 4096 bytes sit in one slot: 15 more pages fit.
  EXPECT_EQ(FillWith(p[1], 4096), 15);
}

TEST_P(PipeSource, merge__page_write_never_merges) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(WriteBytes(p[1], 1), 1);
  // 4096 % 4096 == 0: nothing to merge, a new slot.
  EXPECT_EQ(FillWith(p[1], 4096), 15);
}

TEST_P(PipeSource, merge__remainder_merges_and_the_rest_is_page_aligned) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(WriteBytes(p[1], 10), 10);
  // 10 bytes merge into slot 0, 4096 take slot 1: 14 pages left.
  ASSERT_EQ(WriteBytes(p[1], 4096 + 10), 4096 + 10);
  EXPECT_EQ(FillWith(p[1], 4096), 14);
}

TEST_P(PipeSource, merge__remainder_that_does_not_fit_takes_new_slots) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(WriteBytes(p[1], 4000), 4000);
  // 100 bytes do not fit in the 96 left: slot 1 gets all of them.
  ASSERT_EQ(WriteBytes(p[1], 100), 100);
  EXPECT_EQ(FillWith(p[1], 4096), 14);
}

TEST_P(PipeSource, merge__no_merge_after_the_reader_drained_the_slot_head) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(WriteBytes(p[1], 4000), 4000);
  ASSERT_EQ(ReadBytes(p[0], 3999), 3999);
  // Room is at the slot's end only: 96 bytes fit, 97 do not.
  ASSERT_EQ(WriteBytes(p[1], 96), 96);
  ASSERT_EQ(WriteBytes(p[1], 1), 1);  // a new slot
  EXPECT_EQ(FillWith(p[1], 4096), 14);
}

TEST_P(PipeSource, merge__bytes_keep_their_order_across_slots) {
  int p[2];
  Pipe(p);
  std::string big(5000, 'b');
  ASSERT_EQ(WriteString(p[1], "a"), 1);
  ASSERT_EQ(WriteString(p[1], big), 5000);
  ASSERT_EQ(WriteString(p[1], "c"), 1);
  EXPECT_EQ(ReadString(p[0], 10000), "a" + big + "c");
}

// --- Packet mode (O_DIRECT) ------------------------------------------------

TEST_P(PipeSource, packet__each_write_is_read_alone) {
  int p[2];
  Pipe(p, O_DIRECT);
  EXPECT_EQ(B().fcntl(p[1], F_GETFL, 0), O_WRONLY | O_DIRECT);
  EXPECT_EQ(B().fcntl(p[0], F_GETFL, 0), O_RDONLY) << "write end only";
  ASSERT_EQ(WriteString(p[1], "abc"), 3);
  ASSERT_EQ(WriteString(p[1], "defg"), 4);
  EXPECT_EQ(ReadString(p[0], 100), "abc");
  EXPECT_EQ(ReadString(p[0], 100), "defg");
}

TEST_P(PipeSource, packet__short_read_discards_the_rest) {
  int p[2];
  Pipe(p, O_DIRECT);
  ASSERT_EQ(WriteString(p[1], "hello"), 5);
  ASSERT_EQ(WriteString(p[1], "world"), 5);
  EXPECT_EQ(ReadString(p[0], 2), "he");
  EXPECT_EQ(ReadString(p[0], 100), "world");
}

TEST_P(PipeSource, packet__large_write_is_one_packet_per_page) {
  int p[2];
  Pipe(p, O_DIRECT);
  ASSERT_EQ(WriteBytes(p[1], 4096 + 5), 4096 + 5);
  EXPECT_EQ(ReadBytes(p[0], 10000), 4096);
  EXPECT_EQ(ReadBytes(p[0], 10000), 5);
}

TEST_P(PipeSource, packet__setfl_switches_packet_mode) {
  int p[2];
  Pipe(p);
  ASSERT_EQ(B().fcntl(p[1], F_SETFL, O_DIRECT), 0);
  EXPECT_EQ(B().fcntl(p[1], F_GETFL, 0), O_WRONLY | O_DIRECT);
  ASSERT_EQ(WriteString(p[1], "ab"), 2);
  ASSERT_EQ(WriteString(p[1], "cd"), 2);
  EXPECT_EQ(ReadString(p[0], 100), "ab");
  ASSERT_EQ(B().fcntl(p[1], F_SETFL, 0), 0);
  ASSERT_EQ(WriteString(p[1], "ef"), 2);
  ASSERT_EQ(WriteString(p[1], "gh"), 2);
  // "ef" started a stream slot after the packet "cd"; "gh" merged into it.
  EXPECT_EQ(ReadString(p[0], 100), "cd");
  EXPECT_EQ(ReadString(p[0], 100), "efgh");
}

// --- Masks -----------------------------------------------------------------

TEST_P(PipeSource, mask__poll_reports_hup_with_data_and_err_with_space) {
  int p[2];
  Pipe(p);
  ASSERT_EQ(WriteBytes(p[1], 1), 1);
  int d = Dup(p[0]);
  ASSERT_EQ(Close(p[1]), 0);
  EXPECT_EQ(PollMask(p[0]), kPollIn | POLLHUP);
  ASSERT_EQ(ReadBytes(p[0], 1), 1);
  EXPECT_EQ(PollMask(d), POLLHUP);

  int q[2];
  Pipe(q);
  ASSERT_EQ(Close(q[0]), 0);
  EXPECT_EQ(PollMask(q[1]), kPollOut | POLLERR);
}

TEST_P(PipeSource, mask__failed_write_on_full_pipe_is_still_an_edge) {
  // pipe_write wakes rd_wait on every write once the pipe was polled,
  // even one that fails EAGAIN.
  int p[2];
  Pipe(p, O_NONBLOCK);
  int ep = Epoll();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[0], EPOLLIN | EPOLLET, 7), 0);
  ASSERT_EQ(FillWith(p[1], 4096), 16);
  ASSERT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 7}}));
  ASSERT_TRUE(Wait(ep).empty());
  EXPECT_ERRNO(WriteBytes(p[1], 4096), EAGAIN);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLIN, 7}}));
}

TEST_P(PipeSource, mask__close_of_reader_is_err_edge_for_et_writer) {
  int p[2];
  Pipe(p);
  int ep = Epoll();
  ASSERT_EQ(Ctl(ep, EPOLL_CTL_ADD, p[1], EPOLLOUT | EPOLLET, 3), 0);
  ASSERT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLOUT, 3}}));
  ASSERT_EQ(Close(p[0]), 0);
  EXPECT_EQ(Wait(ep), (std::vector<Ev>{{EPOLLOUT | EPOLLERR, 3}}));
}

// --- Sizes, flags, EPIPE ---------------------------------------------------

TEST_P(PipeSource, io__zero_byte_calls_return_zero) {
  int p[2];
  Pipe(p);
  char c;
  EXPECT_EQ(B().read(p[0], &c, 0), 0);
  EXPECT_EQ(B().write(p[1], &c, 0), 0);
  ASSERT_EQ(Close(p[0]), 0);
  bool raised = RaisesSigpipe([&] { EXPECT_EQ(B().write(p[1], &c, 0), 0); });
  EXPECT_FALSE(raised) << "a null write succeeds before the reader check";
}

TEST_P(PipeSource, io__epipe_raises_sigpipe_on_the_calling_thread) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  ASSERT_EQ(Close(p[0]), 0);
  sigset_t pipe_set, old, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &pipe_set, &old), 0);
  EXPECT_ERRNO(WriteBytes(p[1], 100000), EPIPE);
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 1);
  struct timespec zero {};
  siginfo_t info{};
  EXPECT_EQ(sigtimedwait(&pipe_set, &info, &zero), SIGPIPE);
  EXPECT_EQ(info.si_code, SI_USER) << "send_sig(..., 0) is a user signal";
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// A SIGPIPE handler may close the very descriptor whose write raised it:
// the write still fails EPIPE and the number is closed afterwards. The
// write runs on a thread other than the pipe's creator, after a first
// write there, so that on uepoll it borrows the pipe (docs/design.md,
// "Borrowed lookups"); the borrow must not make the handler's close wait
// for the interrupted write.
std::atomic<int> g_close_in_handler{-1};
std::atomic<const Backend*> g_handler_backend{nullptr};
std::atomic<int> g_handler_close_result{-2};

TEST_P(PipeSource, io__sigpipe_handler_may_close_the_written_descriptor) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  struct sigaction sa {
  }, old_sa{};
  sa.sa_handler = [](int) {
    g_handler_close_result =
        g_handler_backend.load()->close(g_close_in_handler.load());
  };
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGPIPE, &sa, &old_sa), 0);
  g_handler_backend = &B();
  g_close_in_handler = p[1];
  g_handler_close_result = -2;
  int write_result = 0, write_errno = 0, after = 0, after_errno = 0;
  std::thread writer([&] {
    char c = 'x';
    if (B().write(p[1], &c, 1) != 1) return;  // first use on this thread
    ASSERT_EQ(Close(p[0]), 0);
    write_result = static_cast<int>(B().write(p[1], &c, 1));
    write_errno = errno;
    after = static_cast<int>(B().write(p[1], &c, 1));
    after_errno = errno;
  });
  writer.join();
  sigaction(SIGPIPE, &old_sa, nullptr);
  Forget(p[1]);
  EXPECT_EQ(g_handler_close_result.load(), 0);
  EXPECT_EQ(write_result, -1);
  EXPECT_EQ(write_errno, EPIPE);
  EXPECT_EQ(after, -1);
  EXPECT_EQ(after_errno, EBADF) << "the handler's close did not take effect";
}

TEST_P(PipeSource, io__pipe2_argument_errors) {
  int p[2] = {-1, -1};
  EXPECT_ERRNO(B().pipe2(nullptr, 0), EFAULT);
  EXPECT_ERRNO(B().pipe2(nullptr, O_APPEND), EINVAL);  // flags first
  // O_NOTIFICATION_PIPE: accepted, then ENOPKG without CONFIG_WATCH_QUEUE.
  EXPECT_ERRNO(B().pipe2(p, O_EXCL), ENOPKG);
  EXPECT_ERRNO(B().pipe2(nullptr, O_EXCL), ENOPKG);
  EXPECT_EQ(p[0], -1);
}

// --- Blocking I/O ----------------------------------------------------------

TEST_P(PipeSource, block__read_is_woken_by_a_writer) {
  int p[2];
  Pipe(p);
  char buf[16] = {};
  Waiter w([&](epoll_event*) {
    return static_cast<int>(B().read(p[0], buf, sizeof buf));
  });
  Rescue rescue(w, [&] { WriteBytes(p[1], 1); });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(WriteString(p[1], "hi"), 2);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 2);
  EXPECT_STREQ(buf, "hi");
}

TEST_P(PipeSource, block__close_of_writer_wakes_every_reader_with_eof) {
  int p[2];
  Pipe(p);
  char a, b;
  Waiter w1(
      [&](epoll_event*) { return static_cast<int>(B().read(p[0], &a, 1)); });
  Waiter w2(
      [&](epoll_event*) { return static_cast<int>(B().read(p[0], &b, 1)); });
  Rescue rescue1(w1, [&] { WriteBytes(p[1], 1); });
  Rescue rescue2(w2, [&] { WriteBytes(p[1], 1); });
  ASSERT_TRUE(w1.Parked());
  ASSERT_TRUE(w2.Parked());
  ASSERT_EQ(Close(p[1]), 0);
  ASSERT_TRUE(w1.WaitDone());
  ASSERT_TRUE(w2.WaitDone());
  EXPECT_EQ(w1.result(), 0);
  EXPECT_EQ(w2.result(), 0);
}

TEST_P(PipeSource, block__write_waits_for_a_free_slot) {
  int p[2];
  Pipe(p);
  for (int i = 0; i < 16; ++i) ASSERT_EQ(WriteBytes(p[1], 4096), 4096);
  Waiter w(
      [&](epoll_event*) { return static_cast<int>(WriteBytes(p[1], 10)); });
  Rescue rescue(w, [&] { ReadBytes(p[0], 4096); });
  ASSERT_TRUE(w.Parked());
  ASSERT_EQ(ReadBytes(p[0], 100), 100);  // part of a slot: still full
  EXPECT_FALSE(w.Done());
  ASSERT_EQ(ReadBytes(p[0], 4096 - 100), 4096 - 100);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 10);
}

TEST_P(PipeSource, block__close_of_reader_fails_blocked_writer_epipe) {
  int p[2];
  Pipe(p);
  for (int i = 0; i < 16; ++i) ASSERT_EQ(WriteBytes(p[1], 4096), 4096);
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);  // inherited by the waiter
  {
    Waiter w([&](epoll_event*) {
      int r = static_cast<int>(WriteBytes(p[1], 10));
      int e = errno;
      struct timespec zero {};
      // The SIGPIPE went to this thread: consume it here.
      int sig = sigtimedwait(&pipe_set, nullptr, &zero);
      errno = e;
      return sig == SIGPIPE ? r : -100;
    });
    Rescue rescue(w, [&] { ReadBytes(p[0], 4096); });
    ASSERT_TRUE(w.Parked());
    ASSERT_EQ(Close(p[0]), 0);
    ASSERT_TRUE(w.WaitDone());
    EXPECT_EQ(w.result(), -1);
    EXPECT_EQ(w.error(), EPIPE);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

TEST_P(PipeSource, block__signal_without_sa_restart_fails_read_eintr) {
  ScopedSigusr1 handler(/*restart=*/false);
  int p[2];
  Pipe(p);
  char c;
  Waiter w(
      [&](epoll_event*) { return static_cast<int>(B().read(p[0], &c, 1)); });
  Rescue rescue(w, [&] { WriteBytes(p[1], 1); });
  ASSERT_TRUE(w.Parked());
  pthread_kill(w.handle(), SIGUSR1);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), -1);
  EXPECT_EQ(w.error(), EINTR);
}

TEST_P(PipeSource, block__signal_with_sa_restart_restarts_read) {
  if (kTsan) GTEST_SKIP() << "TSan defers the handler of a restarted read";
  ScopedSigusr1 handler(/*restart=*/true);
  int p[2];
  Pipe(p);
  char c = 0;
  Waiter w(
      [&](epoll_event*) { return static_cast<int>(B().read(p[0], &c, 1)); });
  Rescue rescue(w, [&] { WriteBytes(p[1], 1); });
  ASSERT_TRUE(w.Parked());
  pthread_kill(w.handle(), SIGUSR1);
  ASSERT_TRUE(Eventually([] { return g_signals.load() == 1; }));
  ASSERT_TRUE(w.Parked()) << "the read went back to sleep";
  ASSERT_EQ(WriteString(p[1], "z"), 1);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 1);
  EXPECT_EQ(c, 'z');
}

TEST_P(PipeSource, block__signal_after_partial_write_returns_the_count) {
  // Even under SA_RESTART: bytes already moved are reported, not restarted.
  ScopedSigusr1 handler(/*restart=*/true);
  int p[2];
  Pipe(p);
  for (int i = 0; i < 15; ++i) ASSERT_EQ(WriteBytes(p[1], 4096), 4096);
  Waiter w([&](epoll_event*) {
    return static_cast<int>(WriteBytes(p[1], 3 * 4096));
  });
  Rescue rescue(w, [&] { ReadBytes(p[0], 65536); });
  ASSERT_TRUE(w.Parked());
  pthread_kill(w.handle(), SIGUSR1);
  ASSERT_TRUE(w.WaitDone());
  EXPECT_EQ(w.result(), 4096);
}

TEST_P(PipeSource, block__large_write_streams_through_a_reader_thread) {
  int p[2];
  Pipe(p);
  constexpr size_t kSize = 1 << 20;
  std::vector<char> out(kSize);
  for (size_t i = 0; i < kSize; ++i)
    out[i] = static_cast<char>(i * 7 + i / 4096);
  std::vector<char> in;
  Waiter reader([&](epoll_event*) {
    char buf[3000];
    for (;;) {
      ssize_t n = B().read(p[0], buf, sizeof buf);
      if (n <= 0) return static_cast<int>(n);
      in.insert(in.end(), buf, buf + n);
    }
  });
  Rescue rescue(reader, [&] { Close(p[1]); });
  EXPECT_EQ(B().write(p[1], out.data(), kSize), static_cast<ssize_t>(kSize));
  ASSERT_EQ(Close(p[1]), 0);
  ASSERT_TRUE(reader.WaitDone());
  EXPECT_EQ(reader.result(), 0);
  EXPECT_TRUE(in == out);
}

TEST_P(PipeSource, block__page_writes_from_many_threads_stay_whole) {
  // Writes of up to 4096 bytes are atomic: each lands in one slot, and a
  // 4096-byte read from a slot boundary returns exactly one of them.
  int p[2];
  Pipe(p);
  constexpr int kWriters = 4;
  constexpr int kPerWriter = 200;
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      std::vector<char> rec(4096, static_cast<char>('a' + t));
      for (int i = 0; i < kPerWriter; ++i) {
        ASSERT_EQ(B().write(p[1], rec.data(), rec.size()), 4096);
      }
    });
  }
  int counts[kWriters] = {};
  std::vector<char> buf(4096);
  for (int i = 0; i < kWriters * kPerWriter; ++i) {
    ASSERT_EQ(B().read(p[0], buf.data(), buf.size()), 4096);
    int t = buf[0] - 'a';
    ASSERT_TRUE(t >= 0 && t < kWriters);
    ASSERT_EQ(std::count(buf.begin(), buf.end(), buf[0]), 4096) << i;
    ++counts[t];
  }
  for (std::thread& w : writers) w.join();
  for (int c : counts) EXPECT_EQ(c, kPerWriter);
}

TEST_P(PipeSource, io__null_buffer_faults_only_where_the_copy_happens) {
  int p[2];
  Pipe(p, O_NONBLOCK);
  EXPECT_ERRNO(B().read(p[0], nullptr, 8), EAGAIN);  // empty: no copy
  EXPECT_ERRNO(B().write(p[1], nullptr, 4), EFAULT);
  EXPECT_EQ(PollMask(p[0]), 0) << "no empty slot left behind";
  ASSERT_EQ(WriteString(p[1], "abc"), 3);
  EXPECT_ERRNO(B().write(p[1], nullptr, 5000), EFAULT);
  EXPECT_ERRNO(B().read(p[0], nullptr, 8), EFAULT);
  EXPECT_EQ(ReadString(p[0], 100), "abc") << "nothing consumed or added";
  EXPECT_EQ(FillWith(p[1], 4096), 16);
}

UEPOLL_INSTANTIATE_BACKENDS(PipeSource);

}  // namespace
}  // namespace uepoll_test
