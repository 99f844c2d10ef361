"""The project's exception tree: one root, and the CLI/HTTP outcome is a property of the class."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from oomkb.errors import OomkbError, ServiceError, UserInputError

PACKAGES = ("oomkb", "api", "diagnostics", "indexer", "kb")


def _project_exception_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in PACKAGES:
        package = importlib.import_module(name)
        modules = [package]
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
            if info.name.endswith("__main__"):
                continue
            modules.append(importlib.import_module(info.name))
        for module in modules:
            for _, obj in inspect.getmembers(module, inspect.isclass):
                if issubclass(obj, BaseException) and obj.__module__.split(".")[0] in PACKAGES:
                    found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return list(found.values())


def test_every_exception_class_the_project_defines_descends_from_one_root():
    classes = _project_exception_classes()
    assert len(classes) > 20  # the walk really found the project's errors
    strays = sorted(f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, OomkbError))
    assert strays == []


def test_every_project_error_is_either_the_users_fault_or_the_services():
    for cls in _project_exception_classes():
        if cls in (OomkbError, UserInputError, ServiceError):
            continue
        assert issubclass(cls, (UserInputError, ServiceError)), cls


@pytest.mark.parametrize(("module", "name", "exit_code", "status"), [
    ("oomkb.kb.errors", "QueryError", 2, 400),
    ("oomkb.indexer.errors", "IndexCorruptError", 1, 503),
    ("oomkb.indexer.errors", "GuideError", 2, 400),
    ("oomkb.diagnostics.exceptions", "LogReadError", 2, 400),
    # shipped data that does not load is the service's fault, not the user's (was 400)
    ("oomkb.diagnostics.exceptions", "SignatureCatalogueError", 1, 503),
    ("oomkb.kb.errors", "CatalogueError", 1, 503),
    ("oomkb.diagnostics.sandbox", "JobTimeout", 2, 422),
    ("oomkb.diagnostics.sandbox", "ProgramOutOfMemory", 2, 422),
    ("oomkb.api.http.holder", "NotReady", 1, 503),
    ("oomkb.api.http.jobs", "EstimateBusy", 1, 429),
])
def test_exit_code_and_http_status_come_from_the_most_specific_class(module, name, exit_code, status):
    cls = getattr(importlib.import_module(module), name)
    assert (cls.exit_code, cls.http_status) == (exit_code, status)


def test_a_broken_shipped_signature_catalogue_answers_503_not_400(monkeypatch):
    from fastapi.testclient import TestClient

    from oomkb.api.http.app import create_app
    from oomkb.settings import Settings
    from oomkb.diagnostics import parse
    from oomkb.diagnostics.exceptions import SignatureCatalogueError

    def broken(*args, **kwargs):
        raise SignatureCatalogueError("signatures.yaml: entry 3 has no pattern")

    monkeypatch.setattr(parse, "parse_error", broken)
    with TestClient(create_app(Settings(), assistant=object()), base_url="http://127.0.0.1") as client:  # diagnose needs no assistant
        r = client.post("/v1/diagnose", json={"error_log": "Ran out of memory in memory space hbm."})
    assert r.status_code == 503
    assert "signatures.yaml" in r.json()["detail"]
