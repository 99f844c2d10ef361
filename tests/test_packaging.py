"""A non-editable install carries the guides, cards, catalogue, signatures and web page."""

import subprocess
import sys
import zipfile

from tests.conftest import ROOT


def test_the_wheel_ships_every_data_file_the_code_reads(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)],
        check=True, capture_output=True, timeout=300,
    )
    (wheel,) = tmp_path.glob("oomkb-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = [p.relative_to(ROOT).as_posix() for pattern in (
        "docs_src/*.md", "kb/cards/*.yaml", "kb/catalogue/*.yaml", "diagnostics/*.yaml",
        "api/http/static/*",
    ) for p in ROOT.glob(pattern)]
    assert len(expected) >= 5 + 5 + 4 + 2 + 3
    assert not [e for e in expected if e not in names]
    assert any(n.endswith("entry_points.txt") for n in names)
