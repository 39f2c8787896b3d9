#!/usr/bin/env python3
"""Per-expiry footprint from a lackey trace of expiry_loop (run.sh).

Usage: lines_per_expiry.py TRACE BINARY

Cuts the trace at each entry of footprint_mark and, over the second half
of the expiries, prints the median of: instructions, distinct 64-byte
lines of data touched (loads, stores, modifies), distinct 64-byte lines
of code executed, and the distinct 4 KiB pages of each; then, for the
median expiry, the code and data lines and the instructions by function
(data lines counted for the function whose instruction first touched them
in that expiry).
"""
import bisect
import collections
import statistics
import subprocess
import sys


def symbols(binary):
    out = subprocess.run(["nm", "-C", "--defined-only", binary],
                         capture_output=True, text=True, check=True).stdout
    syms = []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTwW":
            syms.append((int(parts[0], 16), parts[2]))
    syms.sort()
    return syms


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    syms = symbols(sys.argv[2])
    mark = next((a for a, n in syms if n == "footprint_mark"), None)
    if mark is None:
        sys.exit("lines_per_expiry: no footprint_mark in " + sys.argv[2])
    addrs = [a for a, _ in syms]
    top = syms[-1][0] + (1 << 20)

    def where(a):
        if a > top:
            return "(outside the binary: libc, vDSO)"
        name = syms[bisect.bisect_right(addrs, a) - 1][1]
        # .plt has no symbol of its own: nm's nearest is _init.
        return "(the PLT: calls into libc)" if name == "_init" else name

    expiries = []
    cur = None
    fn = None
    with open(sys.argv[1]) as f:
        for line in f:
            if line.startswith("I"):
                a = int(line[3:line.index(",")], 16)
                if a == mark:
                    if cur is not None:
                        expiries.append(cur)
                    cur = {"n": 0, "code": {}, "data": {}, "ins": []}
                    continue
                if cur is not None:
                    cur["n"] += 1
                    cur["ins"].append(a)
                    fn = a
                    cur["code"].setdefault(a >> 6, a)
            elif cur is not None and line[:2] in (" L", " S", " M"):
                d = int(line[3:line.index(",")], 16) >> 6
                cur["data"].setdefault(d, fn)
    if len(expiries) < 4:
        sys.exit("lines_per_expiry: %d expiries in the trace" % len(expiries))
    half = expiries[len(expiries) // 2:]
    med = lambda key: statistics.median(key(e) for e in half)
    print("expiries traced: %d (the last %d counted)" %
          (len(expiries), len(half)))
    print("per expiry, medians: %d instructions, %d data lines, "
          "%d code lines" % (med(lambda e: e["n"]),
                             med(lambda e: len(e["data"])),
                             med(lambda e: len(e["code"]))))
    pages = lambda lines: len({l >> 6 for l in lines})
    print("per expiry, medians: %d data pages, %d code pages (4 KiB)" %
          (med(lambda e: pages(e["data"])), med(lambda e: pages(e["code"]))))
    e = sorted(half, key=lambda e: len(e["code"]))[len(half) // 2]
    by = collections.defaultdict(lambda: [0, 0, 0])
    for a in e["code"].values():
        by[where(a)][0] += 1
    for a in e["data"].values():
        by[where(a) if a is not None else "(before the first instruction)"][1] += 1
    for a in e["ins"]:
        by[where(a)][2] += 1
    print("%5s %5s %6s  function (the median expiry)" %
          ("code", "data", "instr"))
    for name, (c, d, n) in sorted(by.items(),
                                  key=lambda kv: -(kv[1][0] + kv[1][1])):
        print("%5d %5d %6d  %s" % (c, d, n, name[:100]))


if __name__ == "__main__":
    main()
