// uepoll-exec-probe: run by tests/scenarios/exec_test.cc after execve. For
// each descriptor number on its command line it prints one line,
// "<fd> closed" or "<fd> open <what /proc/self/fd/<fd> links to>", so the
// test can see which descriptors the new program inherited. It links no
// uepoll code: it is the program on the far side of the exec.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    int fd = std::atoi(argv[i]);
    if (fcntl(fd, F_GETFD) == -1) {
      std::printf("%d closed\n", fd);
      continue;
    }
    char target[256] = {};
    std::string link = "/proc/self/fd/" + std::to_string(fd);
    ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
    std::printf("%d open %s\n", fd, n > 0 ? target : "?");
  }
  return 0;
}
