"""The assistant: question (+ error log, + estimate/profile report) → an answer in the asker's
language, built from evidence, the remedy catalogue, the knowledge cards and cited guide quotes.

No model writes free text here: the diagnosis and the steps are catalogue templates filled with the
user's numbers, "what the guide says" comes from the knowledge cards in the asker's language, and
the guides are quoted in their own language as Markdown blockquotes. One object serves the CLI,
REST and Slack.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from oomkb.api.core import conversation
from oomkb.api.core.diff_answer import diff_lines, diff_summary
from oomkb.api.core.parts import AnswerParts
from oomkb.api.core.evidence import facts_from
from oomkb.api.schemas import (
    AskRequest, AskResponse, Citation, ConversationTurn, DiagnoseRequest, GuideInfo, GuideSection,
    GuidesResponse, Remedy, SearchRequest,
)
from oomkb.diagnostics.diff import DiffReport
from oomkb.diagnostics.estimate.report import EstimateReport
from oomkb.diagnostics.plan import PlanReport
from oomkb.diagnostics.profile import ProfileReport
from oomkb.diagnostics.parse import ParsedError, parse_error
from oomkb.units import format_bytes
from oomkb.kb import grounding
from oomkb.kb.remedies import load_catalogue
from oomkb.kb.remedies.choice import choose_remedies
from oomkb.kb.remedies.rendering import diagnosis_line, message, remedy_text
from oomkb.kb.remedies.schema import MissingValue
from oomkb.kb.errors import QueryError
from oomkb.kb.figures import ANSWER, SETTING_KINDS, FigureAnswer
from oomkb.kb.evidence_rules import derive_facts, load_rules
from oomkb.kb.platform import load_platforms
from oomkb.kb.commands import load_commands
from oomkb.kb.sizing import KIND as SIZING, load_sizing
from oomkb.kb.snippets import (fill_child_share, fill_fraction, fill_limit, fill_share, fill_signature, fill_size,
                               fill_stated, takes_limit)
from oomkb.kb.language import (FALLBACK, Detection, base_language, is_supported, join_sentences,
                         language_name)
from oomkb.kb.live import LiveIndex
from oomkb.kb.prose import detect_prose_language
from oomkb.kb import question as question_api
from oomkb.kb.question import QuestionAnalysis, analyse
from oomkb.kb.search import SearchResponse, SearchResult, Searcher

# Retrieval confidence shown with an answer: the best dense cosine between the question and a
# section's texts, mapped to 0..1 between these bounds. Whether the guides cover the question is
# decided by kb.grounding from several calibrated signals, not by this one number.
DENSE_FLOOR = 0.80
DENSE_CEIL = 0.90
MAX_CITATIONS = 4
# The category whose evidence-triggered remedies a report without an error log can trigger.
REPORT_CATEGORY = {"EstimateReport": "compile_hbm_oom", "ProfileReport": "runtime_allocation",
                   "CaptureReport": "runtime_allocation", "PlanReport": "compile_hbm_oom",
                   # a diff is not an error: only its own rules (the `diff-*` verdicts) apply
                   "DiffReport": "unknown"}
MAX_CARDS = 2
MAX_REMEDIES = 5
#: Signatures read as the host's memory only because no device was named: a question that names a
#: GPU (and no TPU) makes them the GPU's (diagnostics/signatures.yaml).
HOST_READINGS_OF_A_GPU_ERROR = frozenset({"xla_cpu_out_of_memory_allocating"})
#: The runtime's wording an old TPU runtime shares with the GPU's: a TPU named, no GPU, it is the TPU's.
RUNTIME_READINGS_OF_A_TPU_ERROR = frozenset({"xla_failed_to_allocate_request"})
#: General steps (not chosen by the evidence) kept after a verdict from the user's own numbers.
MAX_GENERAL_AFTER_VERDICT = 2
#: Steps shown with a log when a short answer already answers the question asked beside it.
MAX_STEPS_BESIDE_ANSWER = 2
#: the short answer whose code measures the arrays a function would create, without allocating them
MEASURE_ANSWER = "pytree_bytes_by_shape"
#: the subject of the answer to a JAX memory question that nothing here answers
NO_SECTION = "no_section"
#: Arithmetic on the model the question describes, not shown unasked beside a log that measured it.
ESTIMATES_BESIDE_A_LOG = frozenset({"training_state", "accumulator", "gpu_pool_seen"})
#: A log's figures that size the program (not only the request that failed): beside them, an estimate
#: from the question's model is not shown unasked.
PROGRAM_FIGURES = ("argument_bytes", "used_bytes", "total_allocation_bytes", "program_bytes", "total_hbm_usage_bytes",
                   "output_bytes", "hlo_temp_bytes", "pool_in_use_bytes", "allocated_bytes", "maybe_live_out_allocation_bytes",
                   "preallocated_temp_allocation_bytes", "reserved_bytes", "process_used_bytes")
#: Arithmetic on the model's training state, not shown unasked beside a short answer that answers
#: the question ("why is donation not working?" is not asked by the size of Adam's moments).
ESTIMATES_BESIDE_AN_ANSWER = frozenset({"training_state"})
#: Arithmetic that is itself the answer (each process's share of the card, the remat policy that
#: fits, a chunk size): no remedy guessed from the question's topic leads beside it, and no
#: concept answer that its words also touch.
SIZES_THAT_ANSWER = frozenset({"pool_shares", "remat_policies", "saved_names", "chunks", "batch_line", "allocation_factored",
                               "gpu_shared_blocks", "mcmc_samples", "vmem_capacity_fractions", "pool_fractions", "microbatches",
                               "pool_for_need", "pool_like_other", "pool_even_split", "need_beyond_card", "trajectory", "batch_scaled",
                               "pairwise", "pairwise_log", "pool_unified_machine", "changes"})
#: Arithmetic on the user's figures that only the turn asking for it gets (the change in %, the excess
#: over a limit): not again when a later turn's question is answered with the conversation's arithmetic.
ASKED_IN_ITS_TURN = frozenset({"changes", "over_limit"})
#: JAX's GPU pool settings named in a text: advice on memory, beside a verdict that memory is not the cause
_POOL_SETTINGS = re.compile(r"XLA_PYTHON_CLIENT_(?:MEM_FRACTION|PREALLOCATE|ALLOCATOR)")
#: Arithmetic that says what the log's failed allocation is (the asker's own figures multiplied):
#: the steps that would find it with a profiler are not needed after it.
SIZES_THAT_EXPLAIN_THE_LOG = frozenset({"allocation_factored", "pairwise_log"})
#: Arithmetic on a written-out array whose code is that array made sharded over the devices
SHARDING_CODE_SUBJECTS = frozenset({"tensor", "logits_tensor"})
#: Short answers whose code is made of the asker's own array: a turn that writes the array out gets the
#: code the arithmetic builds from it instead ("a shard_map skeleton for [128, 3072, 4096]"); code of any
#: other technique named beside a shape ("chunked cross-entropy for W [1024, 1048576]") stays.
ARRAY_CODE_ANSWERS = frozenset({"fsdp_setup"})
#: The topology the catalogue's deviceless-compile code is written for; replaced by the slice a conversation names.
DEFAULT_TOPOLOGY = "v5e:2x2"
#: Sizing lines about what the device holds (its state, its weights, a microbatch): beside an answer about the
#: host's RAM they size the wrong memory.
DEVICE_STATE_SUBJECTS = frozenset({"training_state", "optimizer_state", "weights", "state_per_slice", "microbatches"})

#: Conversations whose shown parts the assistant keeps for their follow-ups (oldest dropped first).
MAX_SHOWN_KEPT = 1024
#: "Did X, still OOM, what now?" without a log: this many untried remedies of the topic's list.
MAX_NEXT_WITHOUT_EVIDENCE = 3
#: A follow-up at least this close (e5 cosine) to its conversation's earlier questions continues it
#: (measured: follow-ups 0.87–0.90; a recipe, a restaurant or a film after an OOM question 0.75–0.79).
FOLLOW_UP_COSINE = 0.85
#: How close (in the Latin-script detector's word scores) a follow-up's score for the
#: conversation's language must come to its top language for the conversation's to win.
FOLLOW_UP_LANGUAGE_MARGIN = 1.0
GENERATION_CHARS = 4000  # how much of the question and of the log names the TPU generation
QUOTE_CHARS = 260


@dataclass
class Shown:
    """What one answer showed: its code blocks, the guide cards' citations and its answer lines. A
    follow-up does not show them again (a turn that would only repeat the last one says so)."""

    code: set[str] = field(default_factory=set)
    cards: set[str] = field(default_factory=set)
    lines: set[str] = field(default_factory=set)
    answers: set[str] = field(default_factory=set)  # the short answers shown (their ids)

    def merged(self, other: "Shown | None") -> "Shown":
        if other is None:
            return self
        return Shown(self.code | other.code, self.cards | other.cards, self.lines | other.lines,
                     self.answers | other.answers)


class Assistant:
    """Answers questions; holds the loaded search index and the remedy catalogue."""

    def __init__(self, index: Searcher | LiveIndex, catalogue=None):
        self.live = index if isinstance(index, LiveIndex) else None
        self._fixed = index if isinstance(index, Searcher) else None
        self.catalogue = catalogue or load_catalogue()
        self._vocabulary = frozenset(f.name for f in self.catalogue.facts.values() if f.values)
        self.parts = AnswerParts(self.catalogue)
        self.rules = load_rules(self.catalogue)
        self.sizing = load_sizing(self.parts.figures, self.rules.read_count_facts)
        self.commands = load_commands()
        self.platforms = load_platforms()
        # what each conversation's answers showed, by its turns and language: a follow-up finds its
        # earlier turns' here instead of answering them again (bounded; the same turns give the same)
        self._shown: OrderedDict[str, Shown] = OrderedDict()
        self._shown_lock = threading.Lock()

    @property
    def searcher(self) -> Searcher:
        """The current searcher (a serving process follows `oomkb index` runs elsewhere)."""
        return self.live.searcher() if self.live is not None else self._fixed

    # -- the four operations of the API ---------------------------------------------------

    def search(self, req: SearchRequest) -> SearchResponse:
        return self.searcher.search(req.query, k=req.k, language=req.language)

    def diagnose(self, req: DiagnoseRequest) -> ParsedError:
        return parse_error(req.error_log)

    def guides(self) -> GuidesResponse:
        return GuidesResponse(
            guides=[
                GuideInfo(
                    doc_id=g.doc_id, title=g.title, title_en=g.title_en, language=g.language,
                    categories=g.categories,
                    sections=[GuideSection(id=s.id, title=s.title, level=s.level) for s in g.sections],
                )
                for g in self.searcher.guides.values()
            ]
        )

    def warm_up(self) -> None:
        """Answer one question and one pasted error in-process, so that everything loaded on
        first use (the error signatures, the grounding terms and their embedded descriptions,
        the language profiles, the catalogue) is loaded before a server says it is ready."""
        self.ask(AskRequest(question="Comment réparer une erreur de mémoire insuffisante ?"))
        self.ask(AskRequest(question="?", error_log="RESOURCE_EXHAUSTED: Out of memory while "
                                                    "trying to allocate 1.00GiB on TPU_0"))

    def ask(self, req: AskRequest, turns: list[ConversationTurn] | None = None) -> AskResponse:
        """Answer `req` in its language; `grounded` is false when the guides do not cover it.

        `turns` (else `req.history`): the conversation's earlier turns, oldest first. A question
        that continues them inherits their evidence and subject (api/core/conversation.py)."""
        earlier = list(turns) if turns is not None else list(req.history or [])
        this_turn = conversation.turn_of(req)  # as the conversation keeps it, before it inherits anything
        context = conversation.Context()
        if earlier and self._continues(req.question, req.error_log, earlier):
            req, context = conversation.merge(earlier, req)
        question = (req.question or "").replace("\x00", " ").strip()
        log = (req.error_log or "").replace("\x00", " ")
        req_log_new = bool((req.error_log or "").strip()) and "error_log" not in context.inherited
        if not question and not log.strip() and req.report is None:
            raise QueryError("ask a question, paste an error log, or attach a report")
        # Only the question tells the asker's language: a pasted log is English (or noise) whoever
        # pastes it, so a log without a question is answered in English unless asked otherwise;
        # a log pasted into the question is left out too (the language of its prose).
        detection = None if req.language else detect_prose_language(question)
        if detection is not None and context.follow_up and detection.scores:
            # A short follow-up in a Latin script ("y si pongo ...?") can score close to a
            # neighbour language; when the conversation's own language is that close, it wins.
            before = detect_prose_language("\n".join(t.question for t in earlier if t.question))
            own = detection.scores.get(before.language, 0.0)
            if (before.supported and before.method != "default" and before.language != detection.language
                    and own > 0 and detection.scores[detection.language] - own < FOLLOW_UP_LANGUAGE_MARGIN):
                detection = before
        language, detected, note_key = self._language(req.language, detection)
        # a greeting that opens the message says nothing about what is asked (read for the language only)
        question = conversation.without_greeting(question)

        diagnosis = None
        if log.strip():
            diagnosis = parse_error(log)
        elif question:
            pasted = parse_error(question)
            diagnosis = pasted if pasted.category != "unknown" else None
        if (diagnosis is not None and diagnosis.signature in HOST_READINGS_OF_A_GPU_ERROR
                and self.platforms.gpu_only("\n".join([*(t.question for t in earlier if t.question), question]))):
            # "Out of memory allocating N bytes" is XLA's CPU client wording, but the asker runs on
            # the GPU they name (a V100): the GPU's memory ran out, not the host's
            diagnosis = diagnosis.model_copy(update={"category": "gpu_oom", "backend": "gpu", "memory_space": None})
        if (diagnosis is not None and diagnosis.category == "gpu_oom" and diagnosis.signature in RUNTIME_READINGS_OF_A_TPU_ERROR
                and self.platforms.tpu_named_only("\n".join([*(t.question for t in earlier if t.question), question]))):
            # the stream executor's "Failed to allocate request for 625.00MiB on device ordinal 7" on the
            # TPU slice the asker names: a TPU runtime allocation, not a GPU's
            diagnosis = diagnosis.model_copy(update={"category": "runtime_allocation", "backend": "tpu",
                                                     "memory_space": "hbm"})
        facts = facts_from(diagnosis, req.report)
        # whether the evidence has figures of its own (a log's sizes, a report), not just a name
        # (a buffer shape quoted in prose, sized from its layout, is not a measurement of the program)
        measured = req.report is not None or any(k.endswith("_bytes") and v for k, v in facts.items()
                                                 if not k.startswith(("padding_", "largest_allocation_")))
        # a follow-up of a JAX conversation that names the other framework ("how much would pytorch have
        # left?") is still about JAX: the conversation's earlier questions count with it
        said_before = [t.question for t in earlier if t.question] if context.follow_up else []
        framework = self.rules.other_framework(question, log, *said_before)
        # another framework's OOM in a process the asker says also runs JAX ("submission_runner.py imports
        # jax too: is JAX to blame?"): JAX's pool may be what took the card; the rules weigh it
        beside_jax = (framework is None and diagnosis is not None and diagnosis.category == OTHER_FRAMEWORK
                      and self.rules.names_jax(question, *said_before))
        if framework is not None or (diagnosis is not None and diagnosis.category == OTHER_FRAMEWORK and not beside_jax):
            return self._other_framework(language, detected, note_key, diagnosis, framework, facts)
        if beside_jax:  # read as a GPU out-of-memory error of a process that runs JAX
            foreign_diagnosis = (diagnosis, dict(facts))  # (declined as before unless a rule finds JAX's pool)
            diagnosis = diagnosis.model_copy(update={"category": "gpu_oom"})
            facts.update(category="gpu_oom", jax_in_process=True)
        facts = self.rules.read_text_facts(facts, log, question)
        facts = self.rules.read_requested_shape(facts, log, question)
        if facts:  # a count the question states matters only beside evidence ("over 8 chips?")
            facts = self.rules.read_count_facts(facts, question)
            read = self.sizing.read(question)
            card = read.card_memory
            named = facts.get("gpu_memory_named_bytes")
            one_size = read.device not in (None, "GPU")  # a card of one size named by its model (a T4)
            if card and facts.get("backend") == "gpu" and (named is None or one_size or 0.9 * named <= card < named):
                # a GPU named by its model ("RTX A6000"): its memory, not another figure the question
                # gives ("a T4 ... asking for 18 GB"); a card named with the size it is sold as ("T4
                # 16GB"): the total CUDA reports for it, which JAX's pool is a share of
                facts["gpu_memory_named_bytes"] = card
            stated = self.sizing.params_stated("\n".join([*(t.question for t in earlier if t.question), question]))
            if stated is not None and facts.get("argument_bytes"):  # what the arguments hold per parameter
                facts["params_named"], facts["params_label"] = stated
        facts = derive_facts(facts, self._generation(question, log, facts))
        facts = self._capacity_of_the_device_named(facts, question)
        said_so_far = "\n".join([*(t.question for t in earlier if t.question), question])
        # a log that prints the failed buffer's own shape says what it is: the asker's figures are not
        # multiplied into another shape of the same bytes
        shape_logged = bool(facts.get("requested_shape") or (
            facts.get("largest_allocation_shape") and facts.get("largest_allocation_bytes") == facts.get("requested_bytes")))
        if facts.get("requested_bytes") and not shape_logged and (
                self.sizing.allocation_shape(said_so_far, facts["requested_bytes"])
                                             or self.sizing.pairs_requested(said_so_far, facts["requested_bytes"])):
            facts["requested_factored"] = True  # the asker's own figures multiply to it: that says what it is
        if facts.get("requested_bytes") and self.sizing.backpedal(f"{said_so_far}\n{log or ''}", facts["requested_bytes"]):
            facts["allocation_backpedal"] = True  # one refused block asked again at 90%: not the program's need
        shown = _user_text_as_code(facts, self._vocabulary)
        category = str(facts.get("category") or (diagnosis.category if diagnosis else "unknown"))
        # A report without an error still carries evidence (a measured donation saving, padding,
        # leak growth): its category's evidence-triggered remedies apply, general advice does not.
        evidence_only = category == "unknown" and req.report is not None
        if evidence_only:
            category = REPORT_CATEGORY[type(req.report).__name__]

        query = self._retrieval_query(question, diagnosis, context.subject)
        searcher = self.searcher
        # Embedded once: the search and the grounding decision both use the query's vector.
        vector = searcher.embed_queries([query])[0] if query else None
        results = (searcher.search(query, k=5, query_language=language, query_vector=vector).results
                   if query else [])
        confidence = _confidence(results)
        # Another framework's error (PyTorch's CUDA OOM): the diagnosis line names it, and the
        # guides' JAX/XLA remedies and passages are not offered as if they applied.
        info = self.catalogue.categories.get(category)
        foreign = info is not None and not info.jax_remedies_apply
        # What is asked, about what, and what was tried: the vector is the question's own only
        # when no log was appended to the retrieval query.
        analysis = analyse(question, language, searcher=searcher,
                           query_vector=vector if query == question else None)
        if context.tried_items:  # what earlier turns said was tried is still tried
            analysis = analysis.model_copy(update={
                "stated": list(analysis.tried),
                "tried": list(dict.fromkeys([*analysis.tried, *context.tried_items])),
                "tried_remedies": list(dict.fromkeys([*analysis.tried_remedies, *context.tried]))})
        if self.sizing.device_batch(question) == 1:  # a batch of 1 per device has nothing left to halve
            analysis = analysis.model_copy(update={"one_per_device": True, "tried_remedies": list(dict.fromkeys(
                [*analysis.tried_remedies, *question_api.tried_item("batch").remedies]))})
        chosen = (
            choose_remedies(self.catalogue, facts, category, limit=len(self.catalogue.remedies))
            if category != "unknown" and not foreign else []
        )
        if evidence_only:
            chosen = [r for r in chosen if r.evidence]
        # A remedy the asker already applied is not offered again as new (its `why` is shown).
        chosen = [r for r in chosen if r.id not in analysis.tried_remedies]
        oom_named = grounding.names_jax_oom(question)  # "OOM", "显存不足" with JAX, XLA or a TPU named
        if (category == "unknown" and not foreign and req.report is None and analysis.tried
                and "next" in analysis.asks):  # "did X, still OOM, what now?" without a log
            chosen = self._next_without_evidence(context.subject, analysis)
        elif (category == "unknown" and not foreign and req.report is None and not chosen and not analysis.tried
              and not analysis.topics and not context.follow_up and oom_named):
            chosen = self._steps_for_an_unnamed_oom()  # "OOM at the first step with optax.adamw"
        # The user's figures decide the verdict, which remedies lead and which are pointless.
        outcome = self.rules.apply(shown, category, language, format_bytes)
        if beside_jax and not outcome.whole_fix:  # JAX named, but its pool is not what held the card
            return self._other_framework(language, detected, note_key, foreign_diagnosis[0], None, foreign_diagnosis[1])
        chosen = self.rules.order(chosen, outcome, MAX_REMEDIES)
        if outcome.settled:  # the verdict judges what was tried ("FSDP works"): no general word on it
            stated = analysis.tried if analysis.stated is None else analysis.stated
            analysis = analysis.model_copy(update={"stated": [t for t in stated if t not in outcome.settled]})
        if outcome.verdict:  # the verdict names the fix: general advice after it is kept short
            general = [r.id for r in chosen if not r.evidence and r.id not in outcome.lead
                       and r.id not in outcome.snippets]  # not the verdict's own, nor one it fills in
            chosen = [r for r in chosen if r.id not in general[MAX_GENERAL_AFTER_VERDICT:]]
        # A figure or setting asked for is answered first; a follow-up that names none asks about
        # the earlier turns' subject ("how do I turn it off?").
        # With a log or report, a generation's figure is given only for a generation named: the
        # evidence already says which limit was hit (not every generation's VMEM again).
        # A setting named beside the log it comes with is the asker's own configuration, not a
        # question about it; named in a follow-up ("and if I set X?") it is asked about.
        figures = self.parts.figures_for(question, language, every_generation=not facts,
                                         named_settings=not analysis.tried
                                         and not (facts and not context.follow_up))
        logged = facts.get("available_bytes") if facts.get("memory_space") == "hbm" else None
        if logged:  # the generation's HBM that the user's own log already states ("of 15.75G hbm") is not news
            figures = [f for f in figures if not (f.kind == "hbm" and f.value_bytes
                                                  and abs(f.value_bytes - logged) <= 0.01 * logged)]
        seen = self._shown_before(earlier, language) if context.follow_up else None
        said_before: list[FigureAnswer] = []
        if context.follow_up and figures:
            # a general answer that the conversation's more specific one replaces stays replaced in its
            # follow-ups ("the code to keep every 200th step" after the scan's stacked outputs: not the
            # backward pass's residuals, which this turn's words alone would match)
            given_before = (seen.answers if seen is not None else {x.id for x in self.parts.figures.short_answers_of(
                "\n".join(t.question for t in earlier if t.question))})
            replaced = self.parts.figures.replaced_by(set(given_before))
            figures = [f for f in figures if not (f.kind == ANSWER and f.subject in replaced)]
        if context.follow_up and figures:  # a short answer given in an earlier turn is not repeated
            # (those the earlier answers showed, where this server kept them; else those their words call for)
            given = (seen.answers if seen is not None else {x.id for x in self.parts.figures.short_answers_of(
                "\n".join(t.question for t in earlier if t.question))})
            before = self.parts.figures.given_with(given)
            figures = self._not_again(figures, before, analysis, language)
        if context.follow_up and seen is not None:
            # what this turn's own words ask that an earlier turn already answered ("would it use the 8
            # GPUs?" after "one prediction runs on one GPU")
            said_before = [a for a in (self.parts.figures.short_answer(i, language)
                                       for i in sorted(self.parts.figures.asked_again(question, set(seen.answers))))
                           if a is not None]
        if (not figures and context.follow_up and context.subject
                and ({"flag", "figure", "snippet"} & set(analysis.asks)
                     or self.parts.figures.asks_about_a_setting(question))):
            # (those the earlier answers showed, where this server kept them: an answer the earlier words
            # call for but no turn showed, "num_vocab_tiling" asked after the logits' figures, is still new)
            answered = (seen.answers if seen is not None
                        else {a.id for a in self.parts.figures.short_answers_of(context.subject)})
            combined = self.parts.figures_for(f"{context.subject}\n{question}", language)
            # the code of the conversation's own answer, when it has some, not answers that only the
            # earlier turns' words and this one's together happen to match
            own = [f for f in combined if f.kind == ANSWER and f.subject in answered and f.snippet]
            # a generation's figure only when this turn names the generation ("and on v4?"), not
            # because an earlier turn named the chip ("and in bf16, how much do I save?")
            if not self.parts.figures.generations_in(question):
                combined = [f for f in combined if f.kind == ANSWER or f.kind in SETTING_KINDS]
            # code this turn names itself ("the lines for a mesh over the 8 cores") wins over the
            # conversation's own code, unless it points back at that ("the optax code for that")
            named = self._for_this_platform(
                self.parts.figures.code_named(question, language) if "snippet" in analysis.asks else [],
                facts, earlier, question)
            if "snippet" in analysis.asks and not named and earlier:
                # the code for what the turn before was about ("offload mu/nu to the host", then "how
                # do I turn it on?") before the code of the conversation's first subject (not code that
                # an answer the conversation gave replaces: Flax's remat after Keras's RematScope)
                own = self._code_named_before(earlier[-1:], language, limit=2,
                                              skip=self.parts.figures.replaced_by(set(answered))) or own
            if named and not own and "snippet" in analysis.asks and conversation.asks_for_that_code(question):
                # "the optax code for that" after "and with Adafactor?": the code of what was named
                # before, not the stock code this turn's own words name
                own = self._code_named_before(earlier, language, limit=1)
            if named and own:
                # code this turn names that only sets variables the conversation's own code already sets ("the
                # top of the launch script with the env vars" after the unified-memory code): that code
                own_env = {v for o in own for v in _ENV_SET.findall(o.snippet or "")}
                named = [f for f in named if f.subject in {o.subject for o in own}
                         or not (env := set(_ENV_SET.findall(f.snippet or ""))) or not env <= own_env]
            if named and not (own and (conversation.asks_for_that_code(question)
                                       or {f.subject for f in named} & {f.subject for f in own})):
                own, combined = [], named
            elif named and own and not conversation.asks_for_that_code(question):
                # "a train_step with donation, and a way to see which arrays are still alive": the
                # conversation's code and each other piece this turn names
                mine = {f.subject for f in own}
                both = mine & {f.subject for f in named}
                if both:  # this turn names one of the conversation's pieces of code: that one, not all of them
                    own = [f for f in own if f.subject in both]
                own = [*own, *(f for f in named if f.subject not in mine)]
            figures = self._not_again(own or combined, answered, analysis, language)
        if not figures and context.follow_up and context.subject:
            figures = self.parts.figures.follow_up_answers(context.subject, question, language)
        if context.follow_up and "snippet" in analysis.asks and not any(f.snippet for f in figures):
            # "go on, the optax snippet and the embedding's sharding": the code this turn names
            named = {f.subject for f in figures}
            # (an answer an earlier turn showed: its code alone, "In code:", not its text again)
            shown_before = self.parts.figures.given_with(seen.answers) if seen is not None else set()
            figures += self._not_again([f for f in self._for_this_platform(
                self.parts.figures.code_named(question, language), facts, earlier, question)
                if f.subject not in named], shown_before, analysis, language)
            if not any(f.snippet for f in figures):
                # "and how do I turn it on? the exact code": the code for what the last turn that
                # named one was about ("offload mu/nu to the host" before it)
                figures += self._code_named_before(earlier, language, skip=named, limit=1)
        if not figures and context.follow_up and context.subject and self.parts.figures.generations_in(question):
            # "and on v4?": the figure the conversation asked for, of the generation this turn names
            asked_again = f"{self.parts.figures.without_generations(context.subject)}\n{question}"
            figures = [f for f in self.parts.figures_for(asked_again, language) if f.kind != ANSWER]
        # "I added nn.remat, still OOM: what next?": how to apply what they did is not the answer, nor
        # its code when the next step's code is asked with it ("what next? with code")
        if "next" in analysis.asks and not {"why", "flag", "figure"} & set(analysis.asks):
            figures = [f for f in figures if (f.about is None or f.about not in analysis.tried)
                       # ("PREALLOCATE=false and MEM_FRACTION=.95 set, no effect": not what they do)
                       and not (f.kind in SETTING_KINDS and question_api.tried_covers(analysis.tried, f.subject))]
            figures += self._then_after_tried(analysis, question, language, {f.subject for f in figures})
        if any(f.snippet for f in figures):  # the user's own figures in the code they are shown
            said = "\n".join(t.question for t in earlier if t.question) if context.follow_up else ""
            stated = self.sizing.read(f"{said}\n{question}").values
            processes = self.sizing.process_count(f"{said}\n{question}")  # ("3 processes on one card": .30 each)
            figures = [f.model_copy(update={"snippet": fill_child_share(
                           fill_share(fill_stated(f.snippet, stated), processes), f"{said}\n{question}")})
                       if f.snippet else f for f in figures]
            figures = [self._for_own_step(f, f"{said}\n{question}") if f.snippet else f for f in figures]
            computed = self._fraction_computed_before(earlier, language) if context.follow_up else None
            if computed is not None:  # ("the launch script" after "set .44 in each process": that .44 in it)
                figures = [f.model_copy(update={"snippet": fill_fraction(f.snippet, computed)}) if f.snippet else f
                           for f in figures]
        if req_log_new:  # a warning in the pasted log that has its own answer
            named = {f.subject for f in figures}
            logged = [f for f in self.parts.figures.log_answers(log, language, question) if f.subject not in named]
            gone = self.parts.figures.replaced_by({f.subject for f in logged})  # (their `unless`, as for the question's)
            logged = [f for f in logged if f.subject not in gone]  # (a log answer the question's words made specific)
            # (the log's own answers first: they say what failed; the question's words matched the rest)
            # (nor a setting's line that the log's own answer makes redundant: donate_argnums beside "Donation
            # is not implemented for ('METAL',)")
            settled = self.parts.figures.settings_replaced_by({f.subject for f in logged})
            figures = logged + [f for f in figures if not (f.kind == ANSWER and f.subject in gone)
                                and not (f.kind in SETTING_KINDS and f.subject in settled)]
        # Arithmetic on the figures the conversation states (a model's state, a KV cache): shown
        # first; a follow-up gets it where its own figures change the result. It is not a figure
        # the question asked for unless asked ("how much?", "will it fit?").
        asked_size = bool({"figure", "yes_no"} & set(analysis.asks)) or self.sizing.asks_to_fit(question)
        # (with the pool settings and the card that an earlier turn's pasted log shows: "deviceMemorySize: 4.63GiB")
        earlier_text = "\n".join(filter(None, (f"{t.question}\n{self.sizing.settings_in(t.error_log or '')}".strip()
                                                for t in earlier))) if context.follow_up else ""
        # a follow-up of a conversation that was doing the arithmetic asks for it again ("and in bf16?")
        # a TPU log's own capacity is the device's memory in every figure of the answer
        capacity = facts.get("available_bytes") if facts.get("memory_space") == "hbm" else None
        shared = facts.get("available_bytes") if facts.get("memory_space") == "shared" else None
        sizing_before = bool(earlier_text and self.sizing.answer(earlier_text, language, asked=True))
        requested = (facts.get("requested_bytes") if isinstance(facts.get("requested_bytes"), int)
                     and not shape_logged else None)  # (the log's own shape: not factored again)
        # the pool settings a pasted log shows ("docker env: TF_FORCE_UNIFIED_MEMORY=1 ..._MEM_FRACTION=4.0")
        # are the asker's own: the arithmetic reads them with the question
        settings = self.sizing.settings_in(log) if req_log_new else ""
        # the settings the program an answer names sets for itself (ColabFold's unified memory), where the
        # asker sets none of them: the arithmetic reads them as the asker's own
        said = f"{earlier_text}\n{question}\n{settings}".lower()
        implied = [d for f in figures if f.kind == ANSWER for d in f.defaults
                   if d.split("=", 1)[0].lower() not in said] if not context.follow_up else []
        if implied:
            settings = "\n".join([settings, *implied]).strip()
        sizes = self.sizing.answer(f"{question}\n{settings}" if settings else question, language,
                                   earlier=earlier_text, capacity=capacity, shared=shared,
                                   requested=requested, used=facts.get("used_bytes"),
                                   asked=asked_size or sizing_before)
        if not sizes and earlier_text and (("figure" in analysis.asks and self.sizing.names_memory(question))
                                           or self.sizing.asks_max_batch(question)):
            # "ok so what max batch can I run then?", "so how much memory is that?": the conversation's
            # arithmetic answers it again (not "how much slower is it then?")
            sizes = [a for a in self.sizing.answer(f"{earlier_text}\n{question}", language, asked=True, capacity=capacity,
                                                   requested=requested) if a.subject not in ASKED_IN_ITS_TURN]
            asked_size = asked_size or bool(sizes)
        # code this turn names by its name ("a snippet that AOT-compiles ..."), unless it writes out the
        # array that code is to be made of ("a shard_map skeleton for [128, 3072, 4096]")
        named_code = [f for f in self.parts.figures.code_named(question, language)
                      if not (f.subject in ARRAY_CODE_ANSWERS and self.sizing.writes_shape(question))]
        if not sizes and earlier_text and "snippet" in analysis.asks and not named_code:
            # "now the exact code for it": the conversation's arithmetic that carries its code, again,
            # with the code (a kernel's vmem_limit_bytes computed from its blocks)
            sizes = [a for a in self.sizing.answer(f"{earlier_text}\n{question}", language, asked=True,
                                                   capacity=capacity, requested=requested) if a.snippet]
            asked_size = asked_size or bool(sizes)
        if req_log_new and not facts.get("largest_allocation_bytes"):
            # an HLO dump pasted instead of an allocation report: its largest buffer, first
            hlo = self.sizing.hlo_largest(log, language)
            if hlo is not None:
                sizes = [hlo, *sizes]
                asked_size = True
        sizes = self.sizing.without_repeats(sizes, {f.subject for f in figures if f.kind == ANSWER})
        if named_code and "snippet" in analysis.asks:
            # code this turn names ("a snippet that AOT-compiles our step") is not replaced by sharding code
            # made of an array an earlier turn wrote
            sizes = [a.model_copy(update={"snippet": None}) if a.snippet and a.subject in SHARDING_CODE_SUBJECTS
                     else a for a in sizes]
        own_code = "snippet" in analysis.asks and any(a.snippet for a in sizes)
        if own_code:  # code made from the asker's own arrays and devices is the code asked for, not a stock example
            figures = [f for f in figures if not (f.kind == ANSWER and f.snippet)]
        sizes = [a for a in sizes if a.subject not in outcome.superseded]
        # (a short answer the verdict replaces: "memory outside the pool" where the step is over the pool itself)
        figures = [f for f in figures if not (f.kind == ANSWER and f.subject in outcome.superseded)]
        if measured and not asked_size and any(facts.get(k) for k in PROGRAM_FIGURES):
            # a log's own sizes of the program: an estimate of the model's state is beside them (a log
            # with only the failed request, "32.00MiB on device ordinal 0", does not size the program:
            # the state the question's model needs on the device named says why it failed)
            sizes = [a for a in sizes if a.subject not in ESTIMATES_BESIDE_A_LOG]
        # (a conversation that was doing the arithmetic is still asking for it: "and in bf16?")
        answers_it = any(f.kind == ANSWER for f in figures) and not sizing_before
        if answers_it and not asked_size:
            sizes = [a for a in sizes if a.subject not in ESTIMATES_BESIDE_AN_ANSWER]
        if any(f.kind == ANSWER and f.subject in self.parts.figures.host_memory_answers for f in figures):
            # the host's RAM is what ran out (a checkpoint's save, a notebook's input pipeline): the device's
            # state or microbatch, sized, is not the answer
            sizes = [a for a in sizes if a.subject not in DEVICE_STATE_SUBJECTS]
            figures = [f for f in figures if f.subject not in DEVICE_STATE_SUBJECTS]
        replaced = self.sizing.replaced(sizes)
        excluded = self.sizing.excluded(sizes)  # remedies the arithmetic shows cannot help
        excluded |= {rid for f in figures for rid in f.excludes}  # (a v4 core's scoped VMEM is all of it)
        figures = [f for f in figures if not (f.kind in (ANSWER, "setting_default") and f.subject in replaced)]
        by_arithmetic = any(a.subject in SIZES_THAT_ANSWER for a in sizes) or (
            # a follow-up of the arithmetic asking one more figure ("and all in bf16, per chip?"): the
            # figure recomputed is the answer, not the short answers its words also touch
            context.follow_up and sizing_before and asked_size and bool(sizes) and not facts
            and "figure" in analysis.asks and not {"why", "snippet", "flag", "next"} & set(analysis.asks))
        if (by_arithmetic and seen is not None and all(a.text in seen.lines for a in sizes)
                and any(f.kind == ANSWER for f in figures)):
            # the arithmetic is an earlier turn's, word for word, and this turn's words have an answer of their
            # own ("which memory_stats() values matter?" after the pool's shares): that answer is not dropped
            by_arithmetic = False
        if asked_size and sizes and not facts and not by_arithmetic:
            # the figures asked for, computed on the setup the question states ("sharded FSDP over all
            # chips"): that setup is in the arithmetic, not something to be told they already do
            analysis = analysis.model_copy(update={"stated": []})
        if by_arithmetic and not facts:  # no log: general "what next" steps would bury the number asked for
            chosen = []
            # what they did is in the arithmetic ("state donated, output aliased"): no general word on it
            analysis = analysis.model_copy(update={"stated": []})
        elif any(a.subject in SIZES_THAT_EXPLAIN_THE_LOG for a in sizes):
            chosen = []  # the log's allocation is the user's own array: no profiling steps to find it
        if by_arithmetic and not {"snippet", "flag"} & set(analysis.asks):
            # the arithmetic asked for answers it: concept answers its words also touch are not shown,
            # nor the generation's HBM, which the arithmetic states as the capacity it used (an answer
            # to a marker the text shows, threefry's buffers, says why that array exists: it stays)
            marked = {f.subject for f in self.parts.figures.log_answers(f"{question}\n{log}", language, question)}
            # (an answer whose program's own settings the arithmetic used says where they come from: it stays)
            figures = [f for f in figures if f.kind not in (ANSWER, "hbm", "setting_default") or f.subject in marked
                       or (f.defaults and implied)]
        said_all = "\n".join([*(t.question for t in earlier if t.question), question])
        command = (self.commands.command(said_all, self._msg("command_from_conversation", language),
                                         cite=next((f.cite for f in [*sizes, *figures] if f.cite), None))
                   if self.commands.asks_for_one(question) else None)
        if command is not None:
            # "the train command for my setup": the tool's command with the settings the conversation
            # stated is the answer; other code and the figures already given are not shown again
            figures, sizes, chosen = [command], [], []
            analysis = analysis.model_copy(update={"stated": []})
        elif "snippet" in analysis.asks and any(f.snippet for f in sizes):
            # code asked for and filled with the asker's own shapes, mesh and devices: it is the
            # answer, before any short answer's toy code (which is left out)
            figures = [f.model_copy(update={"snippet": None}) if f.kind == ANSWER else f for f in figures]
            figures, sizes = [*sizes, *figures], []
        elif sizes and asked_size:  # asked for: the answer (and in scope, like any figure asked)
            # a yes/no that a short answer settles ("is that a problem?") leads with it, the size after
            # (and a flag asked beside the figure, "which variable turns NVLS off, and how much is left
            # outside the pool?": the flag's answer first, as the question asks it)
            settled = any(f.kind == ANSWER for f in figures) and (
                ("figure" not in analysis.asks and not self.sizing.asks_to_fit(question)) or "flag" in analysis.asks)
            figures, sizes = ([*figures, *sizes] if settled else [*sizes, *figures]), []
            # (the pasted HLO's own largest buffer says what failed: before any short answer)
            figures = sorted(figures, key=lambda f: f.subject != "hlo_largest")
        elif sizes and {"how", "snippet"} & set(analysis.asks) and any(f.kind == ANSWER for f in figures):
            # "how do I launch it?" after a conversation of arithmetic: the way asked for first, the
            # figures this turn changed after it
            figures, sizes = [*figures, *sizes], []
        # "did that, still the same error" with nothing new of its own: the conversation's short
        # answer again, whose conditions are what to check (not passages found by this turn's words)
        if (context.follow_up and context.subject and not figures and not sizes and not chosen
                and not outcome.verdict and not req_log_new and conversation.still_failing(question)):
            again = [f for f in self.parts.figures_for(context.subject, language) if f.kind == ANSWER]
            figures = [f.model_copy(update={"text": join_sentences([self._msg("still_after_answer", language), f.text],
                                                                     language)})
                       if i == 0 else f for i, f in enumerate(again)]
        elif (context.follow_up and not figures and not sizes and not chosen and not outcome.verdict and not req_log_new
              and "figure" in analysis.asks and not {"snippet", "flag"} & set(analysis.asks)):
            # a figure asked that the conversation's own figures do not give: said so, with what sizes it,
            # not the earlier answer again
            figures = [FigureAnswer(kind=ANSWER, subject="figure_not_computed",
                                    text=self._msg("figure_not_computed", language))]
        elif (context.follow_up and said_before and not figures and not sizes and not chosen
              and not outcome.verdict and not req_log_new):
            # a question this turn asks in its own words that an earlier answer already answers: that
            # answer, said to be the same one (not "I cannot go further")
            figures = [said_before[0].model_copy(update={"text": join_sentences(
                [self._msg("earlier_answer_holds", language), said_before[0].text], language)})]
        elif (context.follow_up and context.subject and not figures and not sizes and not chosen
              and not outcome.verdict and not req_log_new and {"how", "next", "flag", "snippet"} & set(analysis.asks)
              and "why" not in analysis.asks):
            # "so what can I change to reduce that?" answered by the conversation's short answer:
            # that answer again, said to be the earlier one, rather than "nothing more"
            again = [f for f in self.parts.figures_for(context.subject, language) if f.kind == ANSWER][:1]
            figures = [f.model_copy(update={"text": join_sentences([self._msg("earlier_answer_again", language),
                                                                      f.text], language)}) for f in again]
        figures = self._library_not_known(question, context, figures, language)
        judged = {t for f in figures for t in f.settles}
        if judged:  # a short answer that judges what was tried ("those settings are the GPU's, not host RAM")
            stated = analysis.tried if analysis.stated is None else analysis.stated
            analysis = analysis.model_copy(update={"stated": [t for t in stated if t not in judged]})
        # What answers this turn is its short answer or arithmetic: an error named without figures
        # ("CUDA_ERROR_OUT_OF_MEMORY, why?") adds no general steps after it, and a follow-up
        # without new evidence does not list again the steps its first turn gave.
        answered = (any(f.kind == ANSWER for f in figures) or bool(sizes and asked_size)
                    # a setting explained is the answer unless the turn asks what to do next
                    or (bool(figures) and not {"next", "error"} & set(analysis.asks)))
        quiet = answered and ((not measured and req.report is None)
                              or (context.follow_up and not req_log_new))
        if quiet:
            chosen = [r for r in chosen if r.evidence and not context.follow_up]
        elif any(f.kind == ANSWER for f in figures) and facts:
            # a log whose question a short answer settles ("leak or fragmentation?"): the evidence's
            # first steps only, not every profiling step of its category
            chosen = chosen[:MAX_STEPS_BESIDE_ANSWER]
        # arithmetic on the memory the question's own figures need is an answer in scope
        grounded = not foreign and (bool(chosen) or bool(outcome.verdict) or bool(analysis.tried)
                                    or bool(figures) or bool(sizes) or oom_named
                                    or grounding.decide(
            query, results, searcher, query_vector=vector,
            language=detection.language if detection is not None and query == question else None,
            names_topic=analysis.topics_named,
        ).grounded)
        # A follow-up of a conversation the guides cover is never "not covered": it is answered
        # from the conversation's subject ("and gc.collect(), does that help?").
        if not grounded and not foreign and context.follow_up and context.subject:
            # the earlier turns were answered: by a short answer, or by passages found by meaning
            grounded = bool(self.parts.figures.short_answers_of(context.subject)) or grounding.decide(
                context.subject, searcher.search(context.subject, k=5).results, searcher).grounded
        # "did that, still OOM, now what?" in a conversation: never "not covered"; answered with the
        # next steps its subject allows (or asked for the evidence that would decide them)
        if (not grounded and not foreign and context.follow_up
                and ({"next", "error", "snippet", "flag", "figure"} & set(analysis.asks) or analysis.tried)):
            grounded = True

        remedies = []
        asked_limit = question_api.limit_asked(question)  # a limit the asker wants set ("vmem_limit_bytes to 120MB")
        asked_code: set[str] = set()  # steps whose code carries a value this turn asks for
        for r in chosen:
            try:
                text = remedy_text(self.catalogue, r, shown, language, format_bytes)
            except MissingValue:  # a blank value in the evidence: skip the step
                continue
            base = self.parts.snippet(r.id)
            snippet = self.rules.fill_snippet(base, outcome.snippets.get(r.id), facts)
            if own_code and r.id not in outcome.snippets:
                snippet = None  # the asker's own code is above: not a step's toy example beside it
            if r.id not in outcome.snippets:  # a limit the asker wants to set, when no log computed one
                snippet = fill_limit(snippet, asked_limit)
            elif context.follow_up and takes_limit(base, asked_limit):
                # "and if I raise it to 64 MiB after all, how does my pallas_call look?": the limit
                # asked now, not the one the log computed (an earlier turn gave that one)
                snippet = fill_limit(base, asked_limit)
                asked_code.add(r.id)
            remedies.append(Remedy(id=r.id, text=text, cite=r.cite, flags=r.flags, apis=r.apis,
                                   triggered_by_evidence=r.evidence, snippet=snippet))
        # Without evidence the answer leads with the remedy that answers the topic asked about;
        # with a log or report the evidence orders the steps.
        # A figure asked for is the answer: no remedy guessed from the question's meaning leads it.
        lead = (self._lead(analysis, language, {r.id for r in remedies}, asked_limit)
                if grounded and diagnosis is None and not facts
                # the figures asked for are the answer ("how many GiB per chip, to size my batch?")
                and not (figures and (not analysis.topics_named or "figure" in analysis.asks))
                and not any(f.kind in (ANSWER, SIZING) for f in figures)
                and not by_arithmetic else None)
        if lead is not None:
            if own_code:  # the asker's own code is above: not the step's toy example beside it
                lead = lead.model_copy(update={"snippet": None})
            remedies.insert(0, lead)
        code_asked = context.follow_up and "snippet" in analysis.asks and any(f.snippet for f in figures)
        if grounded and not by_arithmetic and not code_asked:
            # (the arithmetic answers it, or the code a follow-up asked for: no figure's general steps after it)
            remedies += [Remedy(id=r.id, text=text, cite=r.cite, flags=r.flags, apis=r.apis,
                                snippet=fill_limit(self.parts.snippet(r.id), asked_limit))
                         for r, text in self.parts.figure_remedies(
                             figures, language, format_bytes,
                             {r.id for r in remedies} | set(analysis.tried_remedies))
                         if r.id not in outcome.exclude]
        if excluded:  # ("vmem_limit_bytes to 64 MiB" on a core with 16 MiB of VMEM)
            remedies = [r for r in remedies if r.id not in excluded]
            lead = None if lead is not None and lead.id in excluded else lead
        if outcome.whole_fix and outcome.verdict:  # the verdict names the fix: no steps after it
            remedies, lead = [], None
        if outcome.not_memory and outcome.verdict:
            # the verdict says memory is not the cause (cuDNN that did not start with the card free):
            # no step that saves memory after it, nor a short answer that tunes JAX's pool, which
            # would contradict it
            remedies, lead = [], None
            figures = [f for f in figures if not (f.kind in (ANSWER, "setting_default") and _POOL_SETTINGS.search(f.text))]
        # A GPU question gets no step or card that holds on TPU only (an XLA:TPU flag).
        if self._gpu_conversation(facts, earlier, question):
            tpu_only = self.platforms.tpu_only
            remedies = [r for r in remedies if not self.platforms.tpu_only_remedy(r)]
            if lead is not None and self.platforms.tpu_only_remedy(lead):
                lead = None
            results = [r for r in results if r.card is None or not tpu_only(
                "\n".join([r.card.summary, *r.card.actions]))]
            # nor a short answer about TPU slices only (launching a multi-host TPU slice)
            figures = [f for f in figures if not (f.kind == ANSWER and tpu_only(f.text))]
        # a short answer to a question without figures of its own is not followed by a measuring plan
        next_steps = (self.parts.next_steps_for(question, facts, language, log)
                      if grounded and not quiet and not outcome.not_memory and not outcome.not_failure
                      and not outcome.whole_fix else [])
        if next_steps and self._gpu_conversation(facts, earlier, question):
            # a GPU question is not sent to estimate its program for a TPU generation
            next_steps = [n for n in next_steps if not self.platforms.tpu_only(n.command)]
        cited = results if grounded and not (outcome.verdict and not remedies) else []
        no_section = False
        # (a follow-up: when its conversation began so; else its subject's passages answer it)
        if (grounded and not foreign and not figures and not sizes and not remedies
                and (not context.follow_up or (seen is not None and NO_SECTION in seen.answers))
                and lead is None and not outcome.verdict and req.report is None):
            # a JAX memory question that nothing here answers (no section, short answer, figure or
            # step): said so, with how to measure it on the asker's program, not passages found by
            # meaning presented as its answer
            if "figure" in analysis.asks or analysis.sizes or log:  # what it takes: measured on their program
                measure = self.parts.figures.short_answer(MEASURE_ANSWER, language)
                figures = [FigureAnswer(kind=ANSWER, subject=NO_SECTION, text=self._msg("no_section", language),
                                        snippet=measure.snippet if measure is not None else None)]
            else:  # how to do something: the evidence that would decide it
                figures = [FigureAnswer(kind=ANSWER, subject=NO_SECTION,
                                        text=self._msg("no_section_evidence", language))]
            no_section = True
        # A short answer brings its own guide section; other passages found by meaning would be
        # beside the point after it.
        answer_cites = list(dict.fromkeys(f.cite for f in figures if f.kind in (ANSWER, SIZING) and f.cite))
        # arithmetic shown without a log: the passages beside it are those of its section
        size_cites = [f.cite for f in sizes if f.cite] if not facts else []
        if answer_cites or size_cites or quiet:
            cited = [r for r in cited if r.citation in answer_cites or r.citation in size_cites]
        shown_results = [] if quiet else cited if (figures or sizes) and not facts else results
        if (context.follow_up and context.subject and not (figures or sizes or chosen or outcome.verdict or req_log_new)
                and self.parts.figures.short_answers_of(context.subject)):
            # "and why is that?" after a short answer: passages found by this turn's few words are
            # beside the point; the answer says that the earlier one is all the guides have
            shown_results = []
        if not answer_cites and figures and not analysis.topics_named and not facts:
            # a figure asked for is the answer: no passage found by meaning is shown after it,
            # and one is cited for its context
            cited, shown_results = cited[:1], []
        if no_section:  # passages found by meaning only are not its answer, nor its sources
            cited, shown_results = [], []
        citations = self._citations(searcher, remedies, cited, language=language,
                                    first=list(dict.fromkeys([
                                        *([outcome.cite] if outcome.verdict and outcome.cite else []),
                                        *answer_cites, *(f.cite for f in sizes if f.cite)])))
        note = (self._msg(note_key, language, language_name=language_name(detected or "", language))
                if note_key else None)
        topology = self.sizing.topology_named(question) or self.sizing.topology_named(said_all)
        if topology and topology != DEFAULT_TOPOLOGY:
            # code that compiles deviceless for "v5e:2x2" is given for the slice the conversation names
            figures = [f.model_copy(update={"text": f.text.replace(DEFAULT_TOPOLOGY, topology),
                                            "snippet": f.snippet.replace(DEFAULT_TOPOLOGY, topology) if f.snippet else None})
                       if DEFAULT_TOPOLOGY in f.text or DEFAULT_TOPOLOGY in (f.snippet or "") else f for f in figures]
        # (whatever path chose them: no short answer about the other platform's memory only)
        figures = self._for_this_platform(figures, facts, earlier, question)
        shown_now = Shown(answers={f.subject for f in figures if f.kind == ANSWER})
        verdict_asked = context.follow_up and self._asks_about_verdict(analysis, outcome)
        answer = self._compose(language, note, diagnosis, shown, req.report,
                               remedies, shown_results if grounded else [],
                               citations, grounded,
                               # unasked arithmetic comes after the short answer that answers the question
                               figures=(([*figures, *sizes] if answers_it and not asked_size else [*sizes, *figures])
                                        if grounded else figures), next_steps=next_steps,
                               # a follow-up asking about something else does not get the verdict
                               # it was given on the same evidence one turn before
                               verdict=None if (figures and context.follow_up and not req_log_new
                                                and not verdict_asked)
                               else outcome.verdict, verdict_again=verdict_asked,
                               lead=lead, analysis=analysis, evidence_verdict=bool(outcome.verdict),
                               filled=frozenset(outcome.snippets), not_memory=outcome.not_memory,
                               not_failure=outcome.not_failure,
                               quiet=quiet, seen=seen, shown=shown_now, asked_code=frozenset(asked_code),
                               asked_again=asked_size or bool({"snippet", "flag", "figure"} & set(analysis.asks)))
        response = AskResponse(
            language=language,
            diagnosis=diagnosis,
            answer=answer,
            citations=citations,
            grounded=grounded,
            detected_language=detected,
            language_note=note,
            remedies=remedies,
            confidence=round(confidence, 3),
            facts=facts,
            figures=[*sizes, *figures],
            next_steps=next_steps,
            verdict=outcome.verdict,
            follow_up=context.follow_up,
            inherited=context.inherited,
            tried=list(dict.fromkeys([*context.tried, *analysis.tried_remedies])),
            tried_items=list(analysis.tried),
        )
        response._shown = shown_now.merged(seen)
        self._keep_shown(_turns_key([*earlier, this_turn], language), response._shown)
        return response

    @staticmethod
    def _asks_about_verdict(analysis, outcome) -> bool:
        """Whether a follow-up names the remedy the verdict leads with ("and with donate_argnums on
        the state, does it fit?" after the donation verdict): its figures are the answer again."""
        led = set(outcome.lead)
        return bool(led) and any(question_api.topic(t).remedy in led for t in analysis.topics)

    def _gpu_conversation(self, facts: dict, earlier: list[ConversationTurn], question: str) -> bool:
        """Whether the evidence, or else the conversation's words, are about a GPU and no TPU."""
        return facts.get("backend") == "gpu" or (not facts.get("backend") and self.platforms.gpu_only(
            "\n".join([*(t.question for t in earlier if t.question), question])))

    def _for_this_platform(self, figures: list, facts: dict, earlier: list[ConversationTurn], question: str) -> list:
        """`figures` less the short answers about TPUs only (launching a TPU slice) when the
        conversation is about a GPU, and less those about GPUs only (a GPU pool's settings for test
        workers) when it is about a TPU."""
        if self._gpu_conversation(facts, earlier, question):
            return [f for f in figures if not (f.kind == ANSWER and self.platforms.tpu_only(f.text))]
        said = "\n".join([*(t.question for t in earlier if t.question), question])
        if facts.get("backend") == "tpu" or (not facts.get("backend") and self.platforms.tpu_named_only(said)):
            return [f for f in figures if not (f.kind == ANSWER and self.platforms.gpu_only(f.text))]
        return figures

    def _keep_shown(self, key: str, shown: Shown) -> None:
        with self._shown_lock:
            self._shown[key] = shown
            self._shown.move_to_end(key)
            while len(self._shown) > MAX_SHOWN_KEPT:
                self._shown.popitem(last=False)

    def _fraction_computed_before(self, earlier: list[ConversationTurn], language: str) -> float | None:
        """The pool fraction the conversation's last turn was answered with, computed from its figures
        (the last one its arithmetic names: the value that fits, after one that did not)."""
        if not earlier or not earlier[-1].question:
            return None
        before = "\n".join(t.question for t in earlier[:-1] if t.question)
        lines = self.sizing.answer(earlier[-1].question, language, earlier=before, asked=True)
        values = [float(v) for a in lines if a.subject.startswith("pool") for v in _COMPUTED_FRACTION.findall(a.text)]
        return values[-1] if values else None

    def _library_not_known(self, question: str, context: conversation.Context, figures: list, language: str) -> list:
        """An argument of a library built on JAX asked for ("is there a blackjax argument to turn that
        off?") where no short answer speaks of that library: said first that its argument cannot be
        named, before what the answer says of the memory in JAX (not a stock paragraph passed off as
        the answer)."""
        # ("which config key is it?" of the library an earlier turn named)
        asked = question_api.library_argument_asked(question, context.subject if context.follow_up else "")
        answers = [f for f in figures if f.kind == ANSWER]
        if not asked or any(question_api.names_library(f.text, lib) for f in answers for lib in asked):
            return figures
        if "xla" in question.lower() and any("--xla_" in f.text for f in answers):
            return figures  # an XLA flag asked beside the library ("MaxText with LHS: which XLA flag?"), and named
        library = asked[0].name
        if not answers:
            return [FigureAnswer(kind=ANSWER, subject="library_argument_unknown",
                                 text=self._msg("library_argument_unknown_alone", language, library=library)), *figures]
        first = answers[0]
        said = join_sentences([self._msg("library_argument_unknown", language, library=library), first.text], language)
        return [f.model_copy(update={"text": said}) if f is first else f for f in figures]

    def _shown_before(self, earlier: list[ConversationTurn], language: str) -> Shown | None:
        """What the conversation's earlier answers showed: kept when they were answered, else
        answered again as they were (the same turns give the same answers) in its language."""
        if not earlier:
            return None
        if not earlier[-1].answered:  # (a Slack message nobody asked the bot about showed nothing)
            return self._shown_before(earlier[:-1], language)
        with self._shown_lock:
            kept = self._shown.get(_turns_key(earlier, language))
        if kept is not None:
            return kept
        last = earlier[-1]
        try:
            before = self.ask(AskRequest(question=last.question, error_log=last.error_log, report=last.report,
                                         language=language), earlier[:-1])
        except QueryError:
            return None
        return before._shown

    def _other_framework(self, language, detected, note_key, diagnosis, framework, facts) -> AskResponse:
        """Another framework's OOM (PyTorch, TensorFlow, plain CUDA): say what it is and that the
        guides are about JAX/XLA; nothing grounded, no remedy, no snippet."""
        name = (self.rules.framework_name(framework, language) if framework is not None
                else self._msg("other_framework_unnamed", language))
        note = (self._msg(note_key, language, language_name=language_name(detected or "", language))
                if note_key else None)
        lines = [f"_{note}_", ""] if note else []
        # What was read of it: the error's name and figures when the parser knows the wording
        # (that line says the JAX/XLA advice does not apply), else what recognised it.
        line = None
        if diagnosis is not None and diagnosis.category == OTHER_FRAMEWORK:
            line = self._diagnosis_line(diagnosis, _user_text_as_code(facts, self._vocabulary), None, language)
        lines.append(line or self._msg("other_framework", language, framework=name))
        if framework is not None and framework.pointer:  # where to look instead, said to be outside the guides
            lines += ["", framework.pointer.get(language) or framework.pointer["en"]]
        return AskResponse(language=language, diagnosis=diagnosis, answer="\n".join(lines) + "\n",
                           citations=[], grounded=False, detected_language=detected,
                           language_note=note, remedies=[], confidence=0.0, facts={},
                           out_of_scope=framework.id if framework is not None else OTHER_FRAMEWORK)

    def _then_after_tried(self, analysis, question: str, language: str, shown: set[str]) -> list[FigureAnswer]:
        """For what this turn says was done, the short answer that is its next step (intents.yaml
        `then`): gradient accumulation in place, asking what next -> remat in a scan."""
        low = question.lower()
        out: list[FigureAnswer] = []
        for tried_id in (analysis.tried if analysis.stated is None else analysis.stated):
            for then in question_api.tried_item(tried_id).then:
                if then.when and not any(w in low for w in then.when):
                    continue
                answer = self.parts.figures.short_answer(then.answer, language)
                if answer is not None and answer.subject not in shown and answer.about not in analysis.tried:
                    out.append(answer)
                    shown.add(answer.subject)
                break
        return out

    def _code_named_before(self, earlier: list[ConversationTurn], language: str, skip: set[str] = frozenset(),
                           limit: int = 1) -> list[FigureAnswer]:
        """The code that the latest of `earlier` naming some names ("offload mu/nu to the host"),
        at most `limit` pieces, less the subjects in `skip`."""
        for turn in reversed(earlier):
            found = [f for f in self.parts.figures.code_named(turn.question or "", language) if f.subject not in skip]
            if found:
                return found[:limit]
        return []

    def _not_again(self, figures, answered: set[str], analysis: QuestionAnalysis, language: str):
        """`figures` less the short answers an earlier turn gave (`answered`); one asked for again
        as code or values ("what exact values for each?") is shown by its code alone."""
        code_asked = bool({"snippet", "flag"} & set(analysis.asks))
        out = []
        for f in figures:
            if f.kind != ANSWER or f.subject not in answered:
                out.append(f)
            elif code_asked and f.snippet:
                out.append(f.model_copy(update={"text": self._msg("earlier_answer_code", language)}))
        return out

    def _continues(self, question: str, log: str | None, earlier: list[ConversationTurn]) -> bool:
        """Whether a question continues its conversation: it is in scope on its own, or it
        points back at it ("what next?") or speaks of memory or ML, and names no other system.
        An off-topic question ("how do I bake bread?") starts afresh, and is judged alone."""
        question = (question or "").strip()
        if not question or (log or "").strip():
            return True  # evidence alone, or new evidence for the same conversation
        searcher = self.searcher
        vector = searcher.embed_queries([question])[0]
        results = searcher.search(question, k=5, query_vector=vector).results
        alone = grounding.decide(question, results, searcher, query_vector=vector)
        if alone.grounded:
            return True
        f = alone.features
        # "and jax.clear_caches() or gc.collect(), does that help?": a name the guides lack (or
        # one of another world's, "gc"), in a question that points back at the conversation, is
        # still about it.
        if conversation.refers_back(question):
            return True
        # "ok and which policy keeps the matmuls?": a question answered in the conversation's terms
        subject = "\n".join(t.question for t in earlier if t.question)
        if self.parts.figures.follow_up_answers(subject, question, FALLBACK):
            return True
        # "and in int8?", "with batch 32?": a figure that changes the conversation's arithmetic
        if self.sizing.answer(question, FALLBACK, asked=True, earlier=subject):
            return True
        # close in meaning to the conversation's earlier questions: the same conversation, however
        # it is worded ("with power-of-two buckets, how many compiles?" after a recompiling step)
        if float(vector @ searcher.embed_queries([subject])[0]) >= FOLLOW_UP_COSINE:
            return True
        # A name the guides lack ("lm_head", "MultiSteps") in a question about memory is a detail
        # of the same conversation; in one about ML only ("the best learning-rate schedule?") it is
        # another subject.
        if f.get("foreign", 0) > 0:
            return False
        if f.get("memory", 0) > 0 or f.get("error_wording", 0) > 0:
            return True
        # "give me the exact command to launch it": the code for what the conversation was about
        if "snippet" in analyse(question).asks:
            return True
        return f.get("unknown_names", 0) == 0 and any(f.get(k, 0) > 0 for k in ("framework", "domain", "ml"))

    # -- steps ------------------------------------------------------------------------------

    def _next_without_evidence(self, subject: str, analysis: QuestionAnalysis) -> list:
        """The untried remedies that the conversation's topic lists for "what next" (intents.yaml
        `next`), at most MAX_NEXT_WITHOUT_EVIDENCE; [] when no topic with such a list is named."""
        for topics in (analysis.topics, analyse(subject).topics if subject else []):
            for topic_id in topics:
                wanted = question_api.topic(topic_id).next
                if not wanted:
                    continue
                category = self.catalogue.remedy(wanted[0]).category[0]
                pool = {r.id: r for r in choose_remedies(self.catalogue, {}, category,
                                                         limit=len(self.catalogue.remedies))}
                return [pool[rid] for rid in wanted
                        if rid in pool and rid not in analysis.tried_remedies][:MAX_NEXT_WITHOUT_EVIDENCE]
        # no topic named ("remat and bf16 on, still OOM, what else?"): the untried steps of an OOM said
        # without a log
        return [r for r in self._steps_for_an_unnamed_oom() if r.id not in analysis.tried_remedies]

    def _steps_for_an_unnamed_oom(self) -> list:
        """The steps for an OOM said without a log, a topic or anything tried (intents.yaml
        `unnamed_oom_next`), at most MAX_NEXT_WITHOUT_EVIDENCE."""
        wanted = question_api.unnamed_oom_next()
        if not wanted:
            return []
        category = self.catalogue.remedy(wanted[0]).category[0]
        pool = {r.id: r for r in choose_remedies(self.catalogue, {}, category, limit=len(self.catalogue.remedies))}
        return [pool[rid] for rid in wanted if rid in pool][:MAX_NEXT_WITHOUT_EVIDENCE]

    def _generation(self, question: str, log: str, facts: dict) -> str | None:
        """The TPU generation the question (else the head of the log) names; looked for only
        where a figure depends on it (a VMEM error), as the search costs milliseconds per KiB."""
        if facts.get("category") != "scoped_vmem_oom":
            return None
        named = (self.parts.figures.generations_in(question[:GENERATION_CHARS])
                 or self.parts.figures.generations_in(log[:GENERATION_CHARS]))
        return named[0] if named else None

    def _capacity_of_the_device_named(self, facts: dict, question: str) -> dict:
        """A TPU log that reports no capacity ("Total hbm usage >= 9.50G" without "of 7.48G"), about
        a TPU the question names: that device's usable HBM is the capacity, and the program and its
        arguments (what the compiler sets against it) are what it needs."""
        needs = (facts.get("program_bytes") or 0) + (facts.get("argument_bytes") or 0)
        if facts.get("category") != "compile_hbm_oom" or facts.get("available_bytes") or not needs:
            return facts
        s = self.sizing.read(question)
        if not (s.device and s.device.startswith("TPU") and s.device_memory):
            return facts
        out = {**facts, "available_bytes": s.device_memory, "used_bytes": needs}
        if needs > s.device_memory:
            out["exceeded_by_bytes"] = needs - s.device_memory
        return out

    def _lead(self, analysis: QuestionAnalysis, language: str, chosen: set[str],
              limit: int | None = None) -> Remedy | None:
        """The remedy that answers the topic asked about, to lead the answer; None when no topic
        names one, when it was tried already, or when the evidence chose it as a step anyway.
        `limit`: a size the question asks a limit to be set to (its snippet's size, first)."""
        for topic_id in analysis.topics:
            rid = question_api.topic(topic_id).remedy
            if rid is None or rid in analysis.tried_remedies or rid in chosen:
                continue
            r = self.catalogue.remedy(rid)
            try:
                text = remedy_text(self.catalogue, r, {}, language, format_bytes)
            except MissingValue:
                continue
            return Remedy(id=r.id, text=text, cite=r.cite, flags=r.flags, apis=r.apis,
                          # the size the asker names, unless it is one they say they tried already
                          snippet=fill_size(self.parts.snippet(r.id), question_api.topic(topic_id).fill,
                                            limit or (analysis.sizes[0] if analysis.sizes and not analysis.tried
                                                      else None)))
        return None

    @staticmethod
    def _for_own_step(figure: FigureAnswer, said: str) -> FigureAnswer:
        """A donation example written for the step the conversation states ("def train_step(params,
        opt_state, batch) -> (params, opt_state, loss)"): its own names, donating what it returns, and
        the text's `donate_argnums` the same."""
        code, argnums = fill_signature(figure.snippet, said)
        if argnums is None:
            return figure
        return figure.model_copy(update={"snippet": code, "text": figure.text.replace("donate_argnums=(0,)", argnums)})

    @staticmethod
    def _language(explicit: str | None, d: Detection | None) -> tuple[str, str | None, str | None]:
        """(answer language, language seen, message key explaining a fallback or None), from the
        language asked for or else the question's detected one."""
        if explicit:
            code = base_language(explicit)
            if is_supported(code):
                return code, code, None
            return FALLBACK, code, "unsupported_language"
        if not d.supported:
            return FALLBACK, d.detected, "unsupported_language"
        return d.language, d.detected or d.language, None

    @staticmethod
    def _retrieval_query(question: str, diagnosis: ParsedError | None, subject: str = "") -> str:
        parts = [question[:3000]] if question else []
        if subject:  # a follow-up: the conversation's earlier questions say what "it" is
            parts.append(subject)
        if diagnosis is not None and diagnosis.message:
            parts.append(diagnosis.message[:600])
        return "\n".join(parts).strip()

    @staticmethod
    def _citations(searcher: Searcher, remedies: list[Remedy], results: list[SearchResult],
                   first: list[str] = (), language: str | None = None) -> list[Citation]:
        seen: set[str] = set()
        out: list[Citation] = []
        by_cite = {r.citation: r for r in results}
        for cite in [*first, *(r.cite for r in remedies), *(r.citation for r in results[:MAX_CARDS])]:
            if cite in seen or len(out) >= MAX_CITATIONS:
                continue
            seen.add(cite)
            doc_id, _, section_id = cite.partition("#")
            guide = searcher.guides.get(doc_id)
            section = guide.section(section_id) if guide else None
            if guide is None or section is None:
                continue
            hit = by_cite.get(cite)
            translation = _card_text(searcher, doc_id, section_id, language, guide.language)
            out.append(
                Citation(
                    doc_id=doc_id, section=section_id, language=guide.language,
                    quote=_quote(hit.text if hit else section.text),
                    translation=translation, translation_language=language if translation else None,
                    section_title=section.title, guide_title=guide.title, citation=cite,
                )
            )
        return out

    def _compose(self, language, note, diagnosis, facts, report, remedies, results, citations,
                 grounded, figures=(), next_steps=(), verdict=None, lead=None, analysis=None,
                 evidence_verdict=False, quiet=False, filled=frozenset(), seen: Shown | None = None,
                 shown: Shown | None = None, asked_again: bool = False, not_memory: bool = False,
                 not_failure: bool = False, verdict_again: bool = False,
                 asked_code: frozenset[str] = frozenset()) -> str:
        """The answer's Markdown. `seen`: what the conversation's earlier answers showed, not shown
        again unless `asked_again` (the turn asks for a figure, a flag or code); `shown`: filled with
        what this answer shows; `verdict_again`: the verdict is shown although an earlier turn gave it."""
        seen = seen or Shown()
        shown = shown if shown is not None else Shown()
        # the guide sections that short answers were filed under: named among the sources, not quoted,
        # unless a step, a card or the lead shown comes from them (a quoted "reduce the batch" under an
        # answer about unified memory reads as part of it)
        filed_under = {f.cite for f in figures if f.kind == ANSWER and f.cite}
        lines: list[str] = []
        if note:
            lines += [f"_{note}_", ""]
        if verdict in seen.lines and not verdict_again:
            # the same verdict on the same evidence, given one turn before (unless the turn asks
            # about the remedy it leads with: "with donation on, does it fit?")
            verdict = None
        if analysis is not None and "flag" in analysis.asks and verdict:
            # "which XLA flag writes that dump?": the flag's line is the answer, before what the log says
            flags = [f for f in figures if f.kind == "setting_default" and f.text not in seen.lines]
            for figure in flags:
                lines += [figure.text, ""]
                shown.lines.add(figure.text)
            figures = [f for f in figures if f not in flags]
        if verdict:  # the answer to "what now?", from the user's own numbers, comes first
            lines += [f"**{verdict}**", ""]
            shown.lines.add(verdict)
        shown_code: set[str] = shown.code
        # code or an answer line an earlier turn gave is not given again, unless this turn asks for
        # it ("show me the code", "which flag was it?")
        if not asked_again:
            shown_code |= seen.code
            figures = [f for f in figures if f.text not in seen.lines]
        else:  # asked again: the arithmetic an earlier turn gave word for word is not the new figure asked
            new = [f for f in figures if not (f.kind == SIZING and f.text in seen.lines)]
            figures = new if any(f.kind == SIZING for f in new) or not any(f.kind == SIZING for f in figures) else figures
        # code or a configuration asked for, and every line would be the earlier answer's again, word for
        # word, none with code to hand over: said so, rather than given twice (a figure or a setting
        # asked again, "so how many sequences at most?", is its line again; code asked again is given)
        repeated = (bool(figures) and bool(seen.lines) and analysis is not None and "snippet" in analysis.asks
                    and "flag" not in analysis.asks and all(f.text in seen.lines and not f.snippet for f in figures))
        if repeated:
            figures = []
        shown.lines |= {f.text for f in figures}
        for figure in figures:  # a figure or short answer asked for, with its code when it has some
            lines += [figure.text, *self.parts.snippet_lines(figure.snippet, shown_code)]
        if figures:
            lines.append("")
        # `quiet`: a short answer says it all; a diagnosis line without figures adds nothing
        # (nor after a verdict that says memory is not the cause: cuDNN that did not start; nor "ran
        # out of memory" after one that says the warning read is not the failure)
        line = None if quiet or not_memory or not_failure else self._diagnosis_line(diagnosis, facts, report, language)
        # a follow-up that asks what next or how to fix it, or says what it tried since, is answered
        # in full (the steps not tried are its answer); one that asks something else (a figure, code,
        # yes or no) does not get the same log's diagnosis and steps again in place of an answer
        stated = [] if analysis is None else analysis.tried if analysis.stated is None else analysis.stated

        def _carries_asked(r) -> bool:  # a step whose code now carries the value this turn asks for
            return r.id in asked_code and bool(r.snippet) and r.snippet not in shown_code and r.snippet not in seen.code

        what_next = analysis is not None and ("next" in analysis.asks or bool(stated) or analysis.asks == ["how"])
        if line is not None and line in seen.lines and not what_next:
            line = None  # the same log's diagnosis, given word for word one turn before
        if line is not None:
            shown.lines.add(line)
        # a warning with its own verdict (the donation warning), or a log whose figures the arithmetic
        # above already read, is not "no known OOM message"
        if line and not ((verdict or evidence_verdict or any(f.kind == SIZING for f in figures)) and report is None
                         and str(facts.get("category") or "unknown") == "unknown"
                         and (diagnosis is None or diagnosis.category == "unknown")):
            lines += [f"**{self._msg('diagnosis', language)}:** {line}", ""]
        if isinstance(report, PlanReport):  # a plan leads with what was verified to fit
            lines += plan_lines(self._msg, report, language)
        if isinstance(report, DiffReport):  # what changed: the versions, the buffers that grew
            lines += diff_lines(self._msg, report, language)
        if not grounded:  # an off-topic question is not asked for an error log
            lines.append(self._msg("not_covered", language))
            return "\n".join(lines).strip() + "\n"
        # "I already did X, what now?": first why X was not enough, then what to do instead (an
        # earlier turn's X stays tried, its explanation is not repeated).
        one_each = analysis is not None and analysis.one_per_device
        for tried_id in stated:
            item = question_api.tried_item(tried_id)
            why = item.why_one_per_device if one_each and item.why_one_per_device else item.why
            lines += [why[language], ""]
        if lead is not None:  # the answer to what was asked, before the steps
            lines += [f"{lead.text} [`{lead.cite}`]", ""]
            lines += self.parts.snippet_lines(lead.snippet, shown_code)  # as a step would show it
        steps = [r for r in remedies if lead is None or r.id != lead.id]
        if verdict or lead is not None or any(f.kind == SIZING for f in figures) or (seen.lines and not what_next):
            # this turn has its own answer (a verdict, arithmetic), or asks something other than what
            # next: a step an earlier answer of the conversation gave word for word is not given again
            # (its code is not what a follow-up asking for "the exact code" of its own change asks for)
            steps = [r for r in steps if r.text not in seen.lines or _carries_asked(r)]
        shown.lines |= {r.text for r in steps}
        if steps:
            lines += [f"### {self._msg('what_to_do', language)}", ""]
            for n, r in enumerate(steps, start=1):
                lines.append(f"{n}. {r.text} [`{r.cite}`]")
                # after a verdict from the user's numbers, a general step's toy example is filler
                if not verdict or r.triggered_by_evidence or r.id in filled:
                    lines += self.parts.snippet_lines(r.snippet, shown_code)
            lines.append("")
        # A verdict without remedies (the donation warning) is the answer: no unrelated cards.
        shown_cards = [] if verdict and not remedies else results
        cards = [r for r in shown_cards if r.card is not None]
        if verdict or figures or steps or lead is not None or seen.lines:
            # an answer already, or a follow-up: a guide's worked example adds nothing
            cards = [r for r in cards if r.card.actions]
        if not steps and any(f.kind == SIZING for f in figures):
            cards = []  # the arithmetic on the asker's figures is the answer: a guide's general list is not
        info = self.catalogue.categories.get(str(facts.get("category") or ""))
        if info is not None and info.cite:  # a log says which error it is: only that error's guides
            guides = {c.split("#")[0] for c in info.cite}
            cards = [r for r in cards if r.citation.split("#")[0] in guides]
        # a verdict from the user's numbers with its steps is the answer; the guide's passage is
        # among the sources, not repeated as a card
        cards = [r for r in cards if r.citation not in seen.cards]  # a card an earlier turn showed
        if repeated:  # (nor passages found by this turn's words in place of the answer it repeats)
            cards = []
        cards = cards[: 0 if verdict and steps else 1 if steps else MAX_CARDS]
        shown.cards |= {r.citation for r in cards}
        if repeated and not (verdict or steps or lead is not None or stated):
            # code or a setting asked for that the earlier answer already gave all there is of
            lines += [self._msg("same_as_before", language), ""]
        elif not (verdict or figures or steps or cards or lead is not None or stated or line) and seen.lines | seen.cards:
            # a follow-up with nothing its earlier answers did not already say: said so, with what
            # would decide it (the next steps), not the same passages again
            lines += [self._msg("nothing_new_after_log" if diagnosis is not None or report is not None
                                else "nothing_new", language), ""]
        if cards:
            lines += [f"### {self._msg('from_the_guides', language)}", ""]
            for r in cards:
                lines += [f"**{r.card.title}** [`{r.citation}`]", "", r.card.summary, ""]
                # A card's actions repeat the guide's general list: not after "I already tried".
                if not steps and not (analysis is not None and analysis.tried):
                    lines += [f"{n}. {a}" for n, a in enumerate(r.card.actions, start=1)]
                    if r.card.actions:
                        lines.append("")
        lines += self.parts.next_step_lines(list(next_steps), language)
        if citations:
            lines += [f"### {self._msg('sources', language)}", ""]
            said = {r.cite for r in steps} | {r.citation for r in cards} | ({lead.cite} if lead is not None else set())
            for c in citations:
                # under a verdict that memory is not the cause, a guide's memory-saving passage
                # ("a smaller batch size ...") is named, not quoted: quoted, it reads as the advice
                quoted = not (not_memory and verdict) and (c.citation in said or c.citation not in filed_under)
                lines += self._source_lines(c, language, quoted=quoted)
        # a log is asked for only where it would settle the question: an error without its log
        if diagnosis is None and not facts and not figures and analysis is not None and "error" in analysis.asks:
            lines.append(f"_{self._msg('paste_log_hint', language)}_")
        return "\n".join(lines).strip() + "\n"

    def _source_lines(self, c: Citation, language: str, quoted: bool = True) -> list[str]:
        """One source: the passage in the reader's language first (the section's card), then the
        guide's own wording under an `↳` label, which the web page shows collapsed (<details>)
        and Slack moves into its small-print context; without a translation, the wording only."""
        where = c.guide_title if c.section_title == c.guide_title else f"{c.guide_title} › {c.section_title}"
        if language != c.language:  # the section's name in the reader's language, from its card
            card = getattr(self.searcher, "cards", {}).get((c.doc_id, c.section))
            text = card.texts.get(language) if card is not None else None
            if text is not None and text.title:
                where = text.title
        if not quoted:
            return [f"- **{where}** (`{c.citation}`, {c.translation_language or c.language})", ""]
        quote = [f"> {q}" if q else ">" for q in c.quote.split("\n")]
        if not c.translation:
            return [f"- **{where}** (`{c.citation}`, {c.language})", "", *quote, ""]
        label = self._msg("original_wording", language, language_name=language_name(c.language, language))
        return [f"- **{where}** (`{c.citation}`, {c.translation_language})", "",
                *(f"> {q}" if q else ">" for q in c.translation.split("\n")), "",
                f"{ORIGINAL_MARK} _{label}_ (`{c.citation}`, {c.language})", "", *quote, ""]

    def _diagnosis_line(self, diagnosis, facts, report, language) -> str | None:
        """The error's one-line diagnosis; for a report without an error, its summary; None
        when the evidence lacks a value the line needs (e.g. a report with blank fields)."""
        try:
            return self._diagnosis_text(diagnosis, facts, report, language)
        except MissingValue:
            return None

    def _diagnosis_text(self, diagnosis, facts, report, language) -> str | None:
        if diagnosis is not None or facts.get("category"):
            return diagnosis_line(self.catalogue, facts, language, format_bytes)
        if isinstance(report, EstimateReport):
            return self._msg("estimate_fits", language, target=_as_code(report.target.topology),
                             total=format_bytes(report.total_bytes),
                             hbm=format_bytes(report.target.hbm_bytes),
                             headroom=format_bytes(report.headroom_bytes))
        if isinstance(report, DiffReport):
            return diff_summary(self._msg, report, language)
        if isinstance(report, ProfileReport):
            return self._msg("profile_summary", language, calls=report.calls,
                             peak=format_bytes(report.peak_bytes),
                             growth_per_call=format_bytes(report.growth_bytes_per_call))
        return None

    def _msg(self, key: str, language: str, **values) -> str:
        return message(self.catalogue, key, language, **values)


# Facts from closed vocabularies; every other text fact is a name, shape or path copied from the
# user's log or report and is shown as code.
_VOCABULARY_FACTS = frozenset({"category", "backend", "memory_space", "tpu_generation", "vmem_table",
                               "peak_largest_role", "diff_grown_role", "params_label"})
# The parse category that other frameworks' OOMs may get (diagnostics/signatures.yaml).
OTHER_FRAMEWORK = "other_framework_oom"


def _turns_key(turns: list[ConversationTurn], language: str) -> str:
    """A conversation's turns and language as one short key."""
    h = hashlib.sha256(language.encode())
    for t in turns:
        for part in (t.question or "", t.error_log or "", t.report.model_dump_json() if t.report is not None else ""):
            h.update(b"\0" + part.encode("utf-8", "replace"))
    return h.hexdigest()


def _as_code(text: str) -> str:
    """`text` as a one-line Markdown code span: nothing in it reads as markup, a link or a mention
    on the web page or in Slack; blank text stays blank (so it still counts as missing)."""
    text = " ".join(str(text).split()).replace("`", "'")
    return f"`{text}`" if text else text


def _user_text_as_code(facts: dict, vocabulary: frozenset[str] = frozenset()) -> dict:
    """The facts as shown in an answer: text that came from the user as code spans; words of
    oomkb's own vocabulary (a fact whose values facts.yaml enumerates) stay plain."""
    return {k: _as_code(v) if isinstance(v, str) and k not in _VOCABULARY_FACTS and k not in vocabulary else v
            for k, v in facts.items()}


#: an environment variable a snippet sets (`os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = ...`)
_ENV_SET = re.compile(r'^\s*os\.environ\["(\w+)"\]\s*=', re.MULTILINE)  # (not one a comment offers)

#: a pool fraction an answer's arithmetic gives ("`XLA_PYTHON_CLIENT_MEM_FRACTION=2.44` in each process")
_COMPUTED_FRACTION = re.compile(r"XLA_PYTHON_CLIENT_MEM_FRACTION=(\d*\.?\d+)`")

#: Starts the line that labels a guide's original wording after its translation (app.js, Slack).
ORIGINAL_MARK = "↳"


def _card_text(searcher: Searcher, doc_id: str, section: str, language: str | None,
               guide_language: str) -> str | None:
    """The section's card summary in `language`, when the guide is in another language and
    the card has that language (never a fallback: a quote in a third language helps no one)."""
    if not language or language == guide_language:
        return None
    card = getattr(searcher, "cards", {}).get((doc_id, section))
    text = card.texts.get(language) if card is not None else None
    return _quote(text.summary, limit=QUOTE_CHARS * 2) if text is not None and text.summary else None


def _confidence(results: list[SearchResult]) -> float:
    if not results:
        return 0.0
    best = max(r.dense_score for r in results)
    return max(0.0, min(1.0, (best - DENSE_FLOOR) / (DENSE_CEIL - DENSE_FLOOR)))


_FENCE = re.compile(r"^\s*(```|~~~).*$", re.MULTILINE)
_SENTENCE_END = re.compile(r"[.!?。！？।؟](?=\s|$)")


def _quote(text: str, limit: int = QUOTE_CHARS) -> str:
    """A short excerpt of a guide passage, cut at a sentence end where possible."""
    text = _FENCE.sub("", text)
    lines = [" ".join(line.split()) for line in text.splitlines()]
    text = "\n".join(line for line in lines if line).strip()
    if len(text) <= limit:
        return text
    cut = text[:limit]
    ends = [m.end() for m in _SENTENCE_END.finditer(cut)]
    if ends and ends[-1] > limit // 3:
        return cut[: ends[-1]].rstrip()
    return cut.rstrip() + "…"


def load_assistant(index_dir: Path | None = None, docs_dir: Path | None = None,
                   progress: bool = False) -> Assistant:
    """Load the model and index once (building the index on first use) and the catalogue; the
    assistant then follows new index generations written by `oomkb index`."""
    from oomkb.kb.search import open_searcher

    searcher = open_searcher(index_dir=index_dir, docs_dir=docs_dir, progress=progress)
    return Assistant(LiveIndex(searcher, index_dir=index_dir, docs_dir=docs_dir))


def plan_lines(msg, report: PlanReport, language: str) -> list[str]:
    """A plan's verified fixes, fitting ones first, each with its measured figures, its snippet
    and the guide section it comes from; then the --vary answer. Markdown in ``language``.
    A line whose values are blank in the report (a hand-written one) is left out."""

    def lenient(key, lang, **values):
        try:
            return msg(key, lang, **values)
        except MissingValue:
            return None

    return [line for line in _plan_lines(lenient, report, language) if line is not None]


def _plan_lines(msg, report: PlanReport, language: str) -> list[str | None]:
    heading = msg("plan_heading", language, target=_as_code(report.target.topology))
    lines = [f"### {heading}" if heading else None, ""]
    fixes = sorted((f for f in report.fixes if f.verified), key=lambda f: not f.fits)
    for n, fix in enumerate(fixes, start=1):
        try:
            title = _fix_title(msg, fix, language, report)
        except (TypeError, ValueError, OverflowError):  # a hand-made setting of the wrong shape
            title = None
        if title is None:
            continue
        if fix.fits and fix.total_bytes is not None and fix.saving_bytes and fix.saving_bytes > 0:
            status = msg("plan_status_saves", language, total=format_bytes(fix.total_bytes),
                         saving=format_bytes(fix.saving_bytes))
        elif fix.fits and fix.total_bytes is not None:
            status = msg("plan_status_fits", language, total=format_bytes(fix.total_bytes))
        else:
            status = msg("plan_status_no", language)
        if status is None:
            continue
        cite = f" [`{_as_code(fix.cite)[1:-1]}`]" if fix.cite and _as_code(fix.cite) else ""
        lines.append(f"{n}. **{title}**: {status}{cite}")
        snippet = " ".join(fix.snippet.split()).replace("`", "'")  # one line, no fence escape
        if snippet and fix.fits:
            lines += ["", "   ```python", f"   {snippet}", "   ```"]
    vary = report.vary
    if vary is not None:
        lines.append("")
        if not vary.searched:
            lines.append(msg("plan_vary_not_searched", language, name=_as_code(vary.name),
                             compiles=vary.compiles))
        elif vary.largest_fitting is not None:
            lines.append(msg("plan_vary_largest", language, name=_as_code(vary.name),
                             value=vary.largest_fitting, compiles=vary.compiles))
        else:
            lines.append(msg("plan_vary_none", language, name=_as_code(vary.name), low=vary.low,
                             high=vary.high))
    lines += _choice_lines(msg, report, language)
    lines.append("")
    return lines


def _choice_lines(msg, report: PlanReport, language: str) -> list[str | None]:
    """One item per --choose value: with --vary its largest fitting value (the --vary message),
    else whether it fits and its measured total."""
    lines: list[str | None] = [""] if report.choices else []
    for row in report.choices:
        choice = _as_code(f"{row.name}={row.value}")
        v = row.vary
        if v is not None and not v.searched:
            text = msg("plan_vary_not_searched", language, name=_as_code(v.name), compiles=v.compiles)
        elif v is not None and row.at_value is not None:
            text = msg("plan_vary_largest", language, name=_as_code(v.name), value=row.at_value,
                       compiles=v.compiles)
        elif v is not None:
            text = msg("plan_vary_none", language, name=_as_code(v.name), low=v.low, high=v.high)
        elif row.fits and row.total_bytes is not None:
            text = msg("plan_status_fits", language, total=format_bytes(row.total_bytes))
        else:
            text = msg("plan_choice_no_fit", language)
        lines.append(f"- {choice}: {text}" if text and choice else None)
    return lines


def _fix_title(msg, fix, language: str, report: PlanReport) -> str | None:
    setting = fix.setting or {}
    if fix.id == "donate_arguments":
        names = setting.get("arguments") or [f"args[{n}]" for n in setting.get("donate_argnums", [])]
        return msg("plan_fix_donate_arguments", language,
                   arguments=_as_code(", ".join(str(n) for n in names)))
    if fix.id == "raise_scoped_vmem_limit":
        vmem = report.baseline.vmem
        if "vmem_limit_bytes" not in setting or (
                not fix.fits and vmem is not None and setting["vmem_limit_bytes"] >= vmem.capacity_bytes):
            if vmem is None:
                return None
            return msg("plan_fix_vmem_too_small", language, capacity=format_bytes(vmem.capacity_bytes))
        if "vmem_limit_bytes" in setting:
            return msg("plan_fix_raise_scoped_vmem_limit", language,
                       limit=format_bytes(int(setting["vmem_limit_bytes"])))
        return None
    if fix.id == "larger_topology" and "topology" in setting:
        return msg("plan_fix_larger_topology", language, topology=_as_code(setting["topology"]),
                   devices=setting.get("devices", "?"))
    if fix.id == "other_generation" and "generation" in setting:
        return msg("plan_fix_other_generation", language, generation=_as_code(setting["generation"]))
    if fix.id == "bf16_arguments":
        return msg("plan_fix_bf16_arguments", language)
    return None
