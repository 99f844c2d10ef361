"""How the service runs: every setting of `oomkb serve`, read from `OOMKB_*` and `SLACK_*`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

MIB = 1 << 20
GIB = 1 << 30


class SettingsError(ValueError):
    """An environment variable holds a value the service cannot use."""


#: Environment variable of each setting.
ENV_VARS: dict[str, str] = {
    "host": "OOMKB_HOST",
    "port": "OOMKB_PORT",
    "index_dir": "OOMKB_INDEX_DIR",
    "docs_dir": "OOMKB_DOCS_DIR",
    "max_body_bytes": "OOMKB_MAX_BODY_BYTES",
    "enable_estimate": "OOMKB_ENABLE_ESTIMATE",
    "estimate_timeout_s": "OOMKB_ESTIMATE_TIMEOUT_S",
    "estimate_memory_bytes": "OOMKB_ESTIMATE_MEMORY_BYTES",
    "estimate_cpu_seconds": "OOMKB_ESTIMATE_CPU_SECONDS",
    "slack_bot_token": "SLACK_BOT_TOKEN",
    "slack_signing_secret": "SLACK_SIGNING_SECRET",
    "slack_bot_user_id": "SLACK_BOT_USER_ID",
    "slack_api_url": "SLACK_API_URL",
    "torch_threads": "OOMKB_TORCH_THREADS",
    "allowed_hosts": "OOMKB_ALLOWED_HOSTS",
    "slack_command_response": "OOMKB_SLACK_COMMAND_RESPONSE",
}

#: Host names every server answers to, besides the address it is bound to.
LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")
_ANY_ADDRESS = {"0.0.0.0", "::", ""}


class Settings(BaseModel):
    """How the service runs; :meth:`from_env` reads it from `OOMKB_*` and `SLACK_*` variables."""

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    index_dir: Path | None = Field(default=None, description="index folder; default under OOMKB_HOME")
    docs_dir: Path | None = Field(default=None, description="guides folder; default the built-in ones")
    max_body_bytes: int = Field(default=MIB, gt=0, description="larger request bodies get 413")
    enable_estimate: bool = Field(default=False, description="allow POST /v1/estimate (runs user code)")
    estimate_timeout_s: float = Field(default=120.0, gt=0, description="wall-clock limit of an estimate")
    estimate_memory_bytes: int | None = Field(default=8 * GIB, gt=0,
                                              description="address-space limit of the estimate's child")
    estimate_cpu_seconds: int | None = Field(default=300, gt=0, description="CPU-time limit of the child")
    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_bot_user_id: str | None = Field(default=None, description="the bot's own user id, if known")
    slack_api_url: str = Field(default="https://slack.com/api/", description="Slack Web API base URL")
    torch_threads: int = Field(
        default=1, ge=1, le=256,
        description="intra-op threads of the embedding model in `oomkb serve`: requests already run "
        "in parallel threads, and more threads per request oversubscribe the cores",
    )
    allowed_hosts: list[str] | None = Field(
        default=None,
        description="Host header values the server answers (others get 400, against DNS rebinding); "
        "default: the bound host, localhost, 127.0.0.1 and [::1]. `*.example.com` matches "
        "subdomains; `*` alone turns the check off (only behind a proxy that checks Host itself)",
    )
    slack_command_response: Literal["ephemeral", "in_channel"] = Field(
        default="ephemeral",
        description="who sees the answer to /oom: only the asker (ephemeral) or the whole channel",
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from the environment (empty variables count as unset); `overrides` win.

        Raises :class:`SettingsError` naming the variable when a value is unusable."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field, var in ENV_VARS.items():
            raw = environ.get(var, "").strip()
            if raw:
                values[field] = raw
        if "allowed_hosts" in values:
            values["allowed_hosts"] = [h.strip() for h in values["allowed_hosts"].split(",") if h.strip()]
        if "enable_estimate" in values:
            values["enable_estimate"] = values["enable_estimate"].lower() in {"1", "true", "yes", "on"}
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls(**values)
        except ValidationError as exc:
            problems = []
            for e in exc.errors():
                field = str(e["loc"][0]) if e["loc"] else "?"
                where = ENV_VARS.get(field, field) if overrides.get(field) is None else field
                problems.append(f"{where}: {e['msg']}")
            raise SettingsError("invalid service settings: " + "; ".join(problems)) from None

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

    @property
    def slack_enabled(self) -> bool:
        return bool(self.slack_bot_token and self.slack_signing_secret
                    and self.slack_bot_token.get_secret_value()
                    and self.slack_signing_secret.get_secret_value())
