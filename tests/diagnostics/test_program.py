"""The one program contract (diagnostics/program.py), as estimate and profile both read it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from oomkb.diagnostics import program
from oomkb.diagnostics.program import FactoryError

PROGRAMS = Path(__file__).parents[1] / "programs"
FILE = PROGRAMS / "contract_programs.py"


def load(name):
    return program.load_factory(f"{FILE}:{name}")


@pytest.mark.parametrize("name", ["as_tuple", "as_list", "with_mapping_kwargs"])
def test_tuples_lists_and_any_mapping_are_one_contract(name):
    produced, mesh = program.call_factory(load(name))
    fn, args, kwargs, _ = program.unpack_program(produced, name)
    assert fn.__name__ == "double" and isinstance(args, tuple) and len(args) == 1
    assert isinstance(kwargs, dict)
    assert mesh is None


@pytest.mark.parametrize("name", ["as_list", "with_mapping_kwargs"])
def test_estimate_and_profile_accept_the_same_factories(name):
    from oomkb.diagnostics.estimate import estimate_factory
    from oomkb.diagnostics.profile import resolve_target

    report = estimate_factory(load(name), target="v5e", donation_check=False)
    assert report.fits and report.function == "double"
    kind, _, args, kwargs = resolve_target(load(name))
    assert kind == "factory" and len(args) == 1
    assert kwargs == ({"scale": 3.0} if name == "with_mapping_kwargs" else {})


def test_keyword_arguments_and_devices_reach_the_factory():
    produced, mesh = program.call_factory(load("sized"), devices=["d0", "d1"], kwargs={"rows": 24})
    _, args, kwargs, _ = program.unpack_program(produced, "sized")
    assert args[0].shape == (24, 128) and kwargs == {"scale": 2.0}


def test_an_argument_the_factory_does_not_take_is_named():
    with pytest.raises(FactoryError, match=r"takes no argument 'batch' \(it takes: rows\)"):
        program.call_factory(load("raises_for_odd"), kwargs={"batch": 4})


def test_a_raising_factory_names_the_users_line():
    with pytest.raises(FactoryError) as info:
        program.call_factory(load("raises_for_odd"), kwargs={"rows": 3}, label="factory f")
    line = next(i for i, text in enumerate(FILE.read_text().splitlines(), 1) if "odd rows" in text)
    assert str(info.value) == f"factory f raised ValueError: odd rows: 3 at contract_programs.py:{line}"


@pytest.mark.parametrize(
    ("produced", "message"),
    [
        (42, "returned int; a factory must return"),
        ((1, 2, 3, 4), "returned a tuple of 4"),
        ((None, ()), "returned NoneType as fn"),
        ((len, 5), "returned int as args"),
        ((len, (), [1]), "returned list as kwargs"),
    ],
)
def test_wrong_returns_are_clear_errors(produced, message):
    with pytest.raises(FactoryError, match=message):
        program.unpack_program(produced, "f")


def test_one_definition_of_the_users_line(tmp_path):
    user = tmp_path / "mine.py"
    user.write_text("import json\n\ndef go():\n    return json.loads('{')\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import mine

        with pytest.raises(ValueError) as info:
            mine.go()
    finally:
        sys.path.remove(str(tmp_path))
    # json (the standard library) is skipped, the user's line is kept
    assert program.user_location(info.value) == "mine.py:4"
    assert program.is_user_file(str(user)) and not program.is_user_file(program.__file__)
    # innermost first; reaching oomkb's own code first means "no user line on record"
    frames = [(json_file := __import__("json").__file__, 1, "loads"), (program.__file__, 9, "x"),
              (str(user), 4, "go")]
    assert program.user_frame(frames) is None
    assert program.user_frame([(json_file, 1, "loads"), (str(user), 4, "go")]) == f"{user}:4 (go)"
