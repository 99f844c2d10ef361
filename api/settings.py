"""The service's settings: the one settings object of oomkb (see :mod:`oomkb.settings`)."""

from oomkb.settings import GIB, LOCAL_HOSTS, MIB, Settings, SettingsError

__all__ = ["GIB", "LOCAL_HOSTS", "MIB", "Settings", "SettingsError"]
