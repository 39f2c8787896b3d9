/* elf_hide FILE NAME: gives the symbol NAME in FILE's dynamic symbol table
 * hidden visibility, in place. A linker keeps hidden symbols out of that
 * table; the loader skips one that is there anyway, and so must the
 * interposer's walk (next_weak.c). The build runs this on next_weak.so.
 * Exit 0 when patched, 1 with a message otherwise (not an ELF file of
 * this machine's class, no dynamic symbol table, no such symbol). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if __ELF_NATIVE_CLASS == 64
#define CLASS ELFCLASS64
#define SET_VISIBILITY(o, v) (((o) & ~3) | ELF64_ST_VISIBILITY(v))
#else
#define CLASS ELFCLASS32
#define SET_VISIBILITY(o, v) (((o) & ~3) | ELF32_ST_VISIBILITY(v))
#endif

static int Fail(const char *file, const char *why) {
  fprintf(stderr, "elf_hide: %s: %s\n", file, why);
  return 1;
}

/* Whether [off, off + len) lies inside a file of `size` bytes. */
static int Inside(size_t size, ElfW(Off) off, ElfW(Xword) len) {
  return off <= size && len <= size - off;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s FILE NAME\n", argv[0]);
    return 2;
  }
  const char *file = argv[1], *name = argv[2];
  int fd = open(file, O_RDWR | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return Fail(file, strerror(errno));
  size_t size = (size_t)st.st_size;
  if (size < sizeof(ElfW(Ehdr))) return Fail(file, "too short for ELF");
  unsigned char *m =
      mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return Fail(file, strerror(errno));
  const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)m;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != CLASS || eh->e_shentsize != sizeof(ElfW(Shdr)) ||
      !Inside(size, eh->e_shoff, (ElfW(Xword))eh->e_shnum * sizeof(ElfW(Shdr))))
    return Fail(file, "not an ELF file of this machine's class");
  const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(m + eh->e_shoff);
  for (unsigned i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum) continue;
    const ElfW(Shdr) *strtab = &sh[sh[i].sh_link];
    if (!Inside(size, sh[i].sh_offset, sh[i].sh_size) ||
        !Inside(size, strtab->sh_offset, strtab->sh_size))
      return Fail(file, "a section outside the file");
    ElfW(Sym) *sym = (ElfW(Sym) *)(m + sh[i].sh_offset);
    size_t n = sh[i].sh_size / sizeof *sym;
    const char *str = (const char *)(m + strtab->sh_offset);
    for (size_t k = 0; k < n; ++k) {
      if (sym[k].st_name >= strtab->sh_size) continue;
      const char *s = str + sym[k].st_name;
      if (strnlen(s, strtab->sh_size - sym[k].st_name) ==
              strtab->sh_size - sym[k].st_name ||
          strcmp(s, name) != 0 || sym[k].st_shndx == SHN_UNDEF)
        continue;
      sym[k].st_other = SET_VISIBILITY(sym[k].st_other, STV_HIDDEN);
      if (msync(m, size, MS_SYNC) != 0) return Fail(file, strerror(errno));
      munmap(m, size);
      return 0;
    }
  }
  return Fail(file, "no such symbol defined in its dynamic symbol table");
}
