"""A factory whose worker a test kills mid-measurement (tests copy this file into a folder of their own).

With ``batch=64`` it writes its process id to ``started`` beside this file and waits, until a file
``spare`` appears there (the test writes it once it has killed enough workers); any other batch is
a small elementwise program that compiles in about a second.
"""

import os
import pathlib
import time

import jax
import jax.numpy as jnp


def make(batch=8):
    here = pathlib.Path(__file__).parent
    if batch == 64 and not (here / "spare").exists():
        (here / "started").write_text(f"{os.getpid()} {os.getppid()}\n")
        time.sleep(60)  # the test kills this process's worker meanwhile
    return (lambda x: jnp.tanh(x) * 2), (jax.ShapeDtypeStruct((batch, 128), jnp.float32),)
