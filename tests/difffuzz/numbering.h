// How the single-thread fuzzer makes descriptor numbers comparable between
// the kernel and uepoll. Everything that knows how either side numbers its
// descriptors lives here (and in numbering.cc), so that a change of uepoll's
// numbering (numbers from the kernel's table, or the disjoint range from
// UEPOLL_FD_BASE) is handled in one place.
//
// Today's scheme: before a sequence, every free kernel number below a base
// K0 is filled with /dev/null and RLIMIT_NOFILE is lowered to K0 + kFdSpan,
// while uepoll's own limit becomes kFdSpan. Both sides allocate lowest-free
// first, so the n-th creation gets K0 + off on the kernel and
// UEPOLL_FD_BASE + off on uepoll: results are compared as offsets, and
// EMFILE, dup2 past the limit and reuse of closed numbers happen at the same
// op on both sides.
//
// If uepoll's numbers come from the kernel's table, the two sides cannot
// both start at K0 in one process while they run side by side; the options
// are running uepoll in its disjoint mode (as today), or giving each side
// its own base. Either is a change to this class alone.
//
// The multi-thread mode (mt.h) names objects by index and compares no
// numbers, so it does not use this class.
#ifndef UEPOLL_TESTS_DIFFFUZZ_NUMBERING_H_
#define UEPOLL_TESTS_DIFFFUZZ_NUMBERING_H_

#include <string>
#include <vector>

namespace difffuzz {

class Numbering {
 public:
  // span: offsets [0, span) are usable on both sides.
  explicit Numbering(int span) : span_(span) {}
  ~Numbering() { Restore(); }
  Numbering(const Numbering&) = delete;
  Numbering& operator=(const Numbering&) = delete;

  // Lines the two sides up; false (and *error) if that failed.
  bool Setup(std::string* error);
  // Puts the limits back and closes the fillers (idempotent).
  void Restore();

  // The descriptor number of offset `off` on one side (off may be past the
  // span: a number beyond the limit).
  int Fd(bool kernel, long off) const;
  // The offset of a descriptor number returned by one side.
  long Offset(bool kernel, long fd) const;

 private:
  const int span_;
  int k0_ = -1;
  long old_kernel_limit_ = -1;
  long old_uepoll_limit_ = -1;
  std::vector<int> fillers_;
};

}  // namespace difffuzz

#endif  // UEPOLL_TESTS_DIFFFUZZ_NUMBERING_H_
