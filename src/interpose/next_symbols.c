/* next_symbols.c: the next definitions of the names this library defines
 * (libc's, as a rule), found by reading the loaded objects' symbol tables.
 *
 * dlsym(RTLD_NEXT, name) answers one name at a time, each under the
 * dynamic loader's lock and its error catching: some 850 instructions a
 * name, 57,000 for the 67 names of libc's table, paid by every process
 * started under the interposer, most of which never load the engine
 * (BENCHMARKS.md, "The interposer's start-up: one walk for libc's
 * table"). One walk over the loaded objects answers every name: for each
 * object after this library, in load order (dl_iterate_phdr, which holds
 * the loader's list lock), the names not yet found are looked up in its
 * GNU hash table with the rules glibc 2.36 and later apply to a name
 * asked of dlsym(RTLD_NEXT) without a version:
 *  - a defined function (value not null), of global or weak binding and
 *    default or protected visibility;
 *  - a symbol without a version, or of the base version, is taken at
 *    once; else the one version that is not hidden, if the object has
 *    exactly one (a library's default version of the name);
 *  - the first object that has one answers.
 *
 * Load order is dlsym's search order for the objects loaded with the
 * program, preloaded or needed, which is where this library belongs. So
 * the walk is trusted only where libc comes after this library in it (a
 * library opened later by dlopen comes after libc, and dlsym searches its
 * own dependencies in their order instead), and only on glibc 2.36 or
 * later (before, dlsym(RTLD_NEXT) took a name's oldest version) without
 * LD_DYNAMIC_WEAK (which makes dlsym look past a weak definition).
 * Elsewhere every name goes to dlsym, and so does:
 *  - a name found nowhere, or found as an indirect function (its resolver
 *    would run), a unique, thread-local or absolute symbol;
 *  - every name, if an object after this library has no GNU hash table or
 *    a dynamic section the walk cannot place in its segments;
 *  - every name, if dlsym disagrees with the walk on one name of any
 *    object that answered (one after libc, opened later with dlopen and
 *    outside dlsym's scope, defining a name libc lacks).
 *
 * An auditor (LD_AUDIT, DT_AUDIT, DT_DEPAUDIT) may redirect what dlsym
 * answers (la_symbind): with one, every name goes to dlsym too.
 *
 * Neither this nor dlsym is async-signal-safe. The interposer resolves in
 * its constructor (interpose.c, interpose_numbers.c), before any fork it
 * sees: a fork child must not walk, since glibc does not reset the list
 * lock that dl_iterate_phdr holds, and another thread of its parent (an
 * exception's unwinder) may have held it at the fork. A child of a fork
 * made before the constructor (by another library's constructor) asks
 * dlsym only (engine.c, uepoll_interpose_fork_child). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <elf.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "base/env.h"
#include "interpose/interpose.h"

/* A symbol's type and binding, in this process's ELF class. */
#if __ELF_NATIVE_CLASS == 64
#define SYM_TYPE ELF64_ST_TYPE
#define SYM_BIND ELF64_ST_BIND
#define SYM_VISIBILITY ELF64_ST_VISIBILITY
#else
#define SYM_TYPE ELF32_ST_TYPE
#define SYM_BIND ELF32_ST_BIND
#define SYM_VISIBILITY ELF32_ST_VISIBILITY
#endif

/* Room for the longest list a caller passes (interpose.c's 68 names);
 * a longer one goes to dlsym whole. */
enum { kMaxNames = 128 };

/* What the walk settled for a name. */
enum { kOpen = 0, kFound, kAskDlsym };

struct Walk {
  const char *const *names;
  void **out;
  size_t n;
  size_t open; /* names still kOpen */
  uint32_t hash[kMaxNames];
  unsigned char state[kMaxNames];
  /* Which object answered each name: the index of that object in the
   * walk, for the check against dlsym. */
  unsigned short from[kMaxNames];
  unsigned short objects; /* objects visited after this library */
  uintptr_t self;         /* an address in this library */
  uintptr_t libc;         /* an address in libc */
  int past_self;
  int libc_after_self;
  int give_up; /* every name to dlsym */
};

/* One loaded object's dynamic symbol table. */
struct Object {
  uintptr_t base;
  const uint32_t *gnu_hash;
  const ElfW(Sym) * symtab;
  const char *strtab;
  const ElfW(Half) * versym;
};

/* GNU hash of a name (the ELF GNU hash: h * 33 + c from 5381). */
static uint32_t GnuHash(const char *name) {
  uint32_t h = 5381;
  for (const unsigned char *c = (const unsigned char *)name; *c; ++c) {
    h = h * 33 + *c;
  }
  return h;
}

/* Whether addr falls in one of the object's segments, placed at bias:
 * its load address, or 0 for the addresses its own headers hold. */
static int InSegment(const struct dl_phdr_info *info, uintptr_t addr,
                     uintptr_t bias) {
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && addr - (bias + ph->p_vaddr) < ph->p_memsz) {
      return 1;
    }
  }
  return 0;
}

static int Contains(const struct dl_phdr_info *info, uintptr_t addr) {
  return InSegment(info, addr, info->dlpi_addr);
}

/* A pointer in the dynamic section, placed by the segment it falls in:
 * glibc adds the load address in place where the section is writable,
 * and leaves it where it is read-only (the vDSO's). 0 if it falls in
 * neither form. */
static uintptr_t DynPointer(const struct dl_phdr_info *info, ElfW(Addr) v) {
  if (Contains(info, v)) return v;
  if (InSegment(info, v, 0)) return info->dlpi_addr + v;
  return 0;
}

/* The object's dynamic section, or null. */
static const ElfW(Dyn) * DynamicOf(const struct dl_phdr_info *info) {
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
      return (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    }
  }
  return NULL;
}

/* Whether the object names an auditor (DT_AUDIT, DT_DEPAUDIT). */
static int NamesAuditor(const struct dl_phdr_info *info) {
  for (const ElfW(Dyn) *dyn = DynamicOf(info); dyn && dyn->d_tag != DT_NULL;
       ++dyn) {
    if (dyn->d_tag == DT_AUDIT || dyn->d_tag == DT_DEPAUDIT) return 1;
  }
  return 0;
}

/* 1 if the object's table was read; 0 if it has no GNU hash table. */
static int ReadObject(const struct dl_phdr_info *info, struct Object *o) {
  const ElfW(Dyn) *dyn = DynamicOf(info);
  memset(o, 0, sizeof *o);
  o->base = info->dlpi_addr;
  if (dyn == NULL) return 0;
  for (; dyn->d_tag != DT_NULL; ++dyn) {
    if (dyn->d_tag != DT_GNU_HASH && dyn->d_tag != DT_SYMTAB &&
        dyn->d_tag != DT_STRTAB && dyn->d_tag != DT_VERSYM) {
      continue;
    }
    uintptr_t p = DynPointer(info, dyn->d_un.d_ptr);
    if (p == 0) return 0;
    switch (dyn->d_tag) {
      case DT_GNU_HASH:
        o->gnu_hash = (const uint32_t *)p;
        break;
      case DT_SYMTAB:
        o->symtab = (const ElfW(Sym) *)p;
        break;
      case DT_STRTAB:
        o->strtab = (const char *)p;
        break;
      case DT_VERSYM:
        o->versym = (const ElfW(Half) *)p;
        break;
      default:
        break;
    }
  }
  return o->gnu_hash != NULL && o->symtab != NULL && o->strtab != NULL;
}

/* Whether dlsym would consider the symbol at all (its check_match): a
 * known type, and a value unless thread-local or absolute. */
static int Considered(const ElfW(Sym) * s) {
  unsigned type = SYM_TYPE(s->st_info);
  unsigned allowed = 1u << STT_NOTYPE | 1u << STT_OBJECT | 1u << STT_FUNC |
                     1u << STT_COMMON | 1u << STT_TLS | 1u << STT_GNU_IFUNC;
  if (type >= 32 || !(allowed & (1u << type))) return 0;
  return s->st_value != 0 || s->st_shndx == SHN_ABS || type == STT_TLS;
}

/* The symbol dlsym would take from this object for an unversioned name,
 * or null if it takes none. */
static const ElfW(Sym) *
    FindIn(const struct Object *o, const char *name, uint32_t h) {
  enum { kBits = sizeof(ElfW(Addr)) * 8 };
  const uint32_t nbuckets = o->gnu_hash[0];
  const uint32_t symoffset = o->gnu_hash[1];
  const uint32_t bloom_size = o->gnu_hash[2];
  const uint32_t bloom_shift = o->gnu_hash[3];
  if (nbuckets == 0 || bloom_size == 0) return NULL;
  const ElfW(Addr) *bloom = (const ElfW(Addr) *)(o->gnu_hash + 4);
  const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
  const uint32_t *chain = buckets + nbuckets;
  ElfW(Addr) word = bloom[(h / kBits) & (bloom_size - 1)];
  ElfW(Addr) mask = (ElfW(Addr))1 << (h % kBits) |
                    (ElfW(Addr))1 << ((h >> bloom_shift) % kBits);
  if ((word & mask) != mask) return NULL;
  uint32_t i = buckets[h % nbuckets];
  if (i == 0 || i < symoffset) return NULL;
  const ElfW(Sym) *versioned = NULL;
  int versions = 0;
  for (;; ++i) {
    uint32_t h2 = chain[i - symoffset];
    const ElfW(Sym) *s = &o->symtab[i];
    if ((h | 1) == (h2 | 1) && Considered(s) &&
        strcmp(o->strtab + s->st_name, name) == 0) {
      if (o->versym == NULL || (o->versym[i] & 0x7fff) < 2) return s;
      if (!(o->versym[i] & 0x8000) && versions++ == 0) versioned = s;
    }
    if (h2 & 1) break;
  }
  return versions == 1 ? versioned : NULL;
}

static int Visit(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  struct Walk *w = data;
  if (NamesAuditor(info)) {
    w->give_up = 1;
    return 1;
  }
  if (!w->past_self) {
    w->past_self = Contains(info, w->self);
    return 0;
  }
  if (Contains(info, w->libc)) w->libc_after_self = 1;
  struct Object o;
  if (!ReadObject(info, &o)) {
    w->give_up = 1;
    return 1;
  }
  unsigned short index = w->objects++;
  for (size_t i = 0; i < w->n; ++i) {
    if (w->state[i] != kOpen) continue;
    const ElfW(Sym) *s = FindIn(&o, w->names[i], w->hash[i]);
    if (s == NULL) continue;
    unsigned bind = SYM_BIND(s->st_info);
    if (bind != STB_GLOBAL && bind != STB_WEAK) {
      if (bind == STB_GNU_UNIQUE) w->state[i] = kAskDlsym, --w->open;
      continue; /* a local symbol: dlsym looks further */
    }
    unsigned visibility = SYM_VISIBILITY(s->st_other);
    if (visibility == STV_HIDDEN || visibility == STV_INTERNAL) continue;
    --w->open;
    if (SYM_TYPE(s->st_info) != STT_FUNC || s->st_shndx == SHN_ABS) {
      w->state[i] = kAskDlsym;
      continue;
    }
    w->state[i] = kFound;
    w->from[i] = index;
    w->out[i] = (void *)(o.base + s->st_value);
  }
  return w->open == 0;
}

/* dlsym's answer; errno is the caller's to keep. */
static void *Dlsym(const char *name) { return dlsym(RTLD_NEXT, name); }

/* A decimal number at *s, which is moved past it. By hand: this may run
 * inside a sanitizer's start-up (its calls to libc's names reach the
 * interposer), where its strtol refuses to be called. */
static long Number(const char **s) {
  long n = 0;
  while (**s >= '0' && **s <= '9') n = n * 10 + (*(*s)++ - '0');
  return n;
}

/* glibc 2.36 or later, whose dlsym(RTLD_NEXT) takes a name's default
 * version, as the walk does; no LD_DYNAMIC_WEAK and no auditor named in
 * the environment. Where the environment cannot be read (before libc has
 * set environ up, a sanitizer's start-up from the executable's preinit
 * array, without /proc: base/env.h), no walk. */
static int WalkAgreesWithThisLibc(void) {
  const char *v = gnu_get_libc_version();
  long major = Number(&v);
  long minor = *v == '.' ? (++v, Number(&v)) : 0;
  char value[1]; /* only whether each is set matters */
  return (major > 2 || (major == 2 && minor >= 36)) &&
         uepoll_env_get("LD_DYNAMIC_WEAK", value, sizeof value) == 0 &&
         uepoll_env_get("LD_AUDIT", value, sizeof value) == 0;
}

atomic_int uepoll_interpose_g_walk_unsafe;

EXPORT void uepoll_interpose_next_symbols(const char *const *names, void **out,
                                          size_t n) {
  struct Walk w;
  memset(&w, 0, sizeof w);
  for (size_t i = 0; i < n; ++i) out[i] = NULL;
  if (n <= kMaxNames &&
      !atomic_load_explicit(&uepoll_interpose_g_walk_unsafe,
                            memory_order_relaxed) &&
      WalkAgreesWithThisLibc()) {
    w.names = names;
    w.out = out;
    w.n = w.open = n;
    w.self = (uintptr_t)&uepoll_interpose_next_symbols;
    w.libc = (uintptr_t)&gnu_get_libc_version;
    for (size_t i = 0; i < n; ++i) w.hash[i] = GnuHash(names[i]);
    dl_iterate_phdr(Visit, &w);
    if (!w.libc_after_self) w.give_up = 1;
    /* For each object that answered, dlsym must agree on its first name. */
    for (unsigned short obj = 0; !w.give_up && obj < w.objects; ++obj) {
      for (size_t i = 0; i < n; ++i) {
        if (w.state[i] == kFound && w.from[i] == obj) {
          if (Dlsym(names[i]) != out[i]) w.give_up = 1;
          break;
        }
      }
    }
  } else {
    w.give_up = 1;
  }
  for (size_t i = 0; i < n; ++i) {
    if (w.give_up || !w.past_self || w.state[i] != kFound) {
      out[i] = Dlsym(names[i]);
    }
  }
}
