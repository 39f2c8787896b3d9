// A C++ program compiled with `-include uepoll/rename.h` and nothing else
// changed: the renaming must leave the standard library's and the
// program's own members named read/write/close/poll alone (other argument
// counts) while the libc calls become uepoll's. Built as it is too: the
// same expectations on the kernel.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <list>
#include <sstream>
#include <string>

namespace {

int failures = 0;
void Check(bool ok, const char* what, int line) {
  if (!ok) {
    std::fprintf(stderr, "FAIL line %d: %s\n", line, what);
    ++failures;
  }
}
#define CHECK(cond) Check((cond), #cond, __LINE__)

// Members that share libc's names with other argument counts.
class Device {
 public:
  int read(char* out, int n) { return n > 0 ? (*out = 'd', 1) : 0; }
  void write(const std::string& s) { log_ += s; }
  void close() { closed_ = true; }
  int poll() const { return closed_ ? 0 : 1; }
  int getsockopt(int level, int name, void* val, int* len, int flags, int extra,
                 int more) {
    return level + name + flags + extra + more + (val && len ? 0 : 1);
  }
  bool closed_ = false;
  std::string log_;
};

}  // namespace

int main() {
  // The standard streams: istream::read(s, n), ostream::write(s, n),
  // fstream::close() keep their names.
  std::string path =
      std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
      "/uepoll_rename_cxx." + std::to_string(getpid());
  std::ofstream out(path);
  out.write("hello", 5);
  out.close();
  std::ifstream in(path);
  char text[6] = {};
  in.read(text, 5);
  in.close();
  CHECK(std::string(text) == "hello");
  std::remove(path.c_str());
  std::stringstream ss;
  ss.write("ab", 2);
  CHECK(ss.str() == "ab");

  Device dev;
  char c = 0;
  CHECK(dev.read(&c, 1) == 1 && c == 'd');
  dev.write("x");
  CHECK(dev.poll() == 1);
  dev.close();
  CHECK(dev.closed_ && dev.poll() == 0);
  CHECK(dev.getsockopt(1, 2, &c, nullptr, 0, 0, 0) == 4);
  // std::list::splice (two to four arguments) keeps its name.
  std::list<int> a{1, 2}, b{3};
  a.splice(a.end(), b);
  CHECK(a.size() == 3 && b.empty());

  // The libc calls, qualified or not.
  int p[2];
  CHECK(pipe(p) == 0);
#ifdef UEPOLL_RENAME_H_
  CHECK(uepoll_is_uepoll_fd(p[0]) == 1 && uepoll_is_uepoll_fd(p[1]) == 1);
#endif
  CHECK(fcntl(p[0], F_SETFL, O_NONBLOCK) == 0);
  CHECK(::write(p[1], "xyz", 3) == 3);
  pollfd pfd = {p[0], POLLIN, 0};
  CHECK(poll(&pfd, 1, 10000) == 1 && pfd.revents == POLLIN);
  char buf[8];
  CHECK(read(p[0], buf, sizeof buf) == 3);
  CHECK(::poll(&pfd, 1, 0) == 0);
  struct stat st;
  CHECK(fstat(p[0], &st) == 0 && S_ISFIFO(st.st_mode));
  CHECK(lseek(p[0], 0, SEEK_CUR) == -1 && errno == ESPIPE);
  CHECK(fsync(p[1]) == -1 && errno == EINVAL);
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  int type = 0;
  socklen_t len = sizeof type;
  CHECK(getsockopt(sv[0], SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
        type == SOCK_STREAM);
  CHECK(close(sv[0]) == 0 && close(sv[1]) == 0);
  int q = dup(p[0]);
  CHECK(q >= 0 && ::close(q) == 0);
  CHECK(close(p[0]) == 0 && close(p[1]) == 0);
  std::printf("%s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
