// How the single-thread fuzzer makes descriptor numbers comparable between
// the kernel and uepoll. Everything that knows how either side numbers its
// descriptors lives here (and in numbering.cc), so that a change of uepoll's
// numbering is handled in one place. Two schemes, one per uepoll numbering
// mode (a process picks one: uepoll fixes its mode at the first descriptor):
//
// Disjoint (uepoll's UEPOLL_FD_MODE_DISJOINT): before a sequence, every free
// kernel number below a base K0 is filled with /dev/null and RLIMIT_NOFILE
// is lowered to K0 + limit, while uepoll's own limit becomes limit (the span
// unless an op lowered it). Both sides allocate lowest-free first, so the
// n-th creation gets K0 + off on the kernel and UEPOLL_FD_BASE + off on
// uepoll: results are compared as offsets, and EMFILE, dup2 past the limit
// and reuse of closed numbers happen at the same op on both sides.
//
// Kernel (the default numbering, where uepoll's numbers come from the
// kernel's table, and where kernel descriptors can sit in uepoll
// instances): the two sides share one table, so each gets a region of it:
//
//   [0, U0)            filled (/dev/null; uepoll's own long-lived
//                      descriptors made before the sequence, the scratch
//                      objects of the state check)
//   [U0, U0 + span)    the uepoll side's numbers
//   [U0 + span, K0)    empty: the uepoll side's numbers "beyond the limit"
//   [K0, K0 + span)    the kernel side's numbers
//   [K0 + span, ...)   empty: the kernel side's numbers beyond the limit
//
// RLIMIT_NOFILE is U0 + limit while a uepoll-side call runs and K0 + limit
// while a kernel-side one does (Enter). A uepoll-side allocation then finds
// the lowest free number of its own region (everything below is full, the
// kernel region is beyond the limit); a kernel-side allocation would find
// a hole of the uepoll region first, so before a kernel-side call that may
// allocate, every free number of [U0, K0) is filled for the call's duration.
// U0 >= 64: a poll() of the whole span stays below the limit on both sides.
//
// The multi-thread mode (mt.h) names objects by index and compares no
// numbers, so it does not use this class.
#ifndef UEPOLL_TESTS_DIFFFUZZ_NUMBERING_H_
#define UEPOLL_TESTS_DIFFFUZZ_NUMBERING_H_

#include <string>
#include <vector>

namespace difffuzz {

enum class NumberingMode { kDisjoint, kKernel };

class Numbering {
 public:
  // span: offsets [0, span) are usable on both sides.
  Numbering(int span, NumberingMode mode) : span_(span), mode_(mode) {}
  ~Numbering() { Restore(); }
  Numbering(const Numbering&) = delete;
  Numbering& operator=(const Numbering&) = delete;

  NumberingMode mode() const { return mode_; }

  // Lines the two sides up; false (and *error) if that failed.
  bool Setup(std::string* error);
  // Puts the limits back and closes the fillers (idempotent).
  void Restore();

  // The descriptor number of offset `off` on one side (off may be past the
  // span: a number beyond the limit).
  int Fd(bool kernel, long off) const;
  // The offset of a descriptor number returned by one side.
  long Offset(bool kernel, long fd) const;

  // Both sides' descriptor limit, as an offset: numbers [0, limit) may be
  // allocated (1 <= limit <= span).
  void SetLimit(int limit);
  int limit() const { return limit_; }

  // Around each call of one side: Enter before it (may_allocate: the call
  // can take a new number), Leave after. No-ops in the disjoint scheme.
  void Enter(bool kernel, bool may_allocate);
  void Leave();

  // Kernel scheme: whether the uepoll side's region is full up to the
  // limit, so that a kernel descriptor uepoll needs for itself cannot be
  // had (false in the disjoint scheme).
  bool UepollSideFull();

 private:
  void SetRlimit(long cur);

  const int span_;
  const NumberingMode mode_;
  int k0_ = -1;
  int u0_ = -1;  // kKernel only
  int limit_ = 0;
  long rlimit_now_ = -1;
  long old_kernel_limit_ = -1;
  long old_uepoll_limit_ = -1;
  int devnull_ = -1;
  std::vector<int> fillers_;
  std::vector<int> temp_fillers_;  // Enter's, closed by Leave
};

}  // namespace difffuzz

#endif  // UEPOLL_TESTS_DIFFFUZZ_NUMBERING_H_
