# realprog.python.subprocess_beside_a_loop's program: CPython starting
# children (subprocess, which forks with vfork and closes every descriptor
# above 2 in the child with close_range) from the main thread while an
# asyncio loop runs on another thread, then an asyncio subprocess. Prints
# one line per check; exits 1 if any failed.
import asyncio
import os
import subprocess
import sys
import threading

failed = False


def step(what, expected, actual):
    global failed
    ok = expected == actual
    print(f"{what} ok" if ok else f"{what}: expected {expected!r}, got {actual!r}")
    failed = failed or not ok


ready = threading.Event()
stop = threading.Event()
callbacks = []


def loop_thread():
    # A loop that is always busy with uepoll calls: a pipe written and read
    # back every 2 ms, so that forks land in the middle of its harvests.
    async def main():
        rd, wr = os.pipe()
        loop = asyncio.get_running_loop()
        loop.add_reader(rd, lambda: callbacks.append(os.read(rd, 16)))
        ready.set()
        while not stop.is_set():
            os.write(wr, b"x")
            await asyncio.sleep(0.002)
        await asyncio.sleep(0.05)
        loop.remove_reader(rd)

    asyncio.run(main())


t = threading.Thread(target=loop_thread)
t.start()
ready.wait()
echoed = 0
for i in range(100):
    r = subprocess.run(["sh", "-c", 'echo "$0"', str(i)], capture_output=True,
                       timeout=20)
    echoed += r.returncode == 0 and r.stdout == f"{i}\n".encode()
step("100 children while a loop thread runs", 100, echoed)


async def amain():
    p = await asyncio.create_subprocess_exec(
        "cat", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    out, _ = await p.communicate(b"z" * 200000)
    return len(out), p.returncode


step("an asyncio child beside it", (200000, 0),
     asyncio.run(asyncio.wait_for(amain(), 20)))
stop.set()
t.join(20)
step("the loop thread ended", False, t.is_alive())
step("the loop thread's callbacks ran", True, len(callbacks) > 0)
sys.exit(1 if failed else 0)
