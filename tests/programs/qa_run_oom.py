"""A training script with argparse options that runs out of memory on the CPU backend."""

import argparse

import jax.numpy as jnp


def build_cache(n):
    return jnp.zeros((n,), jnp.float32).block_until_ready()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--log2-size", type=int, default=40)
    parser.add_argument("--name", default="cache")
    args = parser.parse_args()
    small = jnp.ones((1024, 1024))  # held while the big one is allocated
    cache = build_cache(1 << args.log2_size)
    print(args.name, small.sum(), cache.shape)


if __name__ == "__main__":
    main()
