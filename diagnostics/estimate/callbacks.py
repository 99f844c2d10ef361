"""Host callbacks (``jax.debug.print`` and friends), found in the scheduled HLO text with their
source lines.
"""

from __future__ import annotations

import re

from oomkb.diagnostics.estimate.report import HostCallback

__all__ = ["find_host_callbacks"]


_FILE_NAME = re.compile(r'^(\d+) "(.*)"$')


_FILE_LOCATION = re.compile(r"^(\d+) \{file_name_id=(\d+) .*?\bline=(\d+)")


_STACK_FRAME = re.compile(r"^(\d+) \{file_location_id=(\d+)")


_HOST_SEND = re.compile(r"=\s*\S.*?\bsend\(.*is_host_transfer=true")


_METADATA = re.compile(r"metadata=\{([^}]*)\}")


def _stack_frames(hlo_text: str) -> dict[int, str]:
    """``stack_frame_id -> file:line`` from the tables at the top of an HLO module's text."""
    files: dict[int, str] = {}
    locations: dict[int, str] = {}
    frames: dict[int, str] = {}
    section = None
    for line in hlo_text.splitlines():
        stripped = line.strip()
        if stripped in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = stripped
            continue
        if not stripped:
            continue
        if section == "FileNames" and (m := _FILE_NAME.match(stripped)):
            files[int(m.group(1))] = m.group(2)
        elif section == "FileLocations" and (m := _FILE_LOCATION.match(stripped)):
            locations[int(m.group(1))] = f"{files.get(int(m.group(2)), '?')}:{m.group(3)}"
        elif section == "StackFrames" and (m := _STACK_FRAME.match(stripped)):
            frames[int(m.group(1))] = locations.get(int(m.group(2)), "?")
        elif section and not stripped[0].isdigit():
            section = None
            if stripped.startswith(("%", "ENTRY")):
                break
    return frames


def _metadata_field(metadata: str, key: str) -> str | None:
    m = re.search(rf'\b{key}=("([^"]*)"|(\S+))', metadata)
    if not m:
        return None
    return m.group(2) if m.group(2) is not None else m.group(3)


def find_host_callbacks(hlo_text: str) -> list[HostCallback]:
    frames = _stack_frames(hlo_text)
    seen: set[tuple[str, str | None, str | None]] = set()
    found = []
    for line in hlo_text.splitlines():
        if not _HOST_SEND.search(line):
            continue
        meta_match = _METADATA.search(line)
        meta = meta_match.group(1) if meta_match else ""
        kind = _metadata_field(meta, "op_type") or "host_transfer"
        op_name = _metadata_field(meta, "op_name")
        source = None
        if (frame := _metadata_field(meta, "stack_frame_id")) and frame.isdigit():
            source = frames.get(int(frame))
        elif (file := _metadata_field(meta, "source_file")):
            source = f"{file}:{_metadata_field(meta, 'source_line') or '?'}"
        key = (kind, source, op_name)
        if key not in seen:
            seen.add(key)
            found.append(HostCallback(kind=kind, source=source, op_name=op_name))
    return found
