#!/usr/bin/env python3
"""The drift check: every repository path, test name and deviation row that
the docs and the comments cite must exist.

    tools/check-refs.py            check the tree (exit 1 on a stale citation)
    tools/check-refs.py --list     also print every citation it checked

What is read: README.md, BENCHMARKS.md, docs/, man/, bench/*.md and every
other *.md file whole; the comments only (// and /* */, or # in scripts,
CMake files and the header lines of tools/mutants patches) of src/,
include/, tests/, tools/, examples/, bench/, cmake/, .ci/run and the top
CMakeLists.txt. The files are those git tracks or would
track (ignored ones, such as build trees, are not read; outside a git
checkout, every file but build/ and hidden ones).

What counts as a citation (the grammar the tree uses; anything else is
prose and is not checked):

  Paths. A word of path characters that
    * starts with a top-level directory of the repository (src/, include/
      uepoll/, tests/, tools/, docs/, man/, bench/, examples/, cmake/,
      .ci/) or is a top-level file (README.md, CMakePresets.json, ...):
      it must exist from the root;
    * starts with a directory of src/, tests/ or include/ (epoll/item.h,
      support/backend.h, uepoll/rename.h) and ends in a file name with an
      extension: it must exist under one of them;
    * is a bare file name ending in .cc, .hpp, .md, .sh, .py, .patch or a
      section-3 page (.3), or a bare .h name that no #include <...> of the
      tree names (so <errno.h>, <ev.h> are libc's or a library's, not ours):
      a file of that name must exist somewhere in the tree. Bare .c names
      are not checked: the kernel's fs/eventpoll.c and friends are cited so.
    Markdown links resolve from the file that holds them. `*` globs and
    {a,b} alternatives expand (each alternative must exist); <word> is a
    glob; a path whose last part has no extension may name a file's stem
    (tests/bench/syscall_budget_test names the .cc and the binary). Kernel
    source paths (include/linux/, tools/testing/, tools/perf/, kernel/futex/
    ...) and paths inside a longer path ($here/..., /usr/...) are not ours.

  Test names. Suite.Name where Suite is a GoogleTest suite (CamelCase) and
    Name a test of it, with * as a wildcard (Suite.*, Suite.Pwait*) that
    must match at least one test, optionally with GoogleTest's parametrized
    decorations: Instance/Suite.Name/param. A suite that no test defines is
    still a citation (and stale) when the name looks like a test name: two
    CamelCase humps (ReadsEverything), a `__` (args__bad_flags), two
    underscores (an_edge_after_x) or a bare *. Names are collected from
    TEST, TEST_F, TEST_P, TYPED_TEST and TYPED_TEST_P in tests/.
    CTest names: family.rest where family is one of the add_test families
    (interpose, difffuzz, consumer, cxx, headers, examples), with * or
    <word> as wildcards; it must be able to match a name an add_test(NAME
    ...) in tests/ or examples/ can produce (${var} in it matching anything).

  Deviation rows. Dn (and the ends of Dn-Dm) must be a row of
    docs/semantics.md, or a number it says is unused (in a paragraph that
    says "unused": only that paragraph may name it).

  One list: include/uepoll/rename.h's comment lists the calls it renames;
    the list must be exactly the header's lower-case macros.

Each stale citation prints as FILE:LINE: what is wrong. The check reads
each file once and runs in well under a second.
"""

import fnmatch
import os
import re
import subprocess
import sys
from functools import lru_cache

ROOT = os.environ.get("CHECK_REFS_ROOT") or \
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Files read whole / for their comments only.
DOC_PREFIXES = ("docs/", "man/")
DOC_FILES = ("README.md", "BENCHMARKS.md")
COMMENT_PREFIXES = ("src/", "include/", "tests/", "tools/", "examples/",
                    "bench/", "cmake/")
COMMENT_FILES = (".ci/run", "CMakeLists.txt")
# The check's own test: its scratch tree cites stale things on purpose.
EXCLUDED = ("tools/check-refs-test.py",)

TOP_DIRS = ("src", "include", "tests", "tools", "docs", "man", "bench",
            "examples", "cmake", ".ci")
# The Linux source tree's paths that share a first component with ours.
FOREIGN_PREFIXES = ("include/linux/", "include/uapi/", "include/net/",
                    "include/asm", "tools/testing/", "tools/perf/",
                    "tools/include/", "kernel/futex/", "kernel/time/",
                    "kernel/sched/")
CHECKED_BARE_EXT = (".cc", ".hpp", ".md", ".sh", ".py", ".patch", ".3")
SOURCE_EXT = (".h", ".cc", ".c", ".hpp", ".cpp")
SCRIPT_EXT = (".sh", ".py", ".txt", ".cmake", ".in")
STD_HEADERS = ("errno.h", "unistd.h", "fcntl.h", "signal.h", "poll.h",
               "pthread.h", "stdlib.h", "stdio.h", "string.h", "time.h",
               "limits.h", "stdint.h", "stddef.h", "stdarg.h", "sched.h",
               "dlfcn.h", "dirent.h", "assert.h", "stdbool.h", "setjmp.h")
CTEST_FAMILIES = ("interpose", "difffuzz", "consumer", "cxx", "headers",
                  "examples")
FILE_EXTS = {"h", "c", "cc", "hpp", "cpp", "md", "sh", "py", "txt", "json",
             "map", "patch", "so", "a", "in", "cmake", "3", "deb", "svg",
             "log", "pc"}


def git_files():
    """The files git tracks or would track (new files not yet added count,
    ignored ones do not, deleted ones are gone); outside a git checkout (a
    release tarball, or no git installed), every file except build trees
    and hidden ones."""
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached",
                              "--others", "--exclude-standard"],
                             capture_output=True, check=True).stdout
        return [f for f in sorted(set(out.decode().split("\0")))
                if f and os.path.isfile(os.path.join(ROOT, f))]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, subdirs, names in os.walk(ROOT):
            subdirs[:] = [s for s in subdirs if not s.startswith(
                (".git", "build")) or s == ".ci"]
            rel = os.path.relpath(d, ROOT)
            files += [n if rel == "." else rel + "/" + n for n in names]
        return files


# ---------------------------------------------------------------- comments

def c_comments(text):
    """Yields (offset, comment text) for // and /* */ comments, skipping
    string and character literals (raw strings are not used in the tree's
    comments' neighbourhood well enough to matter: R"( is treated as a
    string)."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            # A block of // lines is one comment (a name may wrap).
            m = LINE_COMMENTS.match(text, i)
            j = m.end()
            yield i, text[i:j]
            i = j
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            yield i, text[i:j]
            i = j
        elif c == '"' or c == "'":
            if c == "'" and i > 0 and (text[i - 1].isalnum()):
                i += 1  # a digit separator (1'000) or an identifier's quote
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1


LINE_COMMENTS = re.compile(r"//[^\n]*(?:\n[ \t]*//[^\n]*)*")
HASH_COMMENT = re.compile(r"(?:^|(?<=\s))#(?![{!])[^\n]*", re.M)


def hash_comments(text, path):
    if path.endswith(".patch"):
        # Only the header lines above the diff are the author's words.
        end = re.search(r"^(diff |--- )", text, re.M)
        text = text[:end.start()] if end else text
    for m in HASH_COMMENT.finditer(text):
        if m.start() == 0 and text.startswith("#!"):
            continue
        yield m.start(), m.group(0)


def roff_clean(text):
    # Keep offsets stable: replace escapes by spaces of the same length.
    text = re.sub(r"\\f[BIRP]|\\f\(..|\\&", lambda m: " " * len(m.group(0)),
                  text)
    return text.replace("\\-", " -")


def regions(path, text):
    """Yields (offset, text) of the parts of the file that are checked."""
    base = os.path.basename(path)
    if path.endswith(".md") or path.startswith(DOC_PREFIXES) or \
            path in DOC_FILES:
        yield 0, roff_clean(text) if path.startswith("man/") else text
    elif path.endswith(SOURCE_EXT):
        yield from c_comments(text)
    elif path.endswith(SCRIPT_EXT + (".patch",)) or base == "CMakeLists.txt" \
            or path in COMMENT_FILES or text.startswith("#!"):
        yield from hash_comments(text, path)


# ---------------------------------------------------------------- the tree

class Tree:
    def __init__(self, files):
        self.files = set(files)
        self.dirs = set()
        self.basenames = set()
        for f in files:
            self.basenames.add(os.path.basename(f))
            d = os.path.dirname(f)
            while d:
                self.dirs.add(d)
                d = os.path.dirname(d)
        self.all = sorted(self.files | self.dirs)
        # First-level directories of src/, tests/, include/: roots that
        # comments cite paths from (epoll/item.h, support/backend.h).
        self.sub_roots = {}
        for d in self.dirs:
            parts = d.split("/")
            if len(parts) == 2 and parts[0] in ("src", "tests", "include"):
                self.sub_roots.setdefault(parts[1], []).append(parts[0])

    def exists(self, p):
        p = p.rstrip("/")
        return p in self.files or p in self.dirs

    def glob(self, pattern):
        pattern = pattern.rstrip("/")
        return [f for f in self.all if fnmatch.fnmatchcase(f, pattern)
                and f.count("/") == pattern.count("/")]


def expand_braces(p):
    m = re.search(r"\{([^{}]*)\}", p)
    if not m:
        return [p]
    out = []
    for alt in m.group(1).split(","):
        out += expand_braces(p[:m.start()] + alt + p[m.end():])
    return out


# ---------------------------------------------------------------- tests

TEST_DEF = re.compile(
    r"\b(?:TEST|TEST_F|TEST_P|TYPED_TEST|TYPED_TEST_P)\s*\(\s*(\w+)\s*,"
    r"\s*(\w+)\s*\)")
INSTANTIATE = re.compile(
    r"\bINSTANTIATE_(?:TEST_SUITE_P|TYPED_TEST_SUITE_P)\s*\(\s*(\w+)\s*,")
MACRO_DEF = re.compile(
    r"^#\s*define\s+(\w+)\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)", re.M)
ADD_TEST = re.compile(r"\badd_test\s*\(\s*NAME\s+(\S+)")


def glob_intersects(a, b):
    """Whether some string matches both globs (only * is special)."""
    @lru_cache(maxsize=None)
    def go(i, j):
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i] == "*":
            if go(i + 1, j) or (j < len(b) and go(i, j + 1)):
                return True
        if j < len(b) and b[j] == "*":
            if go(i, j + 1) or (i < len(a) and go(i + 1, j)):
                return True
        if i < len(a) and j < len(b) and a[i] != "*" and b[j] != "*" \
                and a[i] == b[j]:
            return go(i + 1, j + 1)
        return False
    return go(0, 0)


class Tests:
    def __init__(self, tree, texts):
        self.by_suite = {}
        self.instances = {"Backends"}  # UEPOLL_INSTANTIATE_BACKENDS
        self.ctest = []
        for f, text in texts.items():
            if f.startswith("tests/") and f.endswith(SOURCE_EXT):
                for m in TEST_DEF.finditer(text):
                    self.by_suite.setdefault(m.group(1), set()).add(
                        m.group(2))
                self.macro_tests(text)
                self.instances.update(INSTANTIATE.findall(text))
            if f.startswith(("tests/", "examples/")) and \
                    os.path.basename(f) == "CMakeLists.txt":
                for name in ADD_TEST.findall(text):
                    self.ctest.append(re.sub(r"\$\{[^}]*\}", "*", name))

    def macro_tests(self, text):
        """Tests a macro defines from its argument: #define CASE(Name, ...)
        TEST_P(Suite, Name), then CASE(Foo, ...) defines Suite.Foo."""
        for m in MACRO_DEF.finditer(text):
            macro, params, body = m.groups()
            params = [p.strip() for p in params.split(",")]
            for t in TEST_DEF.finditer(body):
                if t.group(2) not in params:
                    continue
                k = params.index(t.group(2))
                for call in re.finditer(r"^\s*" + macro + r"\s*\(([^)]*)",
                                        text, re.M):
                    args = [a.strip() for a in call.group(1).split(",")]
                    if len(args) > k and re.fullmatch(r"\w+", args[k]):
                        self.by_suite.setdefault(t.group(1), set()).add(
                            args[k])

    def check(self, suite, name):
        """None if Suite.name (a glob) names a test, else the complaint."""
        names = self.by_suite.get(suite)
        if names is None:
            return f"no test suite {suite} in tests/"
        if any(fnmatch.fnmatchcase(n, name) for n in names):
            return None
        if "*" in name:
            return f"{suite}.{name} matches no test of {suite}"
        return f"no test {suite}.{name} in tests/"

    def check_ctest(self, name):
        pat = re.sub(r"<[^>]*>", "*", name)
        if any(glob_intersects(pat, t) for t in self.ctest):
            return None
        return f"no CTest name can match {name} (add_test in tests/)"


# ---------------------------------------------------------------- scanning

PATH_WORD = re.compile(r"(?<![\w./$}{\-~@<*])(\.?[\w*{}<>][\w.\-/*{},<>]*)")
TEST_WORD = re.compile(
    r"(?<![\w./\-:])(?:(\w+)/)?([A-Z][A-Za-z0-9]*)\.([A-Za-z_*][\w*]*)"
    r"(?:/(\w+))?(?![\w(])")
CTEST_WORD = re.compile(
    r"(?<![\w./\-])(" + "|".join(CTEST_FAMILIES) +
    r")\.([\w*<>][\w.*<>\-]*)")
DEV_WORD = re.compile(r"(?<![\w\-])D(\d{1,3})(?:\s*[-\u2013]\s*D(\d{1,3}))?"
                      r"(?![\w])")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
MD_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


WRAP = re.compile(r'\n[ \t]*(?://|\*|#|\.\\")?[ \t]*(\w+)')


def looks_like_test(name):
    return (name == "*" or "__" in name or name.count("_") >= 2 or
            re.match(r"[A-Z][a-z0-9]+[A-Z]", name) is not None)


class Checker:
    def __init__(self):
        files = git_files()
        self.tree = Tree(files)
        self.texts = {}
        for f in files:
            try:
                with open(os.path.join(ROOT, f), encoding="utf-8") as fh:
                    self.texts[f] = fh.read()
            except (UnicodeDecodeError, IsADirectoryError,
                    FileNotFoundError):
                pass
        self.tests = Tests(self.tree, self.texts)
        # libc's and the libraries' headers: any <...> include, and the
        # standard ones a comment may name before any code includes them.
        self.external_headers = set(STD_HEADERS)
        for text in self.texts.values():
            for h in re.findall(r"#\s*include\s*<([^>]+)>", text):
                self.external_headers.add(os.path.basename(h))
        sem = self.texts.get("docs/semantics.md", "")
        self.rows = set(re.findall(r"^\|\s*D(\d+)\s*\|", sem, re.M))
        # Numbers semantics.md says are unused, in a paragraph that says so
        # (only that paragraph may name them).
        self.unused, self.unused_lines = set(), set()
        line = 0
        for para in re.split(r"(\n\s*\n)", sem):
            if "unused" in para and not para.lstrip().startswith("|"):
                found = set(re.findall(r"\bD(\d+)\b", para)) - self.rows
                if found:
                    self.unused |= found
                    for i in range(para.count("\n") + 1):
                        self.unused_lines.add(("docs/semantics.md", line + i))
            line += para.count("\n")
        self.problems = []
        self.cited = []

    def scope(self):
        for f in sorted(self.texts):
            if f in EXCLUDED:
                continue
            if f in DOC_FILES or f.startswith(DOC_PREFIXES) or \
                    f.endswith(".md") or f in COMMENT_FILES or \
                    f.startswith(COMMENT_PREFIXES):
                yield f

    def report(self, f, text, off, what):
        line = text.count("\n", 0, off) + 1
        self.problems.append(f"{f}:{line}: {what}")

    # -- paths
    def check_path(self, f, word, link=False, in_code=False):
        """None if fine or not a citation, else the complaint."""
        w = word.rstrip(".,;:)'\"`")
        w = re.sub(r"<[^>/]*>", "*", w)
        if not w or w.startswith(("http", "www.")):
            return None
        if w.startswith("./"):
            w = w[2:]
        if link:
            here = os.path.dirname(f)
            cand = os.path.normpath(os.path.join(here, w))
            return self.resolve([cand], word)
        if w.startswith(FOREIGN_PREFIXES):
            return None
        first = w.split("/", 1)[0]
        if "/" in w and first in TOP_DIRS:
            if first == "include" and not w.startswith("include/uepoll"):
                return None  # a kernel or system include/ path
            return self.resolve([w], word)
        last = w.rstrip("/").rsplit("/", 1)[-1]
        has_ext = "." in last and last.rsplit(".", 1)[1] in FILE_EXTS
        if "/" in w and first in self.tree.sub_roots and has_ext:
            cands = [r + "/" + w for r in self.tree.sub_roots[first]]
            return self.resolve(cands, word)
        if "/" not in w and has_ext and not in_code:
            if not re.match(r"[A-Za-z_][\w\-]*\.", w):
                return None  # 0.3, .patch: a number or an extension
            ext = "." + last.rsplit(".", 1)[1]
            if ext in CHECKED_BARE_EXT or (
                    ext == ".h" and w not in self.external_headers):
                self.cited.append(w)
                if "*" in w or "{" in w:
                    pats = expand_braces(w)
                    ok = all(any(fnmatch.fnmatchcase(b, p)
                                 for b in self.tree.basenames) for p in pats)
                else:
                    ok = w in self.tree.basenames
                return None if ok else f"no file named {w} in the tree"
        return None

    def resolve(self, cands, word):
        self.cited.append(word.rstrip(".,;:"))
        for c in cands:
            alts = expand_braces(c)
            if all(self.one_exists(a) for a in alts):
                return None
            # A placeholder in capitals: tools/mutants/NAME.patch.
            alts = [re.sub(r"(?<=[/_])[A-Z]{1,4}(?=\.|$)", "*", a)
                    for a in alts]
            if all(self.one_exists(a) for a in alts):
                return None
        if len(cands) == 1:
            return f"path {word.rstrip('.,;:')} does not exist"
        return (f"path {word.rstrip('.,;:')} does not exist (looked under "
                + ", ".join(c.split('/')[0] + "/" for c in cands) + ")")

    def one_exists(self, p):
        if "*" in p:
            return bool(self.tree.glob(p))
        if self.tree.exists(p):
            return True
        # A stem: tests/bench/syscall_budget_test (the .cc and the binary).
        last = p.rsplit("/", 1)[-1]
        return "." not in last and bool(self.tree.glob(p + ".*"))

    # -- the whole file
    def check_file(self, f):
        text = self.texts[f]
        for base, region in regions(f, text):
            md = f.endswith(".md")
            link_spans = []
            fences = [m.span() for m in FENCE.finditer(region)] if md else []
            if md:
                for m in MD_LINK.finditer(region):
                    link_spans.append(m.span(1))
                    why = self.check_path(f, m.group(1), link=True)
                    if why:
                        self.report(f, text, base + m.start(1), why)
            for m in PATH_WORD.finditer(region):
                word = m.group(1)
                if "/" not in word and "." not in word:
                    continue
                if any(a <= m.start() < b for a, b in link_spans):
                    continue
                in_code = any(a <= m.start() < b for a, b in fences)
                why = self.check_path(f, m.group(1), in_code=in_code)
                if why:
                    self.report(f, text, base + m.start(1), why)
            for m in TEST_WORD.finditer(region):
                inst, suite, name, _ = m.groups()
                if name.endswith("_"):
                    # Wrapped at the comment's margin after an underscore:
                    # the name goes on at the start of the next line.
                    cont = WRAP.match(region, m.end())
                    if cont:
                        name += cont.group(1)
                if name.rstrip("*") == "" and name != "*":
                    continue
                known = suite in self.tests.by_suite
                if not known and not looks_like_test(name):
                    continue
                if name in FILE_EXTS:
                    continue
                self.cited.append(m.group(0))
                why = self.tests.check(suite, name)
                if not why and inst and inst not in self.tests.instances:
                    why = f"no instantiation {inst}/ of a parametrized suite"
                if why:
                    self.report(f, text, base + m.start(2), why)
            for m in CTEST_WORD.finditer(region):
                rest = m.group(2).rstrip(".-")
                if rest in FILE_EXTS or rest.split(".")[0] in FILE_EXTS:
                    continue
                name = m.group(1) + "." + rest
                self.cited.append(name)
                why = self.tests.check_ctest(name)
                if why:
                    self.report(f, text, base + m.start(1), why)
            for m in DEV_WORD.finditer(region):
                for d in (m.group(1), m.group(2)):
                    if d is None:
                        continue
                    self.cited.append("D" + d)
                    off = base + m.start()
                    if d in self.rows:
                        continue
                    if d in self.unused:
                        if (f, text.count("\n", 0, off)) not in \
                                self.unused_lines:
                            self.report(f, text, off, f"D{d} is an unused "
                                        "number (docs/semantics.md)")
                    else:
                        self.report(f, text, off,
                                    f"D{d} is not a row of docs/semantics.md")

    def check_rename_list(self):
        """include/uepoll/rename.h's comment lists the calls it renames: the
        list must be the header's own macros."""
        f = "include/uepoll/rename.h"
        text = self.texts.get(f)
        if text is None:
            return
        m = re.search(r"and so on for\n((?: \*[^\n]*\n)+?) \*\n", text)
        if not m:
            self.report(f, text, 0, "no list of calls after 'and so on for'")
            return
        listed = set()
        for line in m.group(1).split("\n"):
            if not line.rstrip().endswith(":"):
                listed.update(re.findall(r"\b[a-z_][a-z0-9_]*\b",
                                         re.sub(r"\(.*?\)", "", line)))
        defined = set(re.findall(r"^#define ([a-z_][a-z0-9_]*)\(", text,
                                 re.M))
        for name in sorted(defined - listed):
            self.report(f, text, m.start(),
                        f"rename.h renames {name} but its list omits it")
        for name in sorted(listed - defined):
            self.report(f, text, m.start(),
                        f"rename.h's list names {name}, which it does not "
                        "rename")

    def run(self):
        for f in self.scope():
            self.check_file(f)
        self.check_rename_list()
        return self.problems


def main():
    args = sys.argv[1:]
    if args not in ([], ["--list"]):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    c = Checker()
    problems = c.run()
    if args == ["--list"]:
        for w in sorted(set(c.cited)):
            print("cited:", w)
    for p in problems:
        print(p)
    if problems:
        print(f"check-refs: {len(problems)} stale citation(s)",
              file=sys.stderr)
        return 1
    print(f"check-refs: {len(set(c.cited))} citations, all current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
