/* For the libraries around the interposer (next_shim.c, next_weak.c): a
 * definition of an int (int) call that passes it on to the next one in
 * dlsym(RTLD_NEXT)'s order, libc's in the end. */
#ifndef UEPOLL_TESTS_INTERPOSE_NEXT_PASS_H_
#define UEPOLL_TESTS_INTERPOSE_NEXT_PASS_H_

#include <dlfcn.h>
#include <string.h>

#define NEXT_PASS_INT_INT(Fn, name)   \
  static int Fn(int fd) {             \
    int (*f)(int);                    \
    void *p = dlsym(RTLD_NEXT, name); \
    memcpy(&f, &p, sizeof p);         \
    return f(fd);                     \
  }

#endif /* UEPOLL_TESTS_INTERPOSE_NEXT_PASS_H_ */
