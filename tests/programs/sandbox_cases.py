"""Small user programs that misbehave in every way the sandbox must survive (used by tests)."""

import os
import sys


def add(a=1, b=2):
    return {"sum": a + b}


def loop_forever():
    while True:
        pass


def abort():
    os.abort()


def exit_three():
    sys.exit(3)


def hard_exit_four():
    os._exit(4)


def segfault():
    import ctypes

    ctypes.string_at(0)


def print_huge(megabytes=100):
    line = "x" * 1023 + "\n"
    for _ in range(megabytes * 1024):
        sys.stdout.write(line)
    print("the end")
    return {"printed_megabytes": megabytes}


def environment_names():
    return {"names": sorted(os.environ)}


def raise_value_error():
    raise ValueError("the user's own bug")


def allocate_gigabytes(n=4):
    blob = bytearray(n << 30)
    return {"bytes": len(blob)}
