"""Schema-driven fuzzing of the HTTP API: schemathesis generates requests from the service's own
OpenAPI document and sends them to the real app (real embedding model and index, in process).

Every operation is fuzzed twice: with requests the schema allows (each must get a documented
answer: 2xx, or a documented 400/403/413 with a JSON `detail`) and with requests it forbids (each
must be refused with 400, 413 or 422). In both modes every response must match the schema: a
documented status code, its content type and its body model. Never a 5xx.

Generation is derandomized (the same seed every run); the budget below is 1,253 requests, which
take about 25 s on 2 idle cores and up to about two minutes on a busy machine.
"""

from __future__ import annotations

import collections
import time

import hypothesis
import pytest
import schemathesis
from schemathesis import GenerationMode

from oomkb.api.http.app import create_app
from oomkb.settings import Settings

pytestmark = pytest.mark.slow  # real compiles, subprocesses, a browser or load: `make test-quick` skips it

# (method, path) → examples per generation mode. /v1/ask embeds every question (the costly call),
# so it gets fewer; operations without inputs have a single possible request.
BUDGET: dict[tuple[str, str], dict[GenerationMode, int]] = {
    ("POST", "/v1/ask"): {GenerationMode.POSITIVE: 150, GenerationMode.NEGATIVE: 150},
    ("POST", "/v1/search"): {GenerationMode.POSITIVE: 150, GenerationMode.NEGATIVE: 150},
    ("POST", "/v1/diagnose"): {GenerationMode.POSITIVE: 200, GenerationMode.NEGATIVE: 150},
    ("POST", "/v1/estimate"): {GenerationMode.POSITIVE: 150, GenerationMode.NEGATIVE: 150},
    ("POST", "/v1/plan"): {GenerationMode.POSITIVE: 100, GenerationMode.NEGATIVE: 100},
    ("POST", "/v1/feedback"): {GenerationMode.POSITIVE: 100, GenerationMode.NEGATIVE: 100},
    # a server without a job queue (no OOMKB_RAY_ADDRESS): every id is unknown (404)
    ("GET", "/v1/jobs/{job_id}"): {GenerationMode.POSITIVE: 30},
    ("DELETE", "/v1/jobs/{job_id}"): {GenerationMode.POSITIVE: 30},
    ("GET", "/v1/docs"): {GenerationMode.POSITIVE: 1},
    ("GET", "/healthz"): {GenerationMode.POSITIVE: 1},
    ("GET", "/readyz"): {GenerationMode.POSITIVE: 1},
}
MIN_TOTAL_CASES = 1000
# Hypothesis stops early only when it has tried every distinct input; below this share of the
# budget the fuzzing is not doing what it claims.
MIN_SHARE_OF_BUDGET = 0.9

# Schema-valid requests may still be refused for what a schema cannot say: a question without a
# letter or digit (400), the disabled /v1/estimate (403), feedback for an answer this server
# never gave (404), a body over the byte limit (413).
ACCEPTED_VALID = ["2xx", "400", "403", "404", "413"]
REFUSED_INVALID = ["400", "413", "422"]

CASES = [(method, path, mode) for (method, path), modes in BUDGET.items() for mode in modes]


@pytest.fixture(scope="module")
def app(searcher, tmp_path_factory):
    from oomkb.api.core.assistant import Assistant

    # schemathesis calls an ASGI app with `Host: testserver`; the trusted-host check has its own
    # tests (test_http_security.py), here the API behind it is fuzzed.
    db = tmp_path_factory.mktemp("fuzz-db") / "oomkb.sqlite"
    return create_app(Settings(allowed_hosts=["testserver"], db=db), Assistant(searcher))


@pytest.fixture(scope="module")
def schema(app):
    config = schemathesis.config.SchemathesisConfig.from_dict({
        "checks": {
            "positive_data_acceptance": {"expected-statuses": ACCEPTED_VALID},
            "negative_data_rejection": {"expected-statuses": REFUSED_INVALID},
        },
    })
    return schemathesis.openapi.from_asgi("/openapi.json", app, config=config)


@pytest.fixture(scope="module")
def tally(request):
    """Cases sent per (operation, mode); the total is reported at the end of the module."""
    counts: collections.Counter = collections.Counter()
    started = time.monotonic()
    yield counts
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and counts:
        statuses = collections.Counter()
        for (_, _, _, status), n in counts.items():
            statuses[status] += n
        with capture.global_and_fixture_disabled():
            reporter.write_line(
                f"\nschema fuzzing: {sum(counts.values())} requests in "
                f"{time.monotonic() - started:.0f} s; status codes {dict(sorted(statuses.items()))}"
            )


def test_the_budget_covers_every_operation_in_the_schema_and_over_1000_cases(schema):
    operations = {(op.method.upper(), op.path) for op in (r.ok() for r in schema.get_all_operations())}
    assert operations == set(BUDGET), "fuzz every operation the API documents, and only those"
    assert sum(n for modes in BUDGET.values() for n in modes.values()) >= MIN_TOTAL_CASES


@pytest.mark.parametrize(("method", "path", "mode"), CASES,
                         ids=[f"{m} {p} {mode.value}" for m, p, mode in CASES])
def test_generated_requests_get_documented_answers_and_never_a_server_error(schema, tally, method, path, mode):
    operation = schema[path][method]
    budget = BUDGET[(method, path)][mode]
    sent = 0

    @hypothesis.settings(max_examples=budget, derandomize=True, database=None, deadline=None,
                         suppress_health_check=list(hypothesis.HealthCheck), print_blob=False)
    @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
    def check(case):
        nonlocal sent
        sent += 1
        response = case.call()
        tally[(method, path, mode.value, response.status_code)] += 1
        assert response.status_code < 500, (response.status_code, response.text[:500])
        assert "Traceback" not in response.text
        # Raises with a reproducing curl command when a check fails: documented status code,
        # content type, body matching its model, valid data accepted, invalid data refused.
        case.validate_response(response)
        if response.status_code >= 400:
            detail = response.json()["detail"]
            assert isinstance(detail, str) and detail, response.text[:500]

    check()
    assert sent >= min(budget, max(1, int(budget * MIN_SHARE_OF_BUDGET)))

