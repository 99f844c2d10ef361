"""The parts of an answer that come from the figures, snippets and next-steps catalogues: the
figure a question asks for (first), each remedy's code example, and the `oomkb` command that
would settle the question. Kept apart from the assistant's retrieval and grounding logic."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oomkb.kb.remedies.rendering import remedy_text
from oomkb.kb.remedies.schema import Catalogue, MissingValue, Remedy
from oomkb.kb.figures import FigureAnswer, Figures, load_figures
from oomkb.kb.next_steps import NextStep, NextSteps, load_next_steps, names_from_log
from oomkb.kb.snippets import Snippets, load_snippets, snippet_markdown
from oomkb.units import parse_size

__all__ = ["AnswerParts"]


class AnswerParts:
    """Figures, snippets and next steps for one remedy catalogue, loaded and checked once."""

    def __init__(self, catalogue: Catalogue):
        self.catalogue = catalogue
        self.figures: Figures = load_figures(catalogue)
        self.snippets: Snippets = load_snippets(catalogue)
        self.next_steps: NextSteps = load_next_steps(catalogue)

    def figures_for(self, question: str, language: str, every_generation: bool = True,
                    named_settings: bool = False) -> list[FigureAnswer]:
        return self.figures.answer(question, language, every_generation, named_settings)

    def figure_remedies(self, figures: list[FigureAnswer], language: str, format_bytes,
                        already: set[str]) -> list[tuple[Remedy, str]]:
        """(remedy, text) for the remedies that act on the figures asked for, not yet chosen; one
        per group (the compile-time and the run-time guide both say "donate the inputs")."""
        out = []
        groups = {self.catalogue.remedy(rid).group for rid in already} - {None}
        for rid in dict.fromkeys(r for f in figures for r in f.remedies):
            if rid in already:
                continue
            remedy = self.catalogue.remedy(rid)
            if remedy.group is not None and remedy.group in groups:
                continue
            groups.add(remedy.group)
            try:
                text = remedy_text(self.catalogue, remedy, {}, language, format_bytes)
            except MissingValue:
                continue
            out.append((remedy, text))
        return out

    def snippet(self, remedy_id: str) -> str | None:
        s = self.snippets.for_remedy(remedy_id)
        return s.code.strip("\n") if s else None

    def next_steps_for(self, question: str, facts: Mapping[str, Any], language: str,
                       log: str | None) -> list[NextStep]:
        names = names_from_log(log) or names_from_log(question)
        named = self.figures.generations_in(question or "")
        if named:
            names.setdefault("tpu", self._generation_of_log(named, facts) or named[0])
        return self.next_steps.choose(question, facts, language, names)

    def _generation_of_log(self, named: list[str], facts: Mapping[str, Any]) -> str | None:
        """Of the generations a question names ("moved from v4-8 to v5e-16"), the one whose
        per-device HBM is the capacity the log reports; None when none or several match."""
        capacity = facts.get("available_bytes")
        if facts.get("memory_space") not in (None, "hbm") or not isinstance(capacity, int) or len(named) < 2:
            return None
        hits = [n for n in named if n in self.figures.gens
                and abs(parse_size(self.figures.gens[n].hbm_reported) - capacity) <= capacity * 0.005]
        return hits[0] if len(hits) == 1 else None

    # -- Markdown ---------------------------------------------------------------------------

    @staticmethod
    def snippet_lines(code: str | None, shown: set[str]) -> list[str]:
        """A remedy's code block, once per answer (remedies can share one)."""
        if not code or code in shown:
            return []
        shown.add(code)
        from oomkb.kb.snippets import Snippet

        return ["", *snippet_markdown(Snippet(code=code, check="parse")), ""]

    def next_step_lines(self, steps: list[NextStep], language: str) -> list[str]:
        if not steps:
            return []
        lines = [f"### {self.next_steps.heading(language)}", ""]
        for step in steps:
            lines += [step.text, "", "```", step.command, "```", ""]
        return lines
