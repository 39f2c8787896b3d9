// Descriptors across execve: a kernel descriptor without
// FD_CLOEXEC survives exec and one with it does not; a uepoll descriptor
// does not survive either way, since uepoll objects are the process's
// memory, which exec replaces (docs/semantics.md D12). The new program
// (uepoll-exec-probe) reports which of the numbers it was given are open.
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "scenarios/scenario.h"

namespace uepoll_test {
namespace {

class ExecScenario : public BackendTest {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_THREAD__)
    GTEST_SKIP() << "ThreadSanitizer does not support fork() in a threaded "
                    "process whose child keeps running";
#endif
  }

  // fork + execve of the probe with fds as arguments; returns its report,
  // fd -> "closed" or "open <link target>".
  std::map<int, std::string> Probe(const std::vector<int>& fds) {
    std::map<int, std::string> out;
    int pfd[2];
    EXPECT_EQ(::pipe2(pfd, O_CLOEXEC), 0);
    std::vector<std::string> args{UEPOLL_EXEC_PROBE};
    for (int fd : fds) args.push_back(std::to_string(fd));
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      // dup2 clears FD_CLOEXEC on the copy: stdout survives the exec.
      if (::dup2(pfd[1], 1) != 1) _exit(126);
      ::execve(argv[0], argv.data(), environ);
      _exit(127);
    }
    ::close(pfd[1]);
    std::string text;
    char buf[512];
    ssize_t n;
    while ((n = ::read(pfd[0], buf, sizeof buf)) > 0) {
      text.append(buf, static_cast<size_t>(n));
    }
    ::close(pfd[0]);
    int status = 0;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "the probe did not run: status " << status;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream words(line);
      int fd;
      std::string state;
      words >> fd >> state;
      out[fd] = state;
      if (state == "open") {
        std::string what;
        words >> what;
        out[fd] += " " + what;
      }
    }
    return out;
  }
};

TEST_P(ExecScenario, OnlyKernelDescriptorsWithoutCloexecSurviveExecve) {
  int efd_keep = Eventfd(0, EFD_NONBLOCK);
  int efd_drop = Eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int ep_keep = Epoll(0);
  int ep_drop = Epoll(EPOLL_CLOEXEC);
  // Created close-on-exec, then cleared with F_SETFD.
  int ep_cleared = Epoll(EPOLL_CLOEXEC);
  ASSERT_EQ(B().fcntl(ep_cleared, F_SETFD, 0), 0);

  std::map<int, std::string> got =
      Probe({efd_keep, efd_drop, ep_keep, ep_drop, ep_cleared});
  ASSERT_EQ(got.size(), 5u);
  // FD_CLOEXEC: closed by the exec on both backends.
  EXPECT_EQ(got[efd_drop], "closed");
  EXPECT_EQ(got[ep_drop], "closed");
  if (IsKernel()) {
    EXPECT_EQ(got[efd_keep], "open anon_inode:[eventfd]");
    EXPECT_EQ(got[ep_keep], "open anon_inode:[eventpoll]");
    EXPECT_EQ(got[ep_cleared], "open anon_inode:[eventpoll]");
  } else {
    // D12: without FD_CLOEXEC too, nothing of a uepoll object reaches the
    // new program, not even an open number.
    EXPECT_EQ(got[efd_keep], "closed");
    EXPECT_EQ(got[ep_keep], "closed");
    EXPECT_EQ(got[ep_cleared], "closed");
  }
}

UEPOLL_INSTANTIATE_BACKENDS(ExecScenario);

}  // namespace
}  // namespace uepoll_test
