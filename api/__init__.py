"""The assistant and its interfaces: the command line (`api.cli`) and the HTTP service (`api.http`).

Nothing is set up at import time; the entry points (`api.cli.main`, `api.http.app.create_app`)
call :func:`prepare_process` first.
"""


def prepare_process() -> None:
    """Process defaults oomkb needs before jax or the Hugging Face libraries load (only defaults:
    a value the user set wins): libtpu quiet and sharable, the model hub offline."""
    from oomkb.diagnostics.tpu import prepare_in_process
    from oomkb.settings import prepare_offline_environment

    prepare_in_process()
    prepare_offline_environment()
