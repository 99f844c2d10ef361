"""Verdicts, remedy order and computed settings from the user's own figures, as data.

`kb/catalogue/evidence_rules.yaml` holds rules on the facts (the same declarative conditions as
the remedy catalogue, kb/remedies/). A rule that holds may give the answer's first sentence (a
verdict with the user's numbers), put remedies first (`lead`), drop remedies its figures make
pointless (`exclude`), and fill a remedy's snippet with a computed value. The first rule that
holds and has a verdict gives the verdict; every rule that holds orders and excludes.

Settings are computed here, from the evidence and the TPU generation table
(`diagnostics/tpu_generations.yaml`): the `vmem_limit_bytes` to set is the reported need rounded
up to a whole MiB, never above the generation's physical VMEM.

The same file lists the markers of other frameworks' out-of-memory errors (PyTorch, TensorFlow,
plain CUDA): for those the assistant says what it recognised and that the guides are about
JAX/XLA, instead of grounding an answer in guides that do not apply.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from oomkb.diagnostics.parse import load_signatures
from oomkb.diagnostics.tpu import generations
from oomkb.kb.remedies import load_catalogue
from oomkb.kb.remedies.conditions import evaluate
from oomkb.kb.remedies.rendering import best_variant, display_values
from oomkb.kb.remedies.schema import Catalogue, Condition
from oomkb.kb.remedies.validation import CatalogueValidator, _first_error
from oomkb.kb.catalogue_file import read_yaml
from oomkb.kb.errors import CatalogueError
from oomkb.kb.language import FALLBACK, join_sentences
from oomkb.kb.question import load_intents

__all__ = ["EvidenceRules", "Framework", "Outcome", "Rule", "derive_facts", "load_rules"]

FILE = "evidence_rules.yaml"
MiB = 1 << 20
# How much of a text the marker search reads (markers sit in the error line, near the top or
# the bottom of a pasted log); plain substring tests, so linear in this bound.
_MARKER_WINDOW = 200_000
_TEXT_FACT_CHARS = 300


class SnippetFill(BaseModel):
    """Replace a literal of a remedy's snippet with a computed fact (as a plain number), or
    with fixed text (`text`, e.g. to drop a comment that names the toy value)."""

    model_config = ConfigDict(extra="forbid")

    replace: str = Field(min_length=1)
    fact: str | None = None
    text: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> SnippetFill:
        if (self.fact is None) == (self.text is None):
            raise ValueError("a snippet fill needs exactly one of: fact, text")
        return self


class Rule(BaseModel):
    """One rule: when it holds, its verdict, the remedies it puts first and those it drops."""

    model_config = ConfigDict(extra="forbid")

    id: str
    category: list[str] = Field(default_factory=list, description="empty: any category")
    when: Condition
    verdict: list[dict[str, str]] = Field(default_factory=list,
                                          description="variants, most specific first")
    cite: str | None = None
    lead: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    snippets: dict[str, list[SnippetFill]] = Field(default_factory=dict)
    supersedes: list[str] = Field(default_factory=list, description=(
        "lines of arithmetic on the question's figures (kb/sizing.py subjects), or short answers "
        "(figures.yaml ids), that the rule's measured figures contradict (\"the pool is full\" beside a pool "
        "with room) or say again: left out"))
    settles: list[str] = Field(default_factory=list, description=(
        "what the asker tried (intents.yaml `tried` ids) that the verdict already judges: its general "
        "explanation is not shown beside it"))
    not_memory: bool = Field(default=False, description=(
        "the verdict says the error is not memory running out (a library that did not start): no "
        "out-of-memory diagnosis line and no measuring of memory after it"))
    not_failure: bool = Field(default=False, description=(
        "the verdict says the text read is a warning, not the failure (a pass's estimate that still "
        "fits): no \"ran out of memory\" diagnosis line after it"))
    whole_fix: bool = Field(default=False, description=(
        "the verdict says what to change and where (a setting the asker put too late): no remedy steps "
        "and no measuring plan after it, which would send the asker profiling a cause already found"))
    with_next_verdict: bool = Field(
        default=False, description="its verdict is followed by the next holding rule's (a second, "
                                   "separate finding, such as what the largest buffer is)")

    @field_validator("category", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("verdict", mode="before")
    @classmethod
    def _variants(cls, value: Any) -> Any:
        return [value] if isinstance(value, dict) else value


class TextFact(BaseModel):
    """A text fact read from a pasted log: the rest of the line after `marker`, up to the first of
    `stops` (a log line's own ending; the quote that closes it where it is quoted in a question)."""

    model_config = ConfigDict(extra="forbid")

    fact: str
    marker: str = Field(min_length=1)
    stops: list[str] = Field(default_factory=list)
    beside_evidence: bool = Field(default=False, description=(
        "read only beside other evidence (a log's facts): a setting named in a question alone is asked about"))
    flag: bool = Field(default=False, description=(
        "the fact is true where the marker is found, whatever follows it (a setting said: \"PREALLOCATE=false\")"))
    every: bool = Field(default=False, description=(
        "every value the text shows after the marker, in order and once each, joined with \", \" (the GPUs a log names one line each)"))


#: How far before a value the words proposing it may stand ("if I set XLA_PYTHON_CLIENT_MEM_FRACTION=.95").
PROPOSED_REACH = 40


class CountFact(BaseModel):
    """A number the asker states in the question ("over 8 chips", "v5e-8", ".95"): the first
    match of any pattern (its first group), read from the question only, never from a log."""

    model_config = ConfigDict(extra="forbid")
    fact: str
    patterns: list[str] = Field(min_length=1)
    min: int = 1
    max: int = 1 << 20
    multiplier: int = Field(default=1, ge=1, description="the fact's value per unit read (GiB: 1073741824)")
    decimals: bool = Field(default=False, description="the group is the digits after a decimal point "
                                                      "(.95 of XLA_PYTHON_CLIENT_MEM_FRACTION=.95): a fraction")
    divisor: int = Field(default=1, ge=1, description="units read per device (a v4-32 slice name counts "
                                                     "32 TensorCores: 16 chips, each one JAX device)")
    proposed: list[str] = Field(default_factory=list, description=(
        "words just before the value that propose it rather than state it (\"if I set X=.95, will it "
        "pass?\"): a value so written is not read"))

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if re.compile(pattern).groups < 1:
                raise ValueError(f"pattern {pattern!r} needs a group for the number")
        return value


class Framework(BaseModel):
    """Another framework's out-of-memory error: how to recognise it and what to call it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    markers: list[str] = Field(min_length=1)
    name: dict[str, str]
    pointer: dict[str, str] = Field(default_factory=dict, description=(
        "where to look instead, outside the guides and said to be (its own documentation, its setting)"))
    decisive: list[str] = Field(default_factory=list, description=(
        "markers that decide even beside XLA's own wording, which the framework shares (TensorFlow's "
        "TPUEstimator printing 'Ran out of memory in memory space hbm'); not beside a JAX library named"))


class Outcome(BaseModel):
    """What the rules make of one set of facts."""

    verdict: str | None = None
    cite: str | None = None
    rules: list[str] = Field(default_factory=list, description="ids of the rules that hold")
    lead: list[str] = Field(default_factory=list)
    exclude: set[str] = Field(default_factory=set)
    snippets: dict[str, list[SnippetFill]] = Field(default_factory=dict)
    settled: set[str] = Field(default_factory=set, description="tried items the verdict judges")
    superseded: set[str] = Field(default_factory=set, description="sizing subjects the rules' figures supersede")
    not_memory: bool = Field(default=False, description="the verdict's rule says memory is not the cause")
    not_failure: bool = Field(default=False, description="the verdict's rule says the text is not the failure")
    whole_fix: bool = Field(default=False, description="the verdict's rule says what to change: nothing after it")


class EvidenceRules:
    """The validated rules and framework markers."""

    def __init__(self, rules: list[Rule], frameworks: list[Framework], jax_markers: list[str],
                 catalogue: Catalogue, text_facts: list[TextFact] = (),
                 count_facts: list[CountFact] = (), no_jax: list[str] = (), jax_names: list[str] = ()):
        self.rules = rules
        self.no_jax = [re.compile(p, re.IGNORECASE) for p in no_jax]
        self.text_facts = list(text_facts)
        # each spec, its patterns, and the words that propose a value rather than state it (or None)
        self.count_facts = [(c, [re.compile(p, re.IGNORECASE) for p in c.patterns],
                             re.compile("|".join(c.proposed), re.IGNORECASE) if c.proposed else None)
                            for c in count_facts]
        self.frameworks = frameworks
        self.jax_markers = [m.lower() for m in jax_markers]
        self.jax_names = [m.lower() for m in jax_names]
        self.catalogue = catalogue

    # -- the rules ----------------------------------------------------------------------------

    def apply(self, facts: Mapping[str, Any], category: str, language: str,
              format_bytes: Callable[[int], str]) -> Outcome:
        """The verdict (in `language`) and the ordering of the rules that hold for `facts`."""
        out = Outcome()
        lang = self.catalogue.language(language)
        shown = display_values(self.catalogue, facts, format_bytes)
        more = False  # the verdict asks for the next holding rule's after it
        findings = 0  # (at most MAX_FINDINGS verdicts in one answer, each asking for the next)
        for rule in self.rules:
            if rule.category and category not in rule.category:
                continue
            if not evaluate(rule.when, facts):
                continue
            out.rules.append(rule.id)
            if (out.verdict is None or more) and rule.verdict:
                text = best_variant(rule.verdict, lang, shown)
                if text is not None and out.verdict is None:
                    out.verdict, out.cite, more = text, rule.cite, rule.with_next_verdict
                elif text is not None:
                    out.verdict = join_sentences([out.verdict, text], lang)
                    more = rule.with_next_verdict and findings + 1 < MAX_FINDINGS
                if text is not None:
                    findings += 1
                    out.settled |= set(rule.settles)
                    out.not_memory = out.not_memory or rule.not_memory
                    out.not_failure = out.not_failure or rule.not_failure
                    out.whole_fix = out.whole_fix or rule.whole_fix
            out.superseded |= set(rule.supersedes)
            out.lead += [r for r in rule.lead if r not in out.lead]
            out.exclude |= set(rule.exclude)
            for remedy_id, fills in rule.snippets.items():
                if all(f.fact is None or facts.get(f.fact) is not None for f in fills):
                    out.snippets.setdefault(remedy_id, fills)
        return out

    @staticmethod
    def order(chosen: list, outcome: Outcome, limit: int) -> list:
        """`chosen` (objects with an `id`) without the excluded ones, the lead ones first in the
        rules' order, the rest in their own order; at most `limit`."""
        kept = [c for c in chosen if c.id not in outcome.exclude]
        rank = {rid: n for n, rid in enumerate(outcome.lead)}
        kept.sort(key=lambda c: rank.get(c.id, len(rank)))  # stable: the rest keep their order
        return kept[:limit]

    @staticmethod
    def fill_snippet(code: str | None, fills: list[SnippetFill] | None,
                     facts: Mapping[str, Any]) -> str | None:
        """`code` with the rule's computed values in place of its toy ones."""
        for fill in fills or []:
            if code and fill.replace in code:
                value = fill.text if fill.text is not None else str(facts[fill.fact])
                code = code.replace(fill.replace, value, 1)
        return code

    def read_text_facts(self, facts: Mapping[str, Any], *texts: str | None) -> dict[str, Any]:
        """`facts` with the text facts that the pasted texts show (the first text that has one)."""
        out = dict(facts)
        for spec in self.text_facts:
            if spec.beside_evidence and not facts:
                continue
            for text in texts:
                window = (text or "")[:_MARKER_WINDOW]
                at = window.find(spec.marker)
                if at < 0:
                    continue
                if spec.flag:
                    out.setdefault(spec.fact, True)
                    break
                values: list[str] = []
                while at >= 0:
                    value = self._value_after(window, at + len(spec.marker), spec.stops)
                    if value and value not in values:
                        values.append(value)
                    at = window.find(spec.marker, at + len(spec.marker)) if spec.every else -1
                if values:
                    out.setdefault(spec.fact, ", ".join(values)[:_TEXT_FACT_CHARS])
                    break
        return out

    @staticmethod
    def _value_after(window: str, start: int, stops: list[str]) -> str:
        """The rest of the line from `start`, up to the first of `stops`."""
        end = window.find("\n", start)
        value = window[start: end if end >= 0 else len(window)]
        cut = [value.index(stop) for stop in stops if stop in value]
        if cut:
            value = value[: min(cut)]
        return value.strip().rstrip(".,; ")[:_TEXT_FACT_CHARS]

    @staticmethod
    def read_requested_shape(facts: Mapping[str, Any], log: str | None, question: str | None = None) -> dict[str, Any]:
        """`facts` with the shape whose bytes are exactly the failed request, where the log prints it
        (a GPU log names the instruction that failed, `f32[500,64,128,128]`, beside its `op_name`)
        and no allocation listing named the largest buffer already; and, when the question writes
        that shape's first dimension ("frames[:500]"), that count: every input goes through at once."""
        out = dict(facts)
        requested = out.get("requested_bytes")
        if not (isinstance(requested, int) and requested > 0 and log) or out.get("largest_allocation_shape"):
            return out
        sizes = load_signatures().dtype_bytes
        window = log[:_MARKER_WINDOW]
        for m in _LISTED_SHAPE.finditer(window):
            dtype, dims = m.group(1), m.group(2)
            if dtype not in sizes or not dims.strip():
                continue
            if sizes[dtype] * math.prod(int(d) for d in dims.split(",") if d.strip()) != requested:
                continue
            out["requested_shape"] = f"{dtype}[{dims.replace(' ', '')}]"
            op = _OP_NAME.search(window, m.end(), m.end() + REQUESTED_OP_REACH)
            tail = _op_tail(op.group(1)) if op else None
            if tail:
                out["requested_op_tail"] = tail
            leading = int(dims.split(",")[0])
            if leading >= 2 and re.search(rf"(?<![\d.,]){leading}(?![\d]|[.,]\d)", question or ""):
                out.update(items_named=leading, requested_leads_with_items=True)
            break
        return out

    def read_count_facts(self, facts: Mapping[str, Any], question: str | None) -> dict[str, Any]:
        """`facts` with the counts the question states (devices named: "sobre 8 chips")."""
        out = dict(facts)
        text = (question or "")[:_TEXT_FACT_CHARS * 10]
        for spec, patterns, proposed in self.count_facts:
            for pattern in patterns:
                m = pattern.search(text)
                if m and proposed and (proposed.search(text, max(0, m.start() - PROPOSED_REACH), m.start())
                                       or proposed.search(text, m.end(), m.end() + PROPOSED_AFTER)):
                    continue  # proposed, not set ("si je mets X=.95, ça passe ?", "=.3으로 하면")
                if m and m.group(1).isdigit() and spec.decimals:
                    out.setdefault(spec.fact, float(f"0.{m.group(1)}"))
                    break
                if m and m.group(1).isdigit() and spec.min <= int(m.group(1)) // spec.divisor <= spec.max:
                    out.setdefault(spec.fact, int(m.group(1)) // spec.divisor * spec.multiplier)
                    break
                if (m and spec.multiplier > 1 and spec.divisor == 1 and re.fullmatch(r"\d+\.\d+", m.group(1))
                        and spec.min <= float(m.group(1)) <= spec.max):  # a size with decimals ("184.29 GiB per GPU")
                    out.setdefault(spec.fact, int(float(m.group(1)) * spec.multiplier))
                    break
        return out

    # -- other frameworks ---------------------------------------------------------------------

    def other_framework(self, *texts: str | None) -> Framework | None:
        """The framework whose out-of-memory error `texts` show, when none of them shows JAX or
        XLA (a JAX program that imports torch is still a JAX question)."""
        low = "\n".join((t or "")[:_MARKER_WINDOW] for t in texts).lower()
        # "I don't use JAX": a JAX named only to say it is not used is no JAX marker
        said_without = [p for p in self.no_jax if p.search(low)]
        if said_without:
            low = said_without[0].sub(" ", low)
            for p in said_without[1:]:
                low = p.sub(" ", low)
        if any(m in low for m in self.jax_markers):
            # XLA's wording is shared (TensorFlow on a TPU prints it too): a framework's decisive
            # marker still decides, unless a JAX library is named
            if not any(m in low for m in self.jax_names):
                for framework in self.frameworks:
                    if any(m.lower() in low for m in framework.decisive):
                        return framework
            return None
        for framework in self.frameworks:
            if any(m.lower() in low for m in framework.markers):
                return framework
        return None

    def names_jax(self, *texts: str | None) -> bool:
        """Whether `texts` (the asker's own words) name JAX or one of its libraries, other than to
        say it is not used: another framework's error in a process that also runs JAX."""
        low = "\n".join((t or "")[:_MARKER_WINDOW] for t in texts).lower()
        for p in self.no_jax:
            low = p.sub(" ", low)
        return any(re.search(rf"(?<![a-z_]){re.escape(m)}(?![a-z_])", low) for m in self.jax_names)

    def framework_name(self, framework: Framework, language: str) -> str:
        return framework.name.get(language) or framework.name[FALLBACK]


# --------------------------------------------------------------------------- derived facts


#: a compiled program named after one operation ("jit_subtract", "jit__where")
_ONE_OP_PROGRAM = re.compile(r"jit_+([a-z][a-z_]*)")
#: JAX's default share of a GPU for its pool, and the most a fraction should be set to
DEFAULT_POOL_SHARE, MOST_POOL_SHARE = 0.75, 0.95  # (one place for the default share in these facts)


def _pool_cap(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The GPU allocator's own stats (`Limit:`, `InUse:`) and the failed request: what the pool
    needed (in use + the request), the card's memory as CUDA reports it (the limit over the share
    in effect: the asker's XLA_PYTHON_CLIENT_MEM_FRACTION, else 75 %), and the smallest fraction,
    in steps of .05 with a little room, whose pool holds that need (absent above .95)."""
    limit, in_use, requested = (facts.get(k) for k in ("pool_limit_bytes", "pool_in_use_bytes", "requested_bytes"))
    if not all(isinstance(v, int) and v > 0 for v in (limit, in_use, requested)) or facts.get("backend") == "tpu":
        return {}  # (a TPU's allocator limit is the chip's HBM, no share of a card)
    named = facts.get("mem_fraction_named_fraction")
    share = named if isinstance(named, float) and 0 < named < 1 else DEFAULT_POOL_SHARE
    card, need = int(limit / share), in_use + requested
    out: dict[str, Any] = {"pool_need_bytes": need, "card_reported_bytes": card}
    fraction = _fraction_holding(need, card)
    if need > limit and fraction is not None:
        out.update(pool_fraction_to_fit=f"{fraction:.2f}".lstrip("0"), pool_at_fraction_bytes=int(fraction * card))
    return out


def _fraction_holding(need: int, card: int) -> float | None:
    """The smallest XLA_PYTHON_CLIENT_MEM_FRACTION, in steps of .05 with a little room, whose pool on a
    `card` of that many bytes holds `need`; None above .95."""
    fraction = math.ceil((need / card + 0.03) * 20) / 20
    return fraction if fraction <= MOST_POOL_SHARE else None


def _remat_over_pool(facts: Mapping[str, Any]) -> dict[str, Any]:
    """XLA's rematerialization warning with a peak above JAX's pool on the card named: by how much,
    and the smallest fraction (steps of .05, a little room) whose pool holds it (absent above .95)."""
    need, pool, card = (facts.get(k) for k in ("remat_reduced_to_bytes", "gpu_pool_bytes", "gpu_memory_named_bytes"))
    if not all(isinstance(v, int) and v > 0 for v in (need, pool, card)):
        return {}
    if not pool < need <= card:
        return {"remat_card_multiple": round(need / card, 1)}
    out: dict[str, Any] = {"remat_over_pool_bytes": need - pool, "remat_card_multiple": round(need / card, 1)}
    fraction = _fraction_holding(need, card)
    if fraction is not None:
        out.update(remat_fraction_to_fit=f"{fraction:.2f}".lstrip("0"), remat_pool_at_fraction_bytes=int(fraction * card))
    return out


#: the element sizes a square matrix's failed request is tried against, most common first
_SQUARE_ITEMSIZES = ((4, "float32"), (8, "float64"), (2, "bfloat16/float16"))
#: the smallest side read as a square matrix (smaller ones are too likely a coincidence)
_SQUARE_MIN_SIDE = 2000


def _square_request(facts: Mapping[str, Any]) -> dict[str, Any]:
    """A failed request that is exactly n × n elements of 4 (8, 2) bytes, n not a multiple of 32: one
    dense square matrix over n items (all pairs of something), whatever the batch."""
    requested = facts.get("requested_bytes")
    if not isinstance(requested, int) or requested <= 0:
        return {}
    for itemsize, dtype in _SQUARE_ITEMSIZES:
        if requested % itemsize:
            continue
        side = math.isqrt(requested // itemsize)
        # (a side that is a multiple of 32 is as likely a tensor's round dimensions, [8, 4096, 12800], as a square)
        if side * side * itemsize == requested and side >= _SQUARE_MIN_SIDE and side % 32:
            return {"requested_square_side": side, "requested_square_dtype": dtype}
    return {}


def _outside_framework(facts: Mapping[str, Any]) -> dict[str, Any]:
    """Another framework's OOM (PyTorch's): the device memory held outside that framework's own
    allocator, and the pool JAX would take by default on that card (75 %). PyTorch's newer message
    says what its process uses beyond its own allocator; the older one leaves the card's total less
    what PyTorch reserved and what was free (other processes included)."""
    total = facts.get("available_bytes")
    if not isinstance(total, int) or total <= 0:
        return {}
    used, allocated, unallocated = (facts.get(k) for k in ("process_used_bytes", "framework_allocated_bytes",
                                                            "framework_unallocated_bytes"))
    reserved, free = facts.get("framework_reserved_bytes"), facts.get("free_bytes")
    if all(isinstance(v, int) for v in (used, allocated, unallocated)):
        outside = used - allocated - unallocated
    elif isinstance(reserved, int) and isinstance(free, int):
        outside = total - reserved - free
    else:
        return {}
    if outside <= 0:
        return {}
    return {"outside_framework_bytes": outside, "outside_framework_fraction": outside / total,
            "jax_default_pool_bytes": int(total * DEFAULT_POOL_SHARE)}


def _generation(name: str | None):
    if not name:
        return None
    table = generations()
    if name in table:
        return table[name]
    low = name.lower()
    for gen in table.values():
        if low in (a.lower() for a in gen.aliases) or low == gen.device_kind.lower():
            return gen
    return None


def vmem_table() -> str:
    """Physical VMEM per core of every generation with a figure, grouped by size, as one
    language-neutral line: `v2, v3, v4: 16 MiB · v5p, TPU7x: 64 MiB · v5e, v6e: 128 MiB`."""
    groups: dict[int, list[str]] = {}
    for gen in generations().values():
        if gen.vmem_bytes:
            groups.setdefault(gen.vmem_bytes, []).append(gen.name)
    return " · ".join(f"{', '.join(names)}: {size // MiB} MiB" for size, names in sorted(groups.items()))


#: A last dimension this large is a vocabulary (the smallest common LM vocabularies are 32k).
VOCAB_MIN = 32_000
#: Two equal trailing dimensions this large are a sequence x sequence matrix (attention scores).
SEQUENCE_MIN = 1024
#: A loop outside autodiff stacking at least this many per-step outputs is named so (a shorter stack
#: could be anything a loop builds).
LOOP_STEPS_MIN = 64
_DIMS = re.compile(r"\[(\d+(?:,\d+)*)\]")
#: an op name that is an argument of the program: a parameter's path ("params_and_buffers['…w13_weight']",
#: "params['dense']['kernel']", "args[0]"), not an operation
_ARGUMENT_OP = re.compile(r"^\s*(?:params\w*|args|state\w*|weights?|variables|model\w*)\s*\[|^\s*(?:params|args)\w*(?:\.|$)")


def _allocation_kind(shape: Any, op_name: Any, label: Any = None) -> dict[str, Any]:
    """What the largest allocation's shape says it is: attention scores (batch, heads, S, S) or
    logits (…, vocabulary); nothing when the shape is not telling."""
    m = _DIMS.search(str(shape or ""))
    if not m:
        return {}
    dims = [int(d) for d in m.group(1).split(",")]
    op = str(op_name or "").lower()
    # forward mode over reverse mode (`jax.hessian` is jacfwd(jacrev(f))): the leading axis is the
    # batch of tangents, one per input element, that every intermediate is multiplied by
    if len(dims) >= 2 and ("jvp(transpose(jvp(" in op or "jvp(jvp(" in op):
        return {"largest_allocation_kind": "forward_tangents", "largest_allocation_steps": dims[0]}
    # a `copy` instruction whose op is one of the program's arguments (a parameter's path, "params[...]"):
    # the argument rewritten into the layout or sharding the program chose, alive twice
    if re.match(r"\s*copy[.\d]*\s*=\s*copy\(", str(label or "").lower()) and _ARGUMENT_OP.search(op):
        return {"largest_allocation_kind": "argument_copy"}
    # written slice by slice inside a loop: under autodiff, a layer scan's residuals for the backward
    # pass; otherwise a scan or fori_loop stacking one output per iteration
    stacked = "dynamic_update_slice" in op or "dynamic-update-slice" in str(label or "").lower()
    if len(dims) >= 2 and "while" in op and stacked:
        if "jvp(" in op or "transpose(" in op:
            return {"largest_allocation_kind": "scan_residuals", "largest_allocation_steps": dims[0]}
        if dims[0] >= LOOP_STEPS_MIN:
            return {"largest_allocation_kind": "loop_outputs", "largest_allocation_steps": dims[0]}
    if (len(dims) >= 3 and dims[-1] == dims[-2] and dims[-1] >= SEQUENCE_MIN
            and not any(w in op for w in ("lm_head", "conv"))):  # an image is H x W, not S x S
        if re.match(r"\W*pred\[", str(shape or "").lower()):  # booleans: which positions attend, a mask
            return {"largest_allocation_kind": "attention_mask", "largest_allocation_seq": dims[-1]}
        return {"largest_allocation_kind": "attention_scores", "largest_allocation_seq": dims[-1]}
    # logits are real numbers of a model's head: not a complex (an FFT's) or an integer array, nor a
    # broadcast or an FFT that a vmap widened ("broadcast_in_dim[shape=(40, 11, 100, 52729)]")
    if (len(dims) >= 2 and dims[-1] >= VOCAB_MIN and dims[-1] != dims[-2]
            and re.match(r"\s*(?:f|bf)\d", str(shape or "").lower())
            and not any(w in op for w in ("fft", "broadcast_in_dim", "iota"))):
        return {"largest_allocation_kind": "vocab_logits", "largest_allocation_vocab": dims[-1]}
    return {}


def _holds_whole_batch(shape: Any, batch: Any, devices: Any) -> bool:
    """Whether a per-device buffer of a program on several devices leads with the whole batch the
    asker states (or, stacked by a layer scan, has it second: [layers, batch, ...])."""
    m = _DIMS.search(str(shape or ""))
    if not (m and isinstance(batch, int) and batch > 1 and isinstance(devices, int) and devices > 1):
        return False
    dims = [int(d) for d in m.group(1).split(",")]
    return len(dims) >= 2 and (dims[0] == batch or (len(dims) >= 3 and dims[1] == batch))


_LAYOUT = re.compile(r"\[(\d+(?:,\d+)*)\]\{(\d+(?:,\d+)*):T\((\d+),(\d+)\)")
#: The minor-most dimension is named as the cause where its tile pads it at least this many times.
MINOR_PADDING_MIN = 4
#: The second-minor one, padded to the tile's rows (8 in f32, 16 or 4 in narrower types), where that is at least this
SECOND_PADDING_MIN = 2


def _padded_minor(shape: Any) -> dict[str, Any]:
    """The minor-most dimension of the worst-padded buffer and what its tile pads it to, where that
    one dimension is the padding ("f32[4,4096,1024,3]{3,2,1,0:T(8,128)}": 3 is stored as 128)."""
    m = _LAYOUT.search(str(shape or ""))
    if not m:
        return {}
    dims = [int(d) for d in m.group(1).split(",")]
    layout = [int(d) for d in m.group(2).split(",")]  # minor to major
    tile = int(m.group(4))
    if not layout or layout[0] >= len(dims) or dims[layout[0]] <= 0:
        return {}
    minor = dims[layout[0]]
    padded = -(-minor // tile) * tile
    if padded >= MINOR_PADDING_MIN * minor:
        return {"padding_minor_dim": minor, "padding_minor_padded": padded}
    # the second-minor dimension padded to the tile's rows ("bf16[2048,1,2048,128]{0,1,3,2:T(4,128)}":
    # the size-1 axis stored as 4)
    rows = int(m.group(3))
    if len(layout) < 2 or layout[1] >= len(dims) or dims[layout[1]] <= 0:
        return {}
    second = dims[layout[1]]
    stored = -(-second // rows) * rows
    if stored < SECOND_PADDING_MIN * second:
        return {}
    return {"padding_second_dim": second, "padding_second_padded": stored, "padding_second_axis": layout[1],
            "padding_tile": f"T({rows},{tile})"}


PROPOSED_AFTER = 8  # characters after a value where a postposed condition says it is proposed ("=.3으로 하면")
#: the most verdicts one answer chains ("the donation went to the batch", "those buffers take 162 KiB",
#: "the largest buffer is ..."): a fourth finding would bury the first
MAX_FINDINGS = 3

#: an instruction's metadata in a log, and how far after a shape it is looked for
_OP_NAME = re.compile(r'op_name="([^"]+)"')
REQUESTED_OP_REACH = 2000
#: a shape as JAX prints it in a donation warning ("int32[128]", "ShapedArray(float32[4096,14336])")
_LISTED_SHAPE = re.compile(r"(?<![a-z0-9_])([a-z][a-z0-9_]{1,20})\[([\d,\s]*)\]")
_CUDNN_USAGE = re.compile(r"(\d{1,20}) bytes free, (\d{1,20}) bytes total")


def _op_tail(op: str) -> str | None:
    """The last two parts of an op_name, without the jit wrappers and bracketed parameters
    ("jit(step)/jit(main)/resnet/conv_1/conv_general_dilated[...]" -> "conv_1/conv_general_dilated")."""
    parts = [p for p in re.sub(r"\[[^\]]*\]", "", op).split("/") if p and not p.startswith(("jit(", "pjit("))]
    return "/".join(parts[-2:]) if parts else None


_FFT_LIMIT = re.compile(r"exceeds the memory limit of (\d{1,20})")


def _fft_split(facts: Mapping[str, Any]) -> dict[str, Any]:
    """A batched cuFFT plan whose work area is over XLA's cap for one plan: the cap, the calls the
    batch splits into and the most transforms one call can take."""
    limit = _FFT_LIMIT.search(str(facts.get("fft_plan_limit_said") or ""))
    requested = facts.get("requested_bytes")
    if not limit or not (isinstance(requested, int) and requested > 0) or int(limit.group(1)) <= 0:
        return {}
    cap = int(limit.group(1))
    out: dict[str, Any] = {"fft_calls": -(-requested // cap), "fft_cap_bytes_exact": cap,
                           "fft_asked_bytes_exact": requested}  # (in bytes, as the log writes them)
    batch = str(facts.get("fft_batch_count") or "")
    if batch.isdigit() and int(batch) > 0:
        out["fft_transforms"] = int(batch)
        out["fft_rows_per_call"] = int(batch) * cap // requested
    return out


def derive_facts(facts: Mapping[str, Any], generation: str | None = None) -> dict[str, Any]:
    """`facts` with the figures the rules compare: the TPU generation's physical VMEM and the
    VMEM limit to set (the need rounded up to a whole MiB, capped at the physical VMEM)."""
    out = dict(facts)
    gen = _generation(generation or out.get("target_generation"))
    if gen is not None:
        out["tpu_generation"] = gen.name
    out.update(_allocation_kind(out.get("largest_allocation_shape"), out.get("largest_allocation_op"),
                                out.get("largest_allocation_label")))
    out.update(_padded_minor(out.get("padding_worst_shape")))
    gpu, requested = out.get("gpu_memory_named_bytes"), out.get("requested_bytes")
    if isinstance(gpu, int) and gpu > 0:
        if isinstance(requested, int) and requested > 0:
            out["requested_gpu_share_fraction"] = requested / gpu
        # JAX's pool: the XLA_PYTHON_CLIENT_MEM_FRACTION the asker set, else its default 0.75
        named = out.get("mem_fraction_named_fraction")
        out["gpu_pool_bytes"] = int(gpu * (named if isinstance(named, float) and 0 < named < 1 else DEFAULT_POOL_SHARE))
        limit = out.get("pool_limit_bytes")
        if isinstance(limit, int) and 0 < limit <= gpu:  # the allocator's own "Limit:": the pool as it was
            out["gpu_pool_bytes"] = limit
    out.update(_remat_over_pool(out))
    out.update(_square_request(out))
    asked, block = out.get("requested_bytes"), out.get("available_bytes")
    if out.get("memory_space") == "shared" and isinstance(asked, int) and isinstance(block, int) and asked > block > 0:
        out["shared_short_bytes"] = asked - block  # what a thread block's shared memory lacks
    usage = _CUDNN_USAGE.search(str(out.get("cudnn_memory_usage") or ""))
    if usage and 0 <= int(usage.group(1)) <= int(usage.group(2)) and int(usage.group(2)) > 0:
        # "46637514752 bytes free, 47587131392 bytes total": what the card had when cuDNN failed
        free, total = int(usage.group(1)), int(usage.group(2))
        out.update(cudnn_free_bytes=free, cudnn_total_bytes=total, free_share_fraction=free / total)
        used, pool = total - free, int(DEFAULT_POOL_SHARE * total)
        if 0 <= used - pool <= 1.5 * (1 << 30):  # what is in use is JAX's own default pool and the CUDA context
            out.update(cudnn_used_bytes=used, cudnn_own_pool_bytes=pool)
    out.update(_fft_split(out))
    program = _ONE_OP_PROGRAM.fullmatch(str(out.get("executable_name") or ""))
    if program:  # "jit_subtract": the program JAX compiles for one operation called outside jit
        out["eager_operation"] = program.group(1)
    out.update(_pool_cap(out))
    out.update(_outside_framework(out))
    tail = _op_tail(str(out.get("largest_allocation_op") or ""))
    if tail:  # ".../mesh2grid_gnn/concatenate[dimension=2]": "mesh2grid_gnn/concatenate"
        out["largest_allocation_op_tail"] = tail
    sizes = load_signatures().dtype_bytes  # (one table of element sizes, the parser's)
    listed = [(m.group(1), m.group(2)) for m in _LISTED_SHAPE.finditer(str(out.get("donation_unusable") or ""))
              if m.group(1) in sizes]
    if listed:  # "int32[128], int32[40959], ...": what the buffers a donation could not use take
        out["donation_unusable_count"] = len(listed)
        out["donation_unusable_total_bytes"] = sum(
            sizes[dtype] * math.prod(int(d) for d in dims.split(",") if d.strip()) for dtype, dims in listed)
    live_out, parameters = out.get("maybe_live_out_allocation_bytes"), out.get("parameter_allocation_bytes")
    if isinstance(live_out, int) and isinstance(parameters, int) and parameters > 0:
        out["live_out_parameter_ratio"] = round(live_out / parameters, 1)  # (a rollout's every step returned)
    devices, arguments = out.get("devices_named"), out.get("argument_bytes")
    if (_holds_whole_batch(out.get("largest_allocation_shape"), out.get("batch_named"), devices)
            and out.get("batch_per_device_named") != out.get("batch_named")):  # (each device's batch, as said)
        out["largest_holds_whole_batch"] = True
    unaliased = out.get("output_unaliased_bytes")
    if isinstance(unaliased, int) and isinstance(arguments, int) and arguments > 0:
        out["output_argument_ratio"] = unaliased / arguments
    exceeded, used = out.get("exceeded_by_bytes"), out.get("used_bytes")
    if isinstance(unaliased, int) and unaliased > 0 and isinstance(exceeded, int) and exceeded > unaliased:
        # donating the state saves at most the outputs that share nothing: what is still over after it
        out["overflow_after_donation_bytes"] = exceeded - unaliased
        if isinstance(used, int) and used > unaliased:
            out["used_after_donation_bytes"] = used - unaliased
    if isinstance(devices, int) and devices > 1 and isinstance(arguments, int) and arguments > 0:
        out["argument_per_device_bytes"] = -(-arguments // devices)  # evenly sharded, rounded up
    params = out.get("params_named")
    if isinstance(params, (int, float)) and params >= 1e6 and isinstance(arguments, int) and arguments > 0:
        # what the arguments hold per parameter: 12 is f32 weights and Adam's two moments, whole
        # on each device; that figure times the devices is the state sharded evenly over them
        out["argument_bytes_per_param"] = round(arguments / params, 1)
        if isinstance(devices, int) and devices > 1:
            out["state_bytes_per_param"] = round(arguments * devices / params, 1)
    space = str(out.get("memory_space") or "")
    if out.get("category") != "scoped_vmem_oom" and space != "vmem":
        return out
    out["vmem_table"] = vmem_table()
    need = out.get("requested_bytes") or out.get("used_bytes")
    if not isinstance(need, int) or need <= 0:
        return out
    out["vmem_need_bytes"] = need
    # whole MiB with one to spare: the compiler adds a little scratch of its own (measured on a v5e: a kernel
    # whose report says 72.00M fails to compile at 72 MiB and compiles at 73 MiB)
    limit = (math.ceil(need / MiB) + 1) * MiB
    verified = out.get("vmem_limit_verified_bytes")
    if isinstance(verified, int) and verified > 0:
        limit = verified  # `oomkb plan` compiled with it: measured, not computed
    if gen is not None and gen.vmem_bytes:
        out["vmem_physical_bytes"] = gen.vmem_bytes
        if need > gen.vmem_bytes:
            return out  # no limit can help: the rules say so
        limit = min(limit, gen.vmem_bytes)
    elif need > max((g.vmem_bytes or 0) for g in generations().values()):
        out["vmem_beyond_every_core"] = True  # more than any generation's core holds: no limit to set anywhere
        return out
    out["vmem_limit_to_set_bytes"] = limit
    out["vmem_limit_to_set_exact"] = limit
    out["vmem_limit_to_set_kib"] = limit // 1024
    return out


# --------------------------------------------------------------------------- loading


class _RulesFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[Rule]
    text_facts: list[TextFact] = Field(default_factory=list)
    count_facts: list[CountFact] = Field(default_factory=list)
    frameworks: list[Framework]
    jax_markers: list[str] = Field(min_length=1)
    jax_names: list[str] = Field(default_factory=list)
    no_jax: list[str] = Field(default_factory=list)


def load_rules(catalogue: Catalogue | None = None) -> EvidenceRules:
    """The rules of the catalogue's folder, checked against its facts, remedies and guides."""
    return _load(catalogue.path if catalogue is not None else "")


@lru_cache(maxsize=8)
def _load(folder: str) -> EvidenceRules:
    catalogue = load_catalogue(folder or None)
    folder = catalogue.path
    path = Path(folder) / FILE
    try:
        data = _RulesFile.model_validate(read_yaml(path))
    except ValidationError as exc:
        raise CatalogueError(f"{path}: {_first_error(exc)}") from exc
    checker = CatalogueValidator(Path(folder), {}, _guides(), catalogue.languages)
    checker.displays = catalogue.displays()
    remedy_ids = {r.id for r in catalogue.remedies}
    tried_ids = {t.id for t in load_intents().intents.tried}
    seen: set[str] = set()
    for rule in data.rules:
        item = f"rule {rule.id!r}"
        if rule.id in seen:
            raise checker.fail(FILE, item, "id used twice")
        seen.add(rule.id)
        for c in rule.category:
            if c not in catalogue.categories:
                raise checker.fail(FILE, item, f"unknown category {c!r}")
        checker._check_condition(FILE, item, rule.when, catalogue.facts)
        for n, variant in enumerate(rule.verdict):
            checker._check_texts(FILE, f"{item} verdict {n + 1}", variant, checker.displays.keys())
        if rule.verdict and rule.cite is None:
            raise checker.fail(FILE, item, "a verdict needs a cite (doc_id#section)")
        if rule.cite is not None:
            checker._check_cite(FILE, item, rule.cite)
        for rid in (*rule.lead, *rule.exclude, *rule.snippets):
            if rid not in remedy_ids:
                raise checker.fail(FILE, item, f"unknown remedy {rid!r}")
        for tried_id in rule.settles:
            if tried_id not in tried_ids:
                raise checker.fail(FILE, item, f"settles an unknown tried item {tried_id!r} (intents.yaml)")
        both = set(rule.lead) & set(rule.exclude)
        if both:
            raise checker.fail(FILE, item, f"leads with and excludes {sorted(both)}")
        for rid, fills in rule.snippets.items():
            for fill in fills:
                if fill.fact is not None and fill.fact not in catalogue.facts:
                    raise checker.fail(FILE, item, f"snippet of {rid!r} reads unknown fact {fill.fact!r}")
    for tf in data.text_facts:
        spec = catalogue.facts.get(tf.fact)
        if spec is None or spec.type != ("bool" if tf.flag else "str"):
            kind = "a flag" if tf.flag else "a text fact"
            raise checker.fail(FILE, f"text fact {tf.fact!r}", f"is not {kind} of facts.yaml")
    for cf in data.count_facts:
        spec = catalogue.facts.get(cf.fact)
        if spec is None or spec.type != ("float" if cf.decimals else "int"):
            kind = "a fraction" if cf.decimals else "a whole-number fact"
            raise checker.fail(FILE, f"count fact {cf.fact!r}", f"is not {kind} of facts.yaml")
    for fw in data.frameworks:
        checker._check_texts(FILE, f"framework {fw.id!r} name", fw.name, set())
    for pattern in data.no_jax:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise checker.fail(FILE, f"no_jax pattern {pattern!r}", str(exc))
    return EvidenceRules(data.rules, data.frameworks, data.jax_markers, catalogue, data.text_facts,
                         data.count_facts, data.no_jax, data.jax_names)


def _guides():
    from oomkb.indexer.guides import load_guides

    return list(load_guides(None))

