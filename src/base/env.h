/* env: the process's environment variables, also before libc has set
 * environ up.
 *
 * The dynamic loader runs the functions of an executable's .preinit_array
 * (a sanitizer's start-up among them) before any library's initializer,
 * libc's included, and libc sets environ in its own. A call made then
 * reaches uepoll like any other (the interposer's names, the engine that
 * the first object loads), and a setting read once with getenv, which
 * finds nothing yet, would be lost for the whole process: UEPOLL_INTERPOSE,
 * UEPOLL_FORK_MODE, UEPOLL_FD_MODE, and the LD_* variables the
 * interposer's walk checks (interpose/next_symbols.c). So while libc's
 * start-up has not run (environ null, and libc's program name still its
 * empty initial value), the value comes from the initial environment,
 * which the kernel keeps readable at /proc/self/environ. A process that
 * has cleared its environment since (clearenv sets environ to null) has
 * no variables, as getenv says.
 *
 * C, and compiled into both libraries (the engine and the interposer),
 * each its own hidden copy: the interposer calls it inside its libc
 * table's resolution, before it could call libc through that table, so
 * it makes its system calls itself. */
#ifndef UEPOLL_SRC_BASE_ENV_H_
#define UEPOLL_SRC_BASE_ENV_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 with name's value in buf (NUL-terminated); 0 when name is not set;
 * -2 when it is set to a value of len bytes or more (buf unspecified);
 * -1 when this cannot tell: libc's start-up has not run and
 * /proc/self/environ cannot be read (no /proc mounted, an architecture
 * without the raw calls), so the answer may differ once it has run.
 * errno is left as it was. */
__attribute__((visibility("hidden"))) int uepoll_env_get(const char *name,
                                                         char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* UEPOLL_SRC_BASE_ENV_H_ */
