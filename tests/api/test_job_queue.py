"""The service's job queue on a real Ray cluster (OOMKB_RAY_ADDRESS): 202 and a job id, the
submitter's job only, cancelling, a bound per client, a deadline, a killed worker retried, answers
kept in OOMKB_HOME across a restart, and an unreachable cluster answered 503."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

ray = pytest.importorskip("ray")

from oomkb.api.http.app import create_app  # noqa: E402
from oomkb.settings import Settings  # noqa: E402
from tests.ray_cluster import free_port, local_cluster  # noqa: E402

pytestmark = pytest.mark.slow  # a Ray cluster and real compiles

LOCAL = "http://127.0.0.1"
PROGRAM = '''
import os, pathlib, time
import jax, jax.numpy as jnp

def quick():
    return (lambda x: jnp.tanh(x) * 2), (jax.ShapeDtypeStruct((1024, 1024), jnp.float32),)

def slow():
    time.sleep(120)
    return quick()

def killable():
    folder = pathlib.Path(FOLDER)
    if not (folder / "spare").exists():
        (folder / "started").write_text(f"{os.getppid()}\\n")
        while not (folder / "spare").exists():  # until the test has killed this job's worker
            time.sleep(0.1)
    return quick()
'''


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with local_cluster(cpus=2):
        yield ray.get_runtime_context().gcs_address


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("OOMKB_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def service(address: str, home: Path, **overrides) -> Settings:
    """The service with a job queue on ``address``; its jobs run in the bubblewrap sandbox on
    the workers (a job cancelled or killed takes its sandbox with it)."""
    return Settings(**{"enable_estimate": True, "estimate_sandbox": "bwrap",
                       "ray_address": address, "home": home, **overrides})


def client_of(app, host: str = "10.0.0.1") -> TestClient:
    return TestClient(app, base_url=LOCAL, client=(host, 40000))


def wait_for(client: TestClient, job_id: str, states=("done", "failed", "cancelled"),
             timeout_s: float = 180) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        r = client.get(f"/v1/jobs/{job_id}")
        assert r.status_code == 200, r.text
        if r.json()["state"] in states:
            return r.json()
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} did not reach {states}: {r.json()}")


def program(folder: Path | None = None) -> str:
    return PROGRAM.replace("FOLDER", repr(str(folder or "")))


def test_an_estimate_is_queued_and_only_its_submitter_sees_the_result(cluster, home):
    from oomkb.diagnostics.estimate import estimate_program

    app = create_app(service(cluster, home))
    mine, theirs = client_of(app), client_of(app, "10.0.0.2")
    try:
        r = mine.post("/v1/estimate", json={"source": program(), "factory": "quick"})
        assert r.status_code == 202, r.text
        job_id = r.json()["job_id"]
        assert len(job_id) == 43 and r.headers["location"] == f"/v1/jobs/{job_id}"
        assert r.json()["state"] == "queued"
        assert theirs.get(f"/v1/jobs/{job_id}").status_code == 404
        assert theirs.delete(f"/v1/jobs/{job_id}").status_code == 404
        done = wait_for(mine, job_id)
        assert done["state"] == "done" and done["position"] is None, done
        # the worker's answer is the estimate this machine makes of the same program
        path = home.parent / "quick.py"
        path.write_text(program())
        local = estimate_program(f"{path}:quick", donation_check=True)
        assert done["result"]["total_bytes"] == local.total_bytes
        assert done["result"]["function"] == local.function
        # kept on disk: a restarted server still answers it
        assert (home / "jobs" / f"{job_id}.json").exists()
    finally:
        app.state.job_queue.close()
    ray_address_kept = create_app(service(cluster, home))
    try:
        again = client_of(ray_address_kept).get(f"/v1/jobs/{job_id}")
        assert again.status_code == 200 and again.json()["result"] == done["result"]
        assert client_of(ray_address_kept, "10.0.0.2").get(f"/v1/jobs/{job_id}").status_code == 404
    finally:
        ray_address_kept.state.job_queue.close()


def test_a_plan_is_queued_too(cluster, home):
    app = create_app(service(cluster, home))
    client = client_of(app)
    try:
        bad = client.post("/v1/plan", json={"source": program(), "factory": "quick",
                                            "vary": {"name": "batch"}})
        assert bad.status_code == 400  # refused at once, not a failed job later
        r = client.post("/v1/plan", json={"source": program(), "factory": "quick"})
        assert r.status_code == 202
        done = wait_for(client, r.json()["job_id"])
        assert done["state"] == "done" and done["kind"] == "plan"
        assert done["result"]["kind"] == "plan" and done["result"]["baseline"]["fits"]
    finally:
        app.state.job_queue.close()


def test_jobs_wait_in_order_are_cancelled_and_bounded_per_client(cluster, home):
    app = create_app(service(cluster, home, jobs_per_client=3))
    client = client_of(app)
    try:
        ids = []
        for _ in range(3):
            r = client.post("/v1/estimate", json={"source": program(), "factory": "slow"})
            assert r.status_code == 202
            ids.append(r.json()["job_id"])
        over = client.post("/v1/estimate", json={"source": program(), "factory": "quick"})
        assert over.status_code == 429 and over.headers["retry-after"]
        # two CPUs: two run, the third waits first in line
        wait_for(client, ids[0], states=("running",), timeout_s=30)
        wait_for(client, ids[1], states=("running",), timeout_s=30)
        third = client.get(f"/v1/jobs/{ids[2]}").json()
        assert third["state"] == "queued" and third["position"] == 1
        cancelled = client.delete(f"/v1/jobs/{ids[2]}").json()
        assert cancelled["state"] == "cancelled" and "before it started" in cancelled["error"]
        stopped = client.delete(f"/v1/jobs/{ids[0]}").json()
        assert stopped["state"] == "cancelled" and "stopped on its worker" in stopped["error"]
        # a place freed: the client may submit again
        assert client.post("/v1/estimate", json={"source": program(), "factory": "quick"}
                           ).status_code == 202
        client.delete(f"/v1/jobs/{ids[1]}")
    finally:
        app.state.job_queue.close()


def test_a_job_past_its_deadline_fails_and_is_stopped(cluster, home):
    app = create_app(service(cluster, home, estimate_timeout_s=4))
    client = client_of(app)
    try:
        r = client.post("/v1/estimate", json={"source": program(), "factory": "slow"})
        started = time.monotonic()
        done = wait_for(client, r.json()["job_id"], timeout_s=90)
        assert done["state"] == "failed" and done["http_status"] == 422, done
        assert time.monotonic() - started < 60
    finally:
        app.state.job_queue.close()


def test_a_worker_killed_mid_job_is_retried_on_another(cluster, home, tmp_path):
    # no sandbox here: the program writes where the test can see it (its worker's id)
    app = create_app(service(cluster, home, estimate_sandbox="none"))
    client = client_of(app)
    try:
        r = client.post("/v1/estimate", json={"source": program(tmp_path), "factory": "killable"})
        marker = tmp_path / "started"
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        worker = int(marker.read_text())
        (tmp_path / "spare").touch()
        os.kill(worker, signal.SIGKILL)  # the Ray worker running the job, mid-job
        done = wait_for(client, r.json()["job_id"])
        assert done["state"] == "done", done
    finally:
        app.state.job_queue.close()


def test_an_unreachable_cluster_is_503_with_retry_after(home):
    app = create_app(service(f"127.0.0.1:{free_port()}", home))
    r = client_of(app).post("/v1/estimate", json={"source": program(), "factory": "quick"})
    assert r.status_code == 503 and r.headers["retry-after"]
    assert "cannot be reached" in r.json()["detail"]


def test_without_a_cluster_there_is_no_queue(home):
    app = create_app(Settings(enable_estimate=True, home=home))
    assert app.state.job_queue is None
    r = client_of(app).get("/v1/jobs/" + "a" * 43)
    assert r.status_code == 404 and "no job queue" in r.json()["detail"]
    schema = app.openapi()
    assert "202" in schema["paths"]["/v1/estimate"]["post"]["responses"]
    assert "/v1/jobs/{job_id}" in schema["paths"]
