/* next_audit.so: an auditor (LD_AUDIT) that binds dup to its own
 * function, in dlsym's answers too (la_symbind): the interposer's table
 * must hold what dlsym answers (interpose.next.audit). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <link.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static int AuditDup(int fd) { return (int)syscall(SYS_dup, fd); }

EXPORT unsigned int la_version(unsigned int version) {
  return version < LAV_CURRENT ? version : LAV_CURRENT;
}

EXPORT unsigned int la_objopen(struct link_map *map, Lmid_t lmid,
                               uintptr_t *cookie) {
  (void)map, (void)lmid, (void)cookie;
  return LA_FLG_BINDTO | LA_FLG_BINDFROM;
}

EXPORT uintptr_t la_symbind64(Elf64_Sym *sym, unsigned int ndx,
                              uintptr_t *refcook, uintptr_t *defcook,
                              unsigned int *flags, const char *symname) {
  (void)ndx, (void)refcook, (void)defcook, (void)flags;
  if (strcmp(symname, "dup") == 0) return (uintptr_t)AuditDup;
  return sym->st_value;
}
