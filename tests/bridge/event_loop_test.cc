// An event loop of our own, written the way real ones are: handlers in a
// std::vector indexed by descriptor, sized by
// RLIMIT_NOFILE, and every call renamed to uepoll_*, whatever the kind of
// the descriptor. It serves kernel TCP sockets (a listener, the accepted
// connections, and the clients) together with uepoll pipes and eventfds in
// one uepoll instance, with no translation of numbers:
//
//   client --tcp--> conn --uepoll pipe--> pipe reader --tcp--> client
//
// Each client sends a deterministic byte stream of framed messages and
// checks that the echo is the same stream, byte for byte; each connection
// reports its bytes to a uepoll eventfd. A thread that is not the loop's
// starts the clients through another uepoll eventfd. At the end every
// byte is accounted for, every descriptor closed, and nothing leaked.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <uepoll/uepoll.h>

#include "support/fixture.h"

namespace uepoll_test {
namespace {

constexpr int kClients = 8;
constexpr uint32_t kIn = EPOLLIN;
constexpr uint32_t kOut = EPOLLOUT;
constexpr uint32_t kInRdhup = EPOLLIN | EPOLLRDHUP;
constexpr int kMessagesPerClient = 500;

// The byte at offset i of client c's stream: framed messages, each a
// 2-byte length then that many bytes, all derived from (c, message).
std::string ClientStream(int c) {
  std::string s;
  uint32_t x = 2654435761u * static_cast<uint32_t>(c + 1);
  for (int m = 0; m < kMessagesPerClient; ++m) {
    x = x * 1664525u + 1013904223u;
    uint16_t len = static_cast<uint16_t>(1 + (x >> 16) % 3000);
    s.push_back(static_cast<char>(len & 0xff));
    s.push_back(static_cast<char>(len >> 8));
    for (uint16_t i = 0; i < len; ++i) {
      s.push_back(static_cast<char>((x >> (i % 24)) + i));
    }
  }
  return s;
}

// Counts the framed messages in a stream.
int CountMessages(const std::string& s) {
  size_t at = 0;
  int n = 0;
  while (at + 2 <= s.size()) {
    size_t len =
        static_cast<unsigned char>(s[at]) |
        (static_cast<size_t>(static_cast<unsigned char>(s[at + 1])) << 8);
    at += 2 + len;
    if (at <= s.size()) ++n;
  }
  return n;
}

class Loop;

struct Handler {
  int fd = -1;
  virtual ~Handler() = default;
  virtual void OnEvent(Loop& loop, uint32_t events) = 0;
};

class Loop {
 public:
  Loop() {
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    table_.resize(static_cast<size_t>(rl.rlim_cur));
    ep_ = uepoll_epoll_create1(EPOLL_CLOEXEC);
  }
  ~Loop() { uepoll_close(ep_); }
  bool ok() const { return ep_ >= 0; }

  // Registers h for `events` under its own number: the number is the index
  // and the epoll data, for both kinds of descriptor.
  bool Add(Handler* h, uint32_t events) {
    if (h->fd < 0 || static_cast<size_t>(h->fd) >= table_.size()) {
      ADD_FAILURE() << "descriptor " << h->fd << " outside the table";
      return false;
    }
    EXPECT_EQ(table_[h->fd], nullptr) << "number " << h->fd << " in use";
    table_[h->fd] = h;
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = h->fd;
    EXPECT_EQ(uepoll_epoll_ctl(ep_, EPOLL_CTL_ADD, h->fd, &ev), 0)
        << strerror(errno);
    ++registered_;
    return true;
  }
  void Mod(Handler* h, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = h->fd;
    EXPECT_EQ(uepoll_epoll_ctl(ep_, EPOLL_CTL_MOD, h->fd, &ev), 0)
        << strerror(errno);
  }
  // Unregisters and closes h's descriptor; the handler is freed after the
  // current batch (an event for it may still be in the batch).
  void Remove(Handler* h) {
    EXPECT_EQ(uepoll_epoll_ctl(ep_, EPOLL_CTL_DEL, h->fd, nullptr), 0);
    EXPECT_EQ(uepoll_close(h->fd), 0);
    table_[h->fd] = nullptr;
    h->fd = -1;
    dead_.emplace_back(h);
    --registered_;
  }
  // Runs until stop() and nothing is registered.
  void Run() {
    epoll_event evs[32];
    while (!stopped_ || registered_ > 0) {
      int n = uepoll_epoll_wait(ep_, evs, 32, 20000);
      ASSERT_GT(n, 0) << "the loop stalled: " << strerror(errno);
      ++waits_;
      for (int i = 0; i < n; ++i) {
        int fd = evs[i].data.fd;
        ASSERT_GE(fd, 0);
        ASSERT_LT(static_cast<size_t>(fd), table_.size());
        Handler* h = table_[fd];
        if (!h) continue;  // removed earlier in this batch
        ASSERT_EQ(h->fd, fd);
        h->OnEvent(*this, evs[i].events);
        ++dispatched_;
      }
      dead_.clear();
    }
  }
  void Stop() { stopped_ = true; }
  bool InTable(int fd) const {
    return fd >= 0 && static_cast<size_t>(fd) < table_.size();
  }
  long dispatched() const { return dispatched_; }
  long waits() const { return waits_; }

 private:
  std::vector<Handler*> table_;
  std::vector<std::unique_ptr<Handler>> dead_;
  int ep_ = -1;
  int registered_ = 0;
  bool stopped_ = false;
  long dispatched_ = 0;
  long waits_ = 0;
};

// Shared tallies (single-threaded: only the loop's thread touches them).
struct Stats {
  long server_in = 0;       // bytes read from client sockets
  long through_pipes = 0;   // bytes read from the uepoll pipes
  long server_out = 0;      // bytes written back to client sockets
  long progress_total = 0;  // sum of what the progress eventfd delivered
  int conns_closed = 0;
  int clients_done = 0;
  int clients_ok = 0;
  long messages = 0;
};

// Writes as much of buf as fd takes; returns false on a real error.
bool Flush(int fd, std::string* buf, long* tally) {
  while (!buf->empty()) {
    ssize_t w = uepoll_write(fd, buf->data(), buf->size());
    if (w < 0) return errno == EAGAIN;
    buf->erase(0, static_cast<size_t>(w));
    if (tally) *tally += w;
  }
  return true;
}

class Conn;

class PipeReader : public Handler {
 public:
  explicit PipeReader(Conn* c) : conn_(c) {}
  void OnEvent(Loop& loop, uint32_t events) override;
  Conn* conn_;
};

class PipeWriter : public Handler {
 public:
  explicit PipeWriter(Conn* c) : conn_(c) {}
  void OnEvent(Loop& loop, uint32_t events) override;
  Conn* conn_;
};

// An accepted connection: what it reads goes into its uepoll pipe; what
// comes out of the pipe goes back to the client. Each direction stops
// reading while its output is backed up.
class Conn : public Handler {
 public:
  Conn(Stats* st, int progress) : st_(st), progress_(progress) {}

  bool Start(Loop& loop, int sock) {
    fd = sock;
    int p[2];
    if (uepoll_pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) return false;
    reader_ = new PipeReader(this);
    reader_->fd = p[0];
    writer_ = new PipeWriter(this);
    writer_->fd = p[1];
    return loop.Add(this, sock_events_) && loop.Add(reader_, reader_events_) &&
           loop.Add(writer_, writer_events_);
  }

  void OnEvent(Loop& loop, uint32_t events) override {
    if (!eof_ && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) {
      ReadAll(fd, &to_pipe_, &eof_, &st_->server_in);
    }
    Step(loop);
  }
  void FromPipe(Loop& loop) {
    ReadAll(reader_->fd, &to_sock_, &pipe_eof_, &st_->through_pipes);
    Step(loop);
  }

  // Moves what can move, closes what is finished, and updates interests.
  void Step(Loop& loop) {
    if (writer_open_) {
      EXPECT_TRUE(Flush(writer_->fd, &to_pipe_, nullptr)) << strerror(errno);
      if (eof_ && to_pipe_.empty()) {
        // All the client sent is in the pipe: the reader sees EOF once it
        // has drained it.
        loop.Remove(writer_);
        writer_open_ = false;
      }
    }
    long before = st_->server_out;
    EXPECT_TRUE(Flush(fd, &to_sock_, &st_->server_out)) << strerror(errno);
    if (st_->server_out > before) {
      uint64_t n = static_cast<uint64_t>(st_->server_out - before);
      EXPECT_EQ(uepoll_write(progress_, &n, 8), 8);
    }
    if (pipe_eof_ && to_sock_.empty()) {
      EXPECT_EQ(uepoll_shutdown(fd, SHUT_WR), 0);
      loop.Remove(reader_);
      loop.Remove(this);
      ++st_->conns_closed;
      return;
    }
    uint32_t sock = (eof_ || !to_pipe_.empty() ? 0u : kInRdhup) |
                    (to_sock_.empty() ? 0u : kOut);
    SetInterest(loop, this, &sock_events_, sock);
    if (writer_open_) {
      SetInterest(loop, writer_, &writer_events_, to_pipe_.empty() ? 0u : kOut);
    }
    if (!pipe_eof_) {
      SetInterest(loop, reader_, &reader_events_, to_sock_.empty() ? kIn : 0u);
    }
  }

 private:
  static void SetInterest(Loop& loop, Handler* h, uint32_t* cur,
                          uint32_t want) {
    if (*cur == want) return;
    *cur = want;
    loop.Mod(h, want);
  }
  // Reads fd until it would block or ends.
  static void ReadAll(int from, std::string* into, bool* eof, long* tally) {
    char buf[8192];
    for (;;) {
      ssize_t r = uepoll_read(from, buf, sizeof buf);
      if (r > 0) {
        *tally += r;
        into->append(buf, static_cast<size_t>(r));
        continue;
      }
      if (r == 0) {
        *eof = true;
      } else {
        EXPECT_EQ(errno, EAGAIN) << strerror(errno);
      }
      return;
    }
  }

  Stats* st_;
  int progress_;
  PipeReader* reader_ = nullptr;
  PipeWriter* writer_ = nullptr;
  std::string to_pipe_, to_sock_;
  bool eof_ = false, pipe_eof_ = false, writer_open_ = true;
  uint32_t sock_events_ = EPOLLIN | EPOLLRDHUP;
  uint32_t reader_events_ = EPOLLIN;
  uint32_t writer_events_ = 0;
};

void PipeReader::OnEvent(Loop& loop, uint32_t) { conn_->FromPipe(loop); }
void PipeWriter::OnEvent(Loop& loop, uint32_t) { conn_->Step(loop); }

class Listener : public Handler {
 public:
  Listener(Stats* st, int progress) : st_(st), progress_(progress) {}
  void OnEvent(Loop& loop, uint32_t) override {
    for (;;) {
      int s = ::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (s < 0) {
        EXPECT_EQ(errno, EAGAIN) << strerror(errno);
        return;
      }
      int one = 1;
      ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      auto* c = new Conn(st_, progress_);
      EXPECT_TRUE(c->Start(loop, s));
      if (++accepted_ == kClients) {
        loop.Remove(this);  // no more connections expected
        return;
      }
    }
  }
  Stats* st_;
  int progress_;
  int accepted_ = 0;
};

// A client: sends its stream, reads the echo, checks it.
class Client : public Handler {
 public:
  Client(Stats* st, int id, int done) : st_(st), id_(id), done_(done) {
    to_send_ = ClientStream(id);
    expect_ = to_send_;
  }
  void Begin(Loop& loop) {
    started_ = true;
    loop.Mod(this, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
  }
  void OnEvent(Loop& loop, uint32_t events) override {
    if (!started_) return;
    if ((events & EPOLLOUT) && sent_ < to_send_.size()) {
      while (sent_ < to_send_.size()) {
        ssize_t w =
            uepoll_write(fd, to_send_.data() + sent_,
                         std::min<size_t>(to_send_.size() - sent_, 16384));
        if (w < 0) {
          EXPECT_EQ(errno, EAGAIN) << strerror(errno);
          break;
        }
        sent_ += static_cast<size_t>(w);
      }
      if (sent_ == to_send_.size()) {
        EXPECT_EQ(uepoll_shutdown(fd, SHUT_WR), 0);
        loop.Mod(this, EPOLLIN | EPOLLRDHUP);
      }
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
      char buf[8192];
      for (;;) {
        ssize_t r = uepoll_read(fd, buf, sizeof buf);
        if (r > 0) {
          got_.append(buf, static_cast<size_t>(r));
          continue;
        }
        if (r < 0) {
          EXPECT_EQ(errno, EAGAIN) << strerror(errno);
          return;
        }
        // End of the echo.
        EXPECT_EQ(got_.size(), expect_.size()) << "client " << id_;
        bool same = got_ == expect_;
        EXPECT_TRUE(same) << "client " << id_ << ": echo differs";
        st_->messages += CountMessages(got_);
        st_->clients_ok += same;
        ++st_->clients_done;
        uint64_t one = 1;
        EXPECT_EQ(uepoll_write(done_, &one, 8), 8);
        loop.Remove(this);
        return;
      }
    }
  }
  Stats* st_;
  int id_;
  int done_;
  bool started_ = false;
  std::string to_send_, expect_, got_;
  size_t sent_ = 0;
};

// The "go" eventfd: written by another thread; starts every client.
class Go : public Handler {
 public:
  explicit Go(std::vector<Client*>* clients) : clients_(clients) {}
  void OnEvent(Loop& loop, uint32_t) override {
    uint64_t v;
    ASSERT_EQ(uepoll_read(fd, &v, 8), 8);
    for (Client* c : *clients_) c->Begin(loop);
    loop.Remove(this);
  }
  std::vector<Client*>* clients_;
};

// Sums what connections report.
class Progress : public Handler {
 public:
  explicit Progress(Stats* st) : st_(st) {}
  void OnEvent(Loop&, uint32_t) override {
    uint64_t v = 0;
    if (uepoll_read(fd, &v, 8) == 8)
      st_->progress_total += static_cast<long>(v);
  }
  Stats* st_;
};

// Counts finished clients; stops the loop after the last one.
class Done : public Handler {
 public:
  Done(Stats* st, Handler* progress) : st_(st), progress_(progress) {}
  void OnEvent(Loop& loop, uint32_t) override {
    uint64_t v = 0;
    ASSERT_EQ(uepoll_read(fd, &v, 8), 8);
    seen_ += static_cast<int>(v);
    if (seen_ == kClients) {
      // A last look at the progress count, then unregister the rest.
      progress_->OnEvent(loop, EPOLLIN);
      loop.Remove(progress_);
      loop.Remove(this);
      loop.Stop();
    }
  }
  Stats* st_;
  Handler* progress_;
  int seen_ = 0;
};

int LowestFree() {
  int fd = ::fcntl(0, F_DUPFD, 0);
  ::close(fd);
  return fd;
}

TEST(BridgeEventLoop, FdIndexedLoopEchoesOverKernelSocketsAndUepollPipes) {
  int lowest_before = LowestFree();
  long expected_bytes = 0;
  int expected_messages = 0;
  for (int c = 0; c < kClients; ++c) {
    std::string s = ClientStream(c);
    expected_bytes += static_cast<long>(s.size());
    expected_messages += CountMessages(s);
  }
  ASSERT_EQ(expected_messages, kClients * kMessagesPerClient);

  Stats st;
  std::thread starter;
  {
    Loop loop;
    ASSERT_TRUE(loop.ok());

    auto* progress = new Progress(&st);
    progress->fd = uepoll_eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ASSERT_TRUE(loop.Add(progress, EPOLLIN));
    auto* done = new Done(&st, progress);
    done->fd = uepoll_eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ASSERT_TRUE(loop.Add(done, EPOLLIN));

    auto* listener = new Listener(&st, progress->fd);
    listener->fd =
        ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_GE(listener->fd, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener->fd, reinterpret_cast<sockaddr*>(&a), sizeof a),
              0);
    ASSERT_EQ(::listen(listener->fd, kClients), 0);
    socklen_t alen = sizeof a;
    ASSERT_EQ(
        ::getsockname(listener->fd, reinterpret_cast<sockaddr*>(&a), &alen), 0);
    ASSERT_TRUE(loop.Add(listener, EPOLLIN));

    std::vector<Client*> clients;
    for (int c = 0; c < kClients; ++c) {
      auto* cl = new Client(&st, c, done->fd);
      cl->fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      ASSERT_GE(cl->fd, 0);
      ASSERT_EQ(::connect(cl->fd, reinterpret_cast<sockaddr*>(&a), alen), 0);
      ASSERT_EQ(uepoll_fcntl(cl->fd, F_SETFL,
                             uepoll_fcntl(cl->fd, F_GETFL) | O_NONBLOCK),
                0);
      int one = 1;
      ::setsockopt(cl->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ASSERT_TRUE(loop.Add(cl, 0));  // idle until "go"
      clients.push_back(cl);
    }
    auto* go = new Go(&clients);
    go->fd = uepoll_eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ASSERT_TRUE(loop.Add(go, EPOLLIN));
    int go_fd = go->fd;
    starter = std::thread([go_fd] {
      uint64_t one = 1;
      EXPECT_EQ(uepoll_write(go_fd, &one, 8), 8);
    });

    loop.Run();
    starter.join();
    EXPECT_GT(loop.waits(), 0);
    RecordProperty("waits", static_cast<int>(loop.waits()));
    RecordProperty("dispatched", static_cast<int>(loop.dispatched()));
  }
  EXPECT_EQ(st.clients_done, kClients);
  EXPECT_EQ(st.clients_ok, kClients);
  EXPECT_EQ(st.conns_closed, kClients);
  EXPECT_EQ(st.messages, expected_messages);
  EXPECT_EQ(st.server_in, expected_bytes);
  EXPECT_EQ(st.through_pipes, expected_bytes);
  EXPECT_EQ(st.server_out, expected_bytes);
  EXPECT_EQ(st.progress_total, expected_bytes);
  // Every descriptor of either kind was closed, and nothing leaked.
  EXPECT_EQ(LowestFree(), lowest_before);
  ExpectNoUepollLeaks();
}

}  // namespace
}  // namespace uepoll_test
