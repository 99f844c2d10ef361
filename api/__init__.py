"""The assistant and its interfaces (CLI, HTTP, Slack, web page).

Importing the package sets libtpu's process defaults (quiet start-up, no lockfile clash) before
anything here imports jax, directly or through a library that probes it.
"""

from diagnostics.tpu import prepare_in_process as _prepare_libtpu

_prepare_libtpu()
