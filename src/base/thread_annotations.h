// Clang thread-safety annotations (-Wthread-safety). They document which lock
// guards which field and which functions need a lock held; clang checks them,
// other compilers ignore them.
#ifndef UEPOLL_SRC_BASE_THREAD_ANNOTATIONS_H_
#define UEPOLL_SRC_BASE_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define UEPOLL_TSA(x) __attribute__((x))
#else
#define UEPOLL_TSA(x)
#endif

#define CAPABILITY(x) UEPOLL_TSA(capability(x))
#define SCOPED_CAPABILITY UEPOLL_TSA(scoped_lockable)
#define GUARDED_BY(x) UEPOLL_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) UEPOLL_TSA(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) UEPOLL_TSA(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) UEPOLL_TSA(acquired_after(__VA_ARGS__))
// On an accessor returning a reference to a lock: callers that lock the
// result are known to hold x.
#define RETURN_CAPABILITY(x) UEPOLL_TSA(lock_returned(x))
#define REQUIRES(...) UEPOLL_TSA(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) UEPOLL_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) UEPOLL_TSA(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) UEPOLL_TSA(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) UEPOLL_TSA(locks_excluded(__VA_ARGS__))
// Turns the analysis off for one function the analysis cannot follow; every
// use carries a one-line comment saying why. Constructors and destructors
// need none: clang (14) does not analyse them at all.
#define NO_THREAD_SAFETY_ANALYSIS UEPOLL_TSA(no_thread_safety_analysis)

#endif  // UEPOLL_SRC_BASE_THREAD_ANNOTATIONS_H_
