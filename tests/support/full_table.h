// A full descriptor table, for the tests of what happens when no
// descriptor can be made: while a FullTable lives, the soft RLIMIT_NOFILE
// is lowered to 64 and every free number below it is taken. The limit is
// the process's: a test that uses it runs alone in its process (as under
// ctest) or at least while no other thread needs a descriptor.
#ifndef UEPOLL_TESTS_SUPPORT_FULL_TABLE_H_
#define UEPOLL_TESTS_SUPPORT_FULL_TABLE_H_

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace uepoll_test {

class FullTable {
 public:
  FullTable() {
    getrlimit(RLIMIT_NOFILE, &old_);
    struct rlimit low = old_;
    low.rlim_cur = 64;
    setrlimit(RLIMIT_NOFILE, &low);
    int fd;
    while ((fd = ::dup(0)) >= 0) hogs_.push_back(fd);
    full_ = errno == EMFILE;
  }
  ~FullTable() { Release(); }
  FullTable(const FullTable&) = delete;
  FullTable& operator=(const FullTable&) = delete;
  // Whether the table filled up (dup failed EMFILE, not otherwise).
  bool full() const { return full_; }
  // Frees the numbers and puts the limit back (also done at the end).
  void Release() {
    for (int fd : hogs_) ::close(fd);
    hogs_.clear();
    setrlimit(RLIMIT_NOFILE, &old_);
  }

 private:
  struct rlimit old_ {};
  std::vector<int> hogs_;
  bool full_ = false;
};

}  // namespace uepoll_test

#endif  // UEPOLL_TESTS_SUPPORT_FULL_TABLE_H_
