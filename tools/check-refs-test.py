#!/usr/bin/env python3
"""The drift check's own test: tools/check-refs.py on a small scratch tree
whose citations are known, some current and some stale, and things that
look like citations but are not (the kernel's paths, C++ scopes, system
headers, numbers). Exit status 0 when the check reports exactly the stale
ones, with their file and line. .ci/run runs it before the check itself.
"""

import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

FILES = {
    "README.md": "# x\n",
    "tests/CMakeLists.txt":
        "add_test(NAME interpose.${lib}.kernel COMMAND x)\n",
    "tests/a/a_test.cc": """\
// Pins D1; uses support/fix.h.
#include "support/fix.h"
TEST_P(Foo, BarBaz) {}
TEST(Foo,
     snake_case_name_here) {}
#define CASE(Name, ...) TEST_P(Multi, Name) {}
CASE(PipeOne, 1)
INSTANTIATE_TEST_SUITE_P(Uepoll, Multi, x);
""",
    "tests/support/fix.h": "\n",
    "src/epoll/item.h": """\
// Current: epoll/item.h, src/epoll/, Foo.BarBaz, Foo.*, Foo.snake_case_*,
// Backends/Foo.BarBaz/kernel, Multi.PipeOne, Multi.Pipe*, Foo.snake_case_
// name_here, interpose.libev.kernel, interpose.<lib>.*, D1-D1.
// Not citations: Eventpoll::Wait, std::atomic, Boost.Asio, <sys/epoll.h>,
// fs/eventpoll.c, kernel/futex/core.c, 0.3, errno.h, **Lifetime.**,
// tools/perf/bench/epoll-wait.c, include/linux/eventpoll.h, a.out.
const char* s = "src/not_a_comment.h Foo.NotAComment";
/* Stale: epoll/gone.h */
// Stale: Foo.Missing
// Stale: Nope.SomeTestName
// Stale: Foo.Zz*
// Stale: interpose.nothing
// Stale: gone.cc
// Stale: Other/Foo.BarBaz
""",
    "docs/semantics.md": """\
| # | x |
| D1 | row |

D2 is unused: never assigned.
""",
    "docs/x.md": """\
[ok](../README.md) and [ok](semantics.md#d1).
[stale](missing.md)
Stale: src/nothing/ and D2 and D9.
Current: tools/run.sh and tools/mutants/NAME.patch; CamelCase.md is not
a path but a bare .md name, and it is stale.
```sh
cc app.cc -o app
```
""",
    "tools/run.sh":
        "#!/bin/sh\n# Cites tests/a/a_test.cc and tests/b/.\n"
        "echo '# tests/c'\n",
    "include/uepoll/rename.h": """\
/* and so on for
 *
 *   everywhere:
 *     read gone
 *
 */
#define read(fd, b, n) uepoll_read(fd, b, n)
#define write(fd, b, n) uepoll_write(fd, b, n)
#define UEPOLL_X(a) a
""",
    "tools/mutants/m.patch": "# mutant: x (src/epoll/item.h)\n",
}

EXPECTED = """\
docs/x.md:2: path missing.md does not exist
docs/x.md:3: D2 is an unused number (docs/semantics.md)
docs/x.md:3: D9 is not a row of docs/semantics.md
docs/x.md:3: path src/nothing/ does not exist
docs/x.md:4: no file named CamelCase.md in the tree
include/uepoll/rename.h:1: rename.h renames write but its list omits it
include/uepoll/rename.h:1: rename.h's list names gone, which it does not rename
src/epoll/item.h:10: no test suite Nope in tests/
src/epoll/item.h:11: Foo.Zz* matches no test of Foo
src/epoll/item.h:12: no CTest name can match interpose.nothing \
(add_test in tests/)
src/epoll/item.h:13: no file named gone.cc in the tree
src/epoll/item.h:14: no instantiation Other/ of a parametrized suite
src/epoll/item.h:8: path epoll/gone.h does not exist
src/epoll/item.h:9: no test Foo.Missing in tests/
tools/run.sh:2: path tests/b/ does not exist
"""


def main():
    with tempfile.TemporaryDirectory() as root:
        for path, text in FILES.items():
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(text)
        if shutil.which("git"):  # else the check reads the directory
            subprocess.run(["git", "init", "-q", root], check=True)
            subprocess.run(["git", "-C", root, "add", "."], check=True)
        env = dict(os.environ, CHECK_REFS_ROOT=root)
        r = subprocess.run([sys.executable,
                            os.path.join(HERE, "check-refs.py")],
                           capture_output=True, text=True, env=env)
    got = "".join(sorted(r.stdout.splitlines(keepends=True)))
    if r.returncode == 1 and got == EXPECTED:
        print("check-refs-test: passed")
        return 0
    print("check-refs-test: FAILED (exit status %d)" % r.returncode)
    print("--- expected\n" + EXPECTED + "--- got\n" + got + r.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
