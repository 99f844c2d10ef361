"""How the service runs: every setting of `oomkb serve`, read from `OOMKB_*` and `SLACK_*`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

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
    "estimate_sandbox": "OOMKB_ESTIMATE_SANDBOX",
    "slack_bot_token": "SLACK_BOT_TOKEN",
    "slack_signing_secret": "SLACK_SIGNING_SECRET",
    "slack_bot_user_id": "SLACK_BOT_USER_ID",
    "slack_api_url": "SLACK_API_URL",
    "torch_threads": "OOMKB_TORCH_THREADS",
}


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
    estimate_sandbox: Literal["bwrap", "none"] = Field(
        default="bwrap",
        description="isolation of submitted programs: `bwrap` (bubblewrap: no network, own PID "
        "namespace, read-only runtime; estimates answer 503 when it is missing) or `none` "
        "(resource limits only; the README's warning applies)",
    )
    slack_bot_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    slack_bot_user_id: str | None = Field(default=None, description="the bot's own user id, if known")
    slack_api_url: str = Field(default="https://slack.com/api/", description="Slack Web API base URL")
    torch_threads: int = Field(
        default=1, ge=1, le=256,
        description="intra-op threads of the embedding model in `oomkb serve`: requests already run "
        "in parallel threads, and more threads per request oversubscribe the cores",
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
        if "estimate_sandbox" in values:
            values["estimate_sandbox"] = values["estimate_sandbox"].lower()
        if "enable_estimate" in values:
            values["enable_estimate"] = values["enable_estimate"].lower() in {"1", "true", "yes", "on"}
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls(**values)
        except ValidationError as exc:
            problems = []
            for e in exc.errors():
                field = str(e["loc"][0]) if e["loc"] else "?"
                where = ENV_VARS.get(field, field) if field not in overrides else field
                problems.append(f"{where}: {e['msg']}")
            raise SettingsError("invalid service settings: " + "; ".join(problems)) from None

    @property
    def estimate_isolated(self) -> bool:
        """Whether submitted programs run in the bubblewrap sandbox."""
        return self.estimate_sandbox == "bwrap"

    @property
    def slack_enabled(self) -> bool:
        return bool(self.slack_bot_token and self.slack_signing_secret
                    and self.slack_bot_token.get_secret_value()
                    and self.slack_signing_secret.get_secret_value())
