"""Code examples for the remedies: `kb/catalogue/snippets.yaml`, one per remedy id.

Loaded and checked against the remedy catalogue: every remedy has a snippet, no snippet names an
unknown remedy, and every snippet is Python that parses. The tests run or compile them (see the
file's header for what each `check` means).
"""

from __future__ import annotations

import ast
import re
import threading
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from oomkb.kb.errors import CatalogueError
from oomkb.kb.remedies import default_catalogue_dir, load_catalogue
from oomkb.kb.remedies.schema import Catalogue

__all__ = ["Snippet", "Snippets", "fill_limit", "fill_size", "fill_stated", "load_snippets", "snippet_markdown"]

FILE = "snippets.yaml"
MAX_LINES = 25


class Snippet(BaseModel):
    """A short Python example and how the tests prove that it works."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code: str
    check: Literal["run", "tpu", "flags", "parse"]
    call: str | None = Field(None, description="tpu: the function compiled deviceless")
    args: list[list[int | str]] | None = Field(None, description="tpu: [dim, ..., dtype] per argument")

    @model_validator(mode="after")
    def _tpu_needs_a_call(self) -> Snippet:
        if self.check == "tpu" and not (self.call and self.args):
            raise ValueError("a 'tpu' snippet needs `call` and `args`")
        return self


class Snippets(BaseModel):
    """Remedy id -> its snippet."""

    model_config = ConfigDict(frozen=True)

    by_remedy: dict[str, Snippet]

    def for_remedy(self, remedy_id: str) -> Snippet | None:
        return self.by_remedy.get(remedy_id)


def load_snippets(catalogue: Catalogue | None = None, dir: Path | str | None = None) -> Snippets:
    """The snippets in `dir` (default: the built-in catalogue folder), checked against
    `catalogue`'s remedies; any problem is a CatalogueError naming the file and the remedy."""
    cat = catalogue or load_catalogue()
    folder = Path(dir) if dir is not None else Path(cat.path) if catalogue else default_catalogue_dir()
    return _load(str((folder / FILE).resolve()), tuple(r.id for r in cat.remedies))


@lru_cache(maxsize=8)
def _load(path: str, remedy_ids: tuple[str, ...]) -> Snippets:
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise CatalogueError(f"catalogue file missing: {path}") from exc
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CatalogueError(f"{path}: cannot read: {exc}") from exc
    entries = raw.get("snippets") if isinstance(raw, dict) else None
    if not isinstance(entries, dict):
        raise CatalogueError(f"{path}: expected a mapping remedy id -> snippet under 'snippets'")
    snippets: dict[str, Snippet] = {}
    for rid, entry in entries.items():
        if rid not in remedy_ids:
            raise CatalogueError(f"{path}: snippet {rid!r}: no remedy with that id")
        try:
            snippet = Snippet.model_validate(entry)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise CatalogueError(f"{path}: snippet {rid!r}: {err['msg']}") from exc
        try:
            ast.parse(snippet.code, filename=f"{rid}.py")
        except SyntaxError as exc:
            raise CatalogueError(f"{path}: snippet {rid!r}: not valid Python: {exc}") from exc
        if len(snippet.code.strip().splitlines()) > MAX_LINES:
            raise CatalogueError(f"{path}: snippet {rid!r}: longer than {MAX_LINES} lines")
        snippets[rid] = snippet
    missing = [rid for rid in remedy_ids if rid not in snippets]
    if missing:
        raise CatalogueError(f"{path}: remedy {missing[0]!r} has no snippet")
    return Snippets(by_remedy=snippets)


def snippet_markdown(snippet: Snippet, indent: str = "") -> list[str]:
    """The snippet as the lines of a fenced Markdown code block."""
    body = snippet.code.strip("\n").splitlines()
    return [f"{indent}```{_fence_language(snippet.code)}", *(f"{indent}{line}" if line else "" for line in body),
            f"{indent}```"]


def _fence_language(code: str) -> str:
    """`python` for Python; `bash` for a command line (`python3 -m MaxText.train ... \\`), which is no Python."""
    return "python" if _parses(code) else "bash"


#: one parse at a time: CPython 3.11 before 3.11.8 can raise SystemError ("AST constructor recursion depth
#: mismatch") when two threads parse at once, and the server composes answers on a thread pool
_PARSE_LOCK = threading.Lock()


@lru_cache(maxsize=4096)
def _parses(code: str) -> bool:
    """Whether `code` is Python (a snippet's code repeats from answer to answer: parsed once)."""
    with _PARSE_LOCK:
        try:
            ast.parse(code)
        except SyntaxError:
            return False
    return True


# A snippet line that names the model's figures: `layers, batch, seq = 4, 2, 1024  # your model's figures here`.
_STATED_LINE = re.compile(r"^(?P<indent>\s*)(?P<names>[a-z_]+(?:\s*,\s*[a-z_]+)*)\s*=\s*"
                          r"(?P<values>[0-9.e+]+(?:\s*,\s*[0-9.e+]+)*)(?P<rest>\s*# your model's figures here.*)$",
                          re.MULTILINE)


#: No TPU core has more VMEM than this (v5e, v6e: 128 MiB): a larger size named is never written
#: into a VMEM limit (it is HBM the asker speaks of, or a typo).
MAX_VMEM_LIMIT = 128 << 20


def fill_size(code: str | None, literal: str | None, size_bytes: int | None) -> str | None:
    """`code` with its example size (`literal`, "64 * 1024 * 1024") replaced by the size the user
    named, rounded up to whole MiB; unchanged when there is none, the literal is not in it, or the
    size is more than any VMEM."""
    if not code or not literal or literal not in code or not size_bytes or size_bytes > MAX_VMEM_LIMIT:
        return code
    return code.replace(literal, f"{-(-size_bytes // (1 << 20))} * 1024 * 1024")


#: The example VMEM limit of the limit snippets, per kernel (bytes) and for every kernel (KiB).
_LIMIT_EXAMPLES = (("64 * 1024 * 1024", "{mib} * 1024 * 1024"), ("=65536", "={kib}"), ("(here 64 MiB)", "(here {mib} MiB)"))


def takes_limit(code: str | None, size_bytes: int | None) -> bool:
    """Whether `code` has an example VMEM limit that `fill_limit` would set to `size_bytes`."""
    return bool(code and size_bytes and size_bytes <= MAX_VMEM_LIMIT
                and any(example in code for example, _ in _LIMIT_EXAMPLES))


def fill_limit(code: str | None, size_bytes: int | None) -> str | None:
    """`code` with its example VMEM limit (64 MiB, per kernel or in KiB for all) replaced by the limit
    the user asks to set, rounded up to whole MiB."""
    if not code or not size_bytes or size_bytes > MAX_VMEM_LIMIT:
        return code
    mib = -(-size_bytes // (1 << 20))
    for example, filled in _LIMIT_EXAMPLES:
        code = code.replace(example, filled.format(mib=mib, kib=mib * 1024))
    return code


_SHARE_EXAMPLE = re.compile(r"""(MEM_FRACTION=|MEM_FRACTION"\] = ")\.45\b""")


def fill_share(code: str | None, processes: int | None) -> str | None:
    """`code` with its example share of a GPU per process (.45, for two) replaced by the share of
    the `processes` the user runs on one card: 90% of it split evenly, rounded down to the percent."""
    if not code or not processes or not 2 <= processes <= 16:
        return code
    share = f".{90 // processes:02d}"
    return _SHARE_EXAMPLE.sub(lambda m: m.group(1) + share, code)


#: a child process's environment that a snippet builds with a pool share ("env = dict(os.environ,
#: XLA_PYTHON_CLIENT_MEM_FRACTION=".7")"), and a share the conversation names ("MEM_FRACTION=0.7")
_CHILD_SHARE = re.compile(r"""(dict\(os\.environ,\s*XLA_PYTHON_CLIENT_MEM_FRACTION=")(0?\.\d+)(")""")
_SAID_SHARE = re.compile(r"MEM_FRACTION\s*[=:]?\s*[\"']?(0?\.\d+)\b", re.IGNORECASE)


def fill_child_share(code: str | None, said: str) -> str | None:
    """`code` with the pool share it gives the processes it starts replaced by the last share of at
    most 1 that the conversation `said` names (the value the user chose for them)."""
    shares = [m.group(1) for m in _SAID_SHARE.finditer(said or "") if 0 < float(m.group(1)) <= 1]
    if not code or not shares:
        return code
    return _CHILD_SHARE.sub(lambda m: f"{m.group(1)}{shares[-1]}{m.group(3)}", code)


#: the pool fraction a snippet sets in the environment ("XLA_PYTHON_CLIENT_MEM_FRACTION"] = "3.2")
_ENV_FRACTION = re.compile(r'XLA_PYTHON_CLIENT_MEM_FRACTION"\] = "(\d*\.?\d+)"')


def fill_fraction(code: str | None, fraction: float | None) -> str | None:
    """`code` with the pool fraction it sets (its example value, wherever it writes it: the variable,
    a Docker line, a comment) replaced by `fraction`, one the conversation computed. A fraction above 1
    only where the code turns CUDA unified memory on (without it, JAX cannot take more than the card)."""
    m = _ENV_FRACTION.search(code or "")
    if not code or fraction is None or m is None or not 0 < fraction <= 16:
        return code
    if fraction > 1 and "TF_FORCE_UNIFIED_MEMORY" not in code:
        return code
    example = m.group(1)
    value = f"{fraction:g}" if fraction >= 1 else f"{fraction:g}".lstrip("0")
    return re.sub(rf"(?<![\d.]){re.escape(example)}(?![\d])", value, code)


def fill_stated(code: str, stated: dict[str, float]) -> str:
    """`code` with the figures the user stated (a sizing read: layers, batch, seq, ...) put into its
    line of the model's figures, each name that was stated replaced, the others kept."""
    def fill(m: re.Match) -> str:
        names = [n.strip() for n in m.group("names").split(",")]
        values = [v.strip() for v in m.group("values").split(",")]
        if len(names) != len(values) or not any(n in stated for n in names):
            return m.group(0)
        new = [_number(stated[n]) if n in stated else v for n, v in zip(names, values)]
        return f"{m.group('indent')}{', '.join(names)} = {', '.join(new)}{m.group('rest')}"
    return _STATED_LINE.sub(fill, code)


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


#: a step's signature as the user writes it: "def train_step(params, opt_state, batch) -> (params, opt_state,
#: loss)", or its `def` line and a later "return params, opt_state, loss"
_SIGNATURE = re.compile(r"def\s+([A-Za-z_]\w*)\s*\(([^()]*)\)\s*(?:->\s*\(?([\w\s,]+?)\)?\s*(?:[:.;`]|$))?", re.M)
_RETURN = re.compile(r"\breturn\s+\(?([A-Za-z_][\w\s,]*?)\)?\s*(?:[;`\n]|$)")
#: the donation example a signature replaces: `train_step(state, batch)` donating its first argument
_DONATION_EXAMPLE = "def train_step(state, batch):"


def step_signature(text: str) -> tuple[str, list[str], list[str]] | None:
    """The last step signature `text` writes with what it returns: its name, its arguments' names
    (annotations and defaults dropped) and the names it returns; None without one."""
    found = None
    for m in _SIGNATURE.finditer(text or ""):
        args = [a.split(":")[0].split("=")[0].strip() for a in m.group(2).split(",")]
        args = [a for a in args if a.isidentifier() and a not in ("self",)]
        outs = m.group(3)
        if outs is None:
            ret = _RETURN.search(text, m.end())
            outs = ret.group(1) if ret else None
        names = [o.strip() for o in (outs or "").split(",") if o.strip().isidentifier()]
        if args and names:
            found = (m.group(1), args, names)
    return found


def fill_signature(code: str | None, text: str) -> tuple[str | None, str | None]:
    """The donation example (`train_step(state, batch)` donating its first argument) written for the
    step `text` states: its own name and arguments, donating those it returns anew (the buffers XLA
    can write the new values into), called in a loop that rebinds them; with the `donate_argnums` it
    uses. (`code`, None) when `text` states no such step or it returns none of its arguments."""
    sig = step_signature(text)
    if not code or _DONATION_EXAMPLE not in code or sig is None:
        return code, None
    name, args, outs = sig
    donated = [i for i, a in enumerate(args) if a in outs]
    if not donated:
        return code, None
    argnums = f"({', '.join(map(str, donated))}{',' if len(donated) == 1 else ''})"
    rest = [a for i, a in enumerate(args) if i not in donated]
    loop = (f"for {rest[0]} in batches:  # your data loop" if len(rest) == 1  # (the one argument not returned)
            else "for _ in range(num_steps):  # your loop")
    call_args = ", ".join(args)
    lines = [
        "import functools",
        "import jax",
        "",
        f"@functools.partial(jax.jit, donate_argnums={argnums})  # {', '.join(args[i] for i in donated)}: "
        "returned anew, written into the old buffers",
        f"def {name}({call_args}):",
        f"    ...  # your step as it is: returns {', '.join(outs)}",
        "",
        loop,
        f"    {', '.join(outs)} = {name}({call_args})  # rebind at once: the donated inputs are gone after the call",
        "",
        "# to check: the bytes written in place, about the donated arguments' size",
        f"# print(jax.jit({name}, donate_argnums={argnums}).lower({call_args}).compile()"
        ".memory_analysis().alias_size_in_bytes)",
    ]
    return "\n".join(lines) + "\n", f"donate_argnums={argnums}"

