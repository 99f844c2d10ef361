"""Arithmetic on the figures a question states: a model's weights, its training state and an
inference KV cache, set against the devices the question names (`kb/catalogue/sizing.yaml`).

"Will a 30B model with Adam fit on a v4-8?" has an answer before any compile: 30e9 parameters ×
16 B is 447 GiB against 4 chips × 32 GiB. Each line says what it multiplied and what it assumed,
so the asker can check it; nothing here is presented as measured. In a conversation the figures
of the earlier turns count too ("and with batch 32?"), the last value stated winning, and a
follow-up gets a line only where its own figures changed the result.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from babel.numbers import format_decimal
from pydantic import BaseModel, ConfigDict, Field

from oomkb.diagnostics.parse import hlo_buffers
from oomkb.units import format_bytes, parse_size
from oomkb.kb.catalogue_file import read_model
from oomkb.kb.evidence_rules import SEQUENCE_MIN, VOCAB_MIN
from oomkb.kb.figures import FigureAnswer, Figures, load_figures
from oomkb.kb.language import join_sentences
from oomkb.kb.question import limit_asked, sizes_in
from oomkb.kb.remedies.plurals import placeholders
from oomkb.kb.errors import CatalogueError
from oomkb.kb.translations import check_texts

__all__ = ["Sizing", "Stated", "load_sizing"]

FILE = "sizing.yaml"
KIND = "sizing"  # the FigureAnswer kind of these lines
_DECIMAL_SHARE = re.compile(r"(?<![\d.])0?\.(\d{1,3})(?!\d|\.\d)")  # ".9", "0.87" (a share of the card)
GPU_POOL_SHARE = 0.75  # JAX's default GPU pool (the figures' XLA_PYTHON_CLIENT_MEM_FRACTION default)
POOL_SEEN_EXTRA = 2.5  # GiB above a pool that nvidia-smi may show with it (the CUDA context, cuBLAS/cuDNN)
HIGH_POOL_SHARE = 0.9  # a pool this large leaves little of the card to CUDA's own allocations
BUCKET_MIN = 128       # the smallest length bucket (a TPU lane's width)
SHARE_MARGIN = 0.03    # a process's share: its stated need over the card, plus this, rounded up to .05
EQUAL_SHARE_MARGIN = 0.02  # equal processes: their need over the card plus this, rounded up to .01
MAX_SHARES = 0.95      # shares summing above this leave too little for CUDA contexts and workspaces
TRAINING_CITE = "e1000-compile-hbm-oom#scenario-3b-architecture-sharding"
PAIRWISE_CITE = "e1000-compile-hbm-oom#scenario-2-large-allocations"  # a matrix of pairs: one large allocation
BEYOND_ANY_DEVICE = 256 << 30  # more than any single accelerator's memory (the largest hold under 200 GiB)
PAIRS_SLACK = 0.005  # a failed request this close to a matrix of pairs is that matrix (a library may pad it)
DONATION_CITE = "e1000-compile-hbm-oom#scenario-3a-configuration"
ACCUMULATION_CITE = "e1000-compile-hbm-oom#scenario-3a-configuration"
KV_CITE = "e1000-compile-hbm-oom#scenario-3a-configuration"
#: copies of the weights kept beside the trained ones (cues of sizing.yaml), bfloat16 each
WEIGHT_COPIES = ("reference_model", "rollout_copy")
POOL_CITE = "runtime-buffer-allocation#debugging"
SCORES_CITE = "e1000-compile-hbm-oom#scenario-2-large-allocations"
LOGITS_CITE = "e1000-compile-hbm-oom#scenario-2-large-allocations"
BLOCKS_CITE = "scoped-vmem-oom#retune-kernel"
BUCKETS_CITE = "e1000-compile-hbm-oom#scenario-3c-padding"
SLICE_CITE = "e1000-compile-hbm-oom#scenario-3b-architecture-sharding"
SMEM_CITE = "scoped-vmem-oom#retune-kernel"  # the kernel's own memory: smaller tables, more calls
ANALYSIS_CITE = "e1000-compile-hbm-oom#scenario-3a-configuration"
KEPT_CITE = "tensor-lifetime-leaks#memory-profile-timeline"
MiB = 1 << 20
ACTIVATIONS_CITE = "e1000-compile-hbm-oom#scenario-3e-rematerialization"
DATASET_CITE = "runtime-buffer-allocation#debugging"
NOT_VMEM_CITE = "e1000-compile-hbm-oom#scenario-3a-configuration"
LIMIT_CITE = "scoped-vmem-oom#retune-kernel"
#: a batch and the peak measured at it ("b96 صار 125.8 GiB", "batch 64: 102.4 GiB", "bs=128 -> 148.2GB")
_SERIES_POINT = re.compile(r"(?<![a-z0-9_])(?:b|bs|batch(?:[ _]size)?|lote|バッチ|배치|батч\w*|批次?)\s*[=:]?\s*(\d{1,5})\s*(?:\)|,)?\s*"
                         r"(?:صار|بيطلع|is|was|gives|takes|uses|needs|peaks? at|->|→|=|:|da|dá|даёт|ergibt|fait|→)?\s*"
                         r"(\d{1,4}(?:\.\d+)?)\s*(?:gib|gb|g)(?![a-z0-9_])")
#: a further point of a series a first one opened ("batch 8 → 20.2 GB, 16 → 34.5 GB"): an arrow between
_SERIES_MORE = re.compile(r"(?<![\d.])(\d{1,5})\s*(?:->|→)\s*(\d{1,4}(?:\.\d+)?)\s*(?:gib|gb|g)(?![a-z0-9_])")
#: JAX's own pool named ("el pool por defecto", "the default pool"), not the card
_POOL_NAMED = re.compile(r"(?<![a-z])pool|プール|풀|пул|池|المجمع|पूल")
#: a pool setting the conversation states (then the card, or what it sets, is the limit, not the default pool)
_POOL_SETTING_SAID = re.compile(r"mem_fraction|preallocate|allocator|unified_memory")
#: the largest batch asked ("el batch máximo", "the largest batch that fits")
_LARGEST_ASKED = re.compile(r"max|máx|largest|biggest|höchst|größt|plus grand|más grande|maior|максимальн|наибольш|"
                            r"最大|최대|अधिकतम|सबसे बड़|أقصى|أكبر")


def _series_points(low: str) -> dict[int, float]:
    """The (batch, peak GiB) points a text measures: each "batch N → X GB", and once one is written so,
    the "M → Y GB" after it."""
    points = {int(m.group(1)): float(m.group(2)) for m in _SERIES_POINT.finditer(low)}
    if points:
        points.update({int(m.group(1)): float(m.group(2)) for m in _SERIES_MORE.finditer(low)
                       if int(m.group(1)) not in points})
    return points


#: an amount of memory as written ("16.16 GB", "11,99 GiB", "512MiB"), its unit kept for the answer
_AMOUNT = (r"(?<![0-9A-Za-z_.,])(\d{1,9}(?:[.,]\d{1,3}(?!\d))?)(?!\d|[eE][+-]?\d)\s*(gib|gb|mib|mb|tib|tb|kib|kb|gio|go|mio|mo|гб|мб|g(?![a-z])|bytes?(?![a-z])|"
           r"байт\w*|字节|バイト|바이트|बाइट|بايت)?")
#: a measurement that moved, written from → to ("went from 11.99 GB to 6.74 GB", "von 16 auf 11 GB",
#: "从 11.99GB 降到 6.74GB", "11.99GBから6.74GB", "11.99GB에서 6.74GB로", "من 11.99 إلى 6.74", "16 → 11 GB")
_FROM_TO = re.compile(
    r"(?:(?<![a-z])(?:from|von|de|da|desde|do|с|со|от)(?![a-z])|从|由|من)\s*" + _AMOUNT
    + r"\s*(?:(?<![a-z])(?:to|auf|zu|nach|a|à|para|pra|hasta|até|до)(?![a-z])|降到|降至|减到|减少到|增加到|涨到|变成|到|إلى|الى|->|→|=>)\s*"
    + _AMOUNT + r"|" + _AMOUNT + r"\s*(?:から|에서|से|->|→|=>)\s*" + _AMOUNT)
#: a sentence that says a measurement dropped by an amount ("dropped by 5.129 GB on v5p-128 and by 5.105 GB")
_DROP_VERB = re.compile(
    r"(?<![a-z])(?:dropped|drops|decreased|reduced|fell|went down|shrank|saved|saves|saving|cut|down)(?![a-z])|"
    r"(?:sank|sinkt|fiel|reduziert|verringert|gespart|spart|упал\w*|снизил\w*|уменьшил\w*|сократил\w*|сэкономил\w*|"
    r"bajó|redujo|reduje|disminuyó|cayó|ahorr\w*|caiu|reduziu|diminuiu|economiz\w*|baiss\w*|diminu\w*|réduit|chuté|"
    r"économis\w*|减少|降低|下降|节省|省了|減っ|減少|削減|줄었|감소|절약|कम हु|घट|انخفض|قل[ّ]?ت|وفر)")
_DROP_AMOUNT = re.compile(r"(?:(?<![a-z])(?:by|um|на|en|em|of)(?![a-z])\s*|(?:减少了?|降低了?|下降了?|省了|节省了?)\s*)" + _AMOUNT)
#: the starting values of the measurements that dropped ("the baselines were 16.16 GB vs 19.81 GB")
_BASELINE = re.compile(r"baselines?|ausgangs\w*|basis\w*|базов\w*|исходн\w*|基线|基准|ベースライン|베이스라인|बेसलाइन|"
                       r"الأساس\w*|référence|línea base|linha de base|valores iniciales|valores iniciais")
#: a percentage asked for ("the saving in %", "wie viel Prozent", "百分比")
_PERCENT_ASKED = re.compile(r"(?<![a-z])(?:percent\w*|per cent|prozent\w*|pourcentage|porcentaje|porcentagem|"
                            r"процент\w*)|in %|en %|em %|в %|百分比|百分之|パーセント|割合|퍼센트|प्रतिशत|"
                            r"نسبة مئوية|النسبة المئوية|بالمئة|في المئة|%\s*[?？]")
#: the words between a measurement and the slice it is of ("5.1 GB on v5p-128", "5,1 GB auf der v5p-128")
_LABEL_AFTER = re.compile(r"\s*(?:on|for|with|auf|bei|für|mit|на|для|sur|pour|avec|en|em|con|com|no|na|el|la|der|dem|a|le|un|une|"
                          r"\(|,|:|\s)*\s*")
#: a limit stated with its figure ("allocator limit은 138.225 GiB", "bytes_limit 30.5 GiB", "лимит 16 ГБ")
_LIMIT_WORD = re.compile(r"(?<![a-z])(?:limit|bytes_limit|cap|budget|лимит\w*|ограничени\w*|限制|上限|限额|制限|上限値|한도|제한|"
                         r"सीमा|लिमिट|الحد|حد|límite|limite|grenze|limit\w*)(?![a-z])")
#: how far over it asked ("how much over", "각각 limit을 얼마나 넘는지", "насколько превышает", "um wie viel drüber")
_OVER_ASKED = re.compile(r"how (?:much|far) (?:over|above|beyond|too much|to cut|to reduce|to shave)|by how much|exceed\w* by|"
                         r"how much (?:headroom|margin|room)|cuánto margen|por cuánto|quanto de margem|por quanto|quelle marge|"
                         r"de combien|wie viel (?:luft|spielraum|reserve)|um wie ?viel|сколько запаса|какой запас|余量多少|还剩多少余量|"
                         r"余裕はどれ|여유가 얼마|여유는|कितना मार्जिन|كم الهامش|"
                         r"얼마나 넘|얼마나 초과|얼마를 줄여|얼마나 줄여|насколько (?:превыш|больше|надо (?:урезать|сократить))|на сколько (?:превыш|больше)|"
                         r"超出多少|超过多少|超了多少|要减多少|需要减少多少|少多少|どれだけ超|どのくらい超|何.?GB.{0,6}(?:減ら|削)|"
                         r"कितना (?:ज़्यादा|ज्यादा|ऊपर|कम करना)|بكم (?:يتجاوز|تتجاوز|يزيد|تزيد)|كم (?:يتجاوز|أحتاج أن أقلل|يجب أن أقلل)|"
                         r"um wie ?viel (?:drüber|über|zu viel|reduzieren|kürzen)|de combien (?:dépasse|réduire|au-dessus)|"
                         r"cuánto (?:excede|sobra|se pasa|reducir|hay que reducir)|quanto (?:passa|excede|reduzir|preciso reduzir)")
_UNIT_SIZE = {"gib": 1 << 30, "gb": 10 ** 9, "mib": 1 << 20, "mb": 10 ** 6, "tib": 1 << 40, "tb": 10 ** 12, "gio": 1 << 30,
              "go": 10 ** 9, "mio": 1 << 20, "mo": 10 ** 6, "гб": 1 << 30, "мб": 1 << 20, "g": 1 << 30, "kib": 1 << 10,
              "kb": 10 ** 3, "byte": 1, "bytes": 1}
_BYTE_WORDS = ("byte", "bytes", "байт", "字节", "バイト", "바이트", "बाइट", "بايت")
#: a card sold by its memory ("A100 80GB", "80 GB card"): a capacity, not a measured figure
_CARD_AFTER = re.compile(r"\s*(?:of\s+)?(?:card|gpu|vram|hbm|ram\b|ddr|карт\w*|显存|内存|卡|のgpu|カード|카드|कार्ड|بطاقة)")
_CARD_SIZE_BEFORE = re.compile(r"(?:[ahlbt]\d{2,3}|rtx ?\d{4}\w*|v\d[a-z]*|card|gpu|карт\w*|卡)\s*(?:with\s*)?$")
#: the other side of a pair of point sets, right after the first one's count ("..., y de 50000", "and y 50000")
_OTHER_SIDE = re.compile(r"[^\d.;:]{0,16}?(?<![a-z])(x|y|n|m)\s*(?:de|of|von|du|do|da|has|hat|tiene|tem|a|:|=)?\s*(\d{2,9})(?![\d.])")
#: a function's input size ("`a` has 10 million elements", "input is still 1e7", "a 10000000-element input")
_INPUT_COUNT = re.compile(r"(?:(?<![a-z])(?:input|inputs|params|parameters|a|x)\s+(?:has|have|is|of|with|still|size|=|:|\s)*"
                          r"(?<!\d)(\d{1,15}(?:\.\d{1,6})?)(?![\d.])\s*(million|billion|thousand|m|k)?(?:\s*(?:elements|entries|values))?)"
                          r"|(?:(?<![\d.])(\d{1,15}(?:\.\d{1,6})?)\s*(million|billion|thousand)?\s*(?:-element|elements)\s*"
                          r"(?:input|vector|array)?)")  # (at most 15 digits: a count, not a string of digits)
#: its output size ("returns a length-1000 vector", "1000 outputs", "an output of 1000")
_OUTPUT_COUNT = re.compile(r"length[- ](\d{1,12})\s*(?:vector|output|array)|(?<!\d)(\d{1,12})\s*outputs|"
                           r"output (?:of|with|has) (\d{1,12})(?!\d)|returns? (?:a |an )?(\d{1,12})[- ](?:element|vector|dim)")
#: a scalar output ("sum to a scalar", "a scalar loss")
_SCALAR_OUT = re.compile(r"(?<![a-z])(?:to a scalar|a scalar|scalar (?:loss|output)|returns? a float)(?![a-z])")
_SCALE_WORDS = {"million": 10 ** 6, "m": 10 ** 6, "billion": 10 ** 9, "thousand": 10 ** 3, "k": 10 ** 3}
#: what to set asked ("je mets quoi ?", "what do I set?", "was setze ich?")
_SETTING_ASKED = re.compile(r"what (?:do|should) i (?:set|put|use)|what to set|je mets quoi|que (?:dois-je|faut-il) mettre|"
                            r"qu.est-ce que je mets|qué pongo|que pongo|qué configuro|o que (?:eu )?(?:coloco|ponho|configuro)|"
                            r"was (?:setze|stelle) ich|was muss ich setzen|что (?:поставить|ставить|выставить)|какие настройки|"
                            r"设置什么|怎么设置|该怎么设|何を設定|どう設定|뭘 설정|무엇을 설정|어떻게 설정|क्या सेट|ماذا أضع|ماذا أضبط")
#: several processes said to share one card ("on the same card", "en parallèle sur la même carte")
_SAME_CARD = re.compile(r"same (?:card|gpu)|one (?:card|gpu)|in parallel|même carte|même gpu|en parallèle|misma (?:tarjeta|gpu)|"
                        r"en paralelo|mesma (?:placa|gpu)|em paralelo|selben? (?:karte|gpu)|parallel|одн(?:ой|у) (?:карт|gpu)|"
                        r"параллельно|同一张卡|同一块|并行|同じ(?:GPU|カード)|並列|같은 (?:gpu|카드)|병렬|एक ही (?:gpu|कार्ड)|"
                        r"समानांतर|نفس (?:البطاقة|الـ ?gpu)|بالتوازي", re.I)
#: an amount asked ("how much", "cuánta", "wie viel", "сколько", "多少")
_HOW_MUCH = re.compile(r"how much|how many|cuánt[ao]s?|quant[ao]s?|combien|wie ?viel|сколько|多少|どれ(?:だけ|くらい)|얼마|कितन|كم")
#: a name given to the shape right after it ("A 是 (85, 20000)", "A is (85, 20000)", "W: (512, 512)")
_NAMED_SHAPE = re.compile(r"([A-Za-z_]\w*)\s*(?:is|是|为|=|:|は|는|est|ist|es|é)?\s*[(\[]$")
CHANGE_LABEL_REACH = 40  # characters around a measurement in which a slice name labels it


#: a batch named ("b160", "batch 160")
_SERIES_ASKED = re.compile(r"(?<![a-z0-9_])(?!b[123]00(?![\d.]))(?:b|bs|batch(?:[ _]size)?|lote|バッチ|배치|батч\w*|批次?)"
                           r"\s*[=:]?\s*(\d{2,5})(?![\d.])")  # (not a B200 card)
#: words before a memory figure that make it the program's need or a measured peak, not the pool seen
_PROGRAM_FIGURE = re.compile(
    r"(?:reduced to|down from|needs?|requires?|required|pide|necesita|requiere|braucht|benötigt|demande|nécessite|"
    r"precisa|requer|нужно|требует|需要|必要|필요|चाहिए|يحتاج|تحتاج|"
    r"memory_analysis|estimate|compiled|measured|i measured|قست|medí|medido|gemessen|mesuré|измер\w*|测得|实测|実測|측정|"

    r"temp(?:orar\w*)?|program|arguments?|outputs?|b\d{2,4}\s*(?:=|:|->|→|صار|is)?)[^\d\n]{0,24}"
    r"(?:\d{1,4}(?:\.\d+)?\s*(?:gi?b)?\s*[–~-]\s*)?$"  # (the upper end of a range: "about 50–65 GiB")
    # the asker's own estimate ("मेरे हिसाब से peak memory लगभग 50–65 GiB"): what it needs, not a pool seen
    r"|(?:estimat\w*|my calculation|i expect|schätz\w*|estim\w*|calcul\w*|оцен\w*|估计|估算|预计|見積\w*|見込み|予想|"
    r"예상|추정|हिसाब|अनुमान|تقدير\w*|أتوقع)[^\d\n]{0,40}(?:\d{1,4}(?:\.\d+)?\s*(?:gi?b)?\s*[–~-]\s*)?$"
    # a bound ("gradient takes >20 GB"): what the program needs at least, not a pool that is a fixed share
    r"|(?:>|≥|more than|mehr als|plus de|más de|mais de|больше|более|超过|超出|以上の?|이상|أكثر من)\s*~?\s*$")
PROGRAM_FIGURE_REACH = 40
# a decimal said without a unit ("~7.8"): not a version ("0.4.30"), a setting ("=0.9") or a share ("7.5%")
_BARE_DECIMAL = re.compile(r"(?<![\w.=:])(\d{1,4}\.\d{1,2})(?![\w.%]|\s*(?:gb|gib|go|гб|g|mib|mb|%)(?![a-z]))")
#: a share written as a decimal ("0.9 vs 0.55"), not a version ("0.4.30") nor a size ("0.5 GB")
_SHARE_DECIMAL = re.compile(r"(?<![\w.])(0?\.\d{1,3})(?![\w.%]|\s*(?:gb|gib|go|mb|mib|g)(?![a-z]))")
_GB = re.compile(r"(?<![a-z0-9_.])(\d{1,4}(?:\.\d+)?)\s*(?:gb|gib|gio|go|гб|g)(?![a-z0-9_])")
# a size said to be free ("~3GB livres", "3 GB free"): what is left, not what a process needs
_FREE_AFTER = re.compile(r"\s*(?:of\s+)?(?:free|left|available|livres?|libres?|frei|verfügbar|disponibles?|disponíveis|"
                         r"свободн\w*|空闲|空き|남은|남아|खाली|فاضية?|متاحة?)")
# processes of the same kind counted ("3 runs", "три процесса", "3个实验"), each with the one need stated
_PROCESS_COUNT = re.compile(r"(?<![0-9.])(\d{1,2})\s*(?:个|つの|개의?)?\s*(?:jax[\s-]+|python[\s-]+|training[\s-]+|pytest[\s-]+|"
                            r"eval[\s-]+|inference[\s-]+|trainings?-)*(?:runs?|processes|jobs|experiments?|trials|scripts?|workers?|"
                            r"(?:[a-z]+[\s-]+)?(?:servers|instances|services)|"
                            r"воркер\w*|ワーカー|워커|वर्कर|"
                            r"seeds|runs? with different seeds|graines|semillas|sementes|сид\w*|种子|シード|시드|सीड|بذور|"
                            r"processos|procesos|processus|prozesse|experimentos|expériences|experimente|"
                            r"процесс\w*|эксперимент\w*|запуск\w*|进程|实验|プロセス|実験|프로세스|실험|"
                            r"प्रोसेस|प्रयोग|عمليات|تجارب)(?![a-z])")
#: a count said per card ("4 workers per GPU, so 32 on the 8 cards", "4 Prozesse pro GPU", "每张卡 4 个进程"):
#: the count that shares one card, where the text also says the total
_PER_CARD = (r"(?:per|each|on each|for each|pro|je|par|por|em cada|en cada|sur chaque|auf jeder|на|на каждую|на каждой)\s+"
             r"(?:gpu|card|device|karte|gpu-karte|carte|tarjeta|placa|карту|карте|видеокарту)")
_PER_CARD_COUNT = re.compile(_PROCESS_COUNT.pattern + r"\s*(?:\([^)]{0,30}\)\s*)?" + _PER_CARD
                             + r"|(?:每张卡|每块卡|每个\s*gpu|每张\s*gpu|1\s*枚あたり|gpu\s*(?:1|一)\s*枚(?:あたり|に)|gpu당|카드당)\s*"
                             r"(\d{1,2})\s*(?:个|つの|개의?)?")
#: counts written as words before what is counted ("two jax training scripts", "a third run")
_COUNT_WORDS = {"two": 2, "three": 3, "four": 4, "zwei": 2, "drei": 3,
                "vier": 4, "deux": 2, "trois": 3, "quatre": 4, "dos": 2, "tres": 3, "cuatro": 4, "dois": 2, "duas": 2,
                "três": 3, "quatro": 4, "два": 2, "две": 2, "три": 3, "четыре": 4}
_WORD_COUNT = re.compile(r"(?<![a-zà-ÿа-я])(" + "|".join(_COUNT_WORDS) + r")\s+(?:[a-zà-ÿа-я]+[\s-]+){0,2}?"
                         r"(?:runs?|processes|process|jobs?|scripts?|experiments?|trainings?|processos|procesos|"
                         r"processus|prozesse|experimentos|процесс\w*|запуск\w*|скрипт\w*)(?![a-z])")
#: jobs counted after the noun ("잡 두 개", "作业两个", "ジョブを2つ"), Korean and Chinese counts included
_CJK_COUNTS = {"두": 2, "세": 3, "네": 4, "两": 2, "二": 2, "三": 3, "四": 4, "2つ": 2, "二つ": 2, "3つ": 3, "三つ": 3}
_COUNTED_AFTER = re.compile(r"(?:잡|작업|프로세스|job|jobs|作业|任务|进程|ジョブ|プロセス)\s*(?:을|를|が|を)?\s*"
                            r"(\d{1,2}|두|세|네|两|二|三|四|2つ|二つ|3つ|三つ)\s*(?:개|个|つ)?")
#: a share proposed for each of several processes (".33 each")
_SHARE_EACH = re.compile(r"(?<![\d])(0?\.\d{2})\s*(?:each|apiece|per process|for each|jeweils|chacun|cada uno|cada|"
                         r"каждому|на каждый|各|ずつ|씩|हर एक|لكل)")
#: a count of runs written with its word before the noun in Arabic, Hindi, Chinese, Japanese and
#: Korean ("الثلاث تجارب", "तीन प्रोसेस", "三个进程", "三つのプロセス", "세 개의 프로세스")
_NATIVE_COUNTS = {"اثنين": 2, "اثنتين": 2, "ثلاث": 3, "ثلاثة": 3, "أربع": 4, "أربعة": 4, "خمس": 5, "خمسة": 5,
                  "दो": 2, "तीन": 3, "चार": 4, "पांच": 5, "पाँच": 5, "两": 2, "三": 3, "四": 4, "五": 5,
                  "二つ": 2, "三つ": 3, "四つ": 4, "두": 2, "세": 3, "네": 4, "다섯": 5}
_NATIVE_COUNT = re.compile(r"(?:(?<![\w])(?:ال)?(اثنين|اثنتين|ثلاثة|ثلاث|أربعة|أربع|خمسة|خمس)\s+(?:تجارب|عمليات|مهام|سكربتات)|"
                           r"(?<![\w])(दो|तीन|चार|पांच|पाँच)\s+(?:प्रोसेस|प्रयोग|रन|जॉब)|"
                           r"(两|三|四|五)\s*个\s*(?:进程|实验|任务|训练)|(二つ|三つ|四つ)\s*の\s*(?:プロセス|実験|ジョブ)|"
                           r"(?<![\w])(두|세|네|다섯)\s*(?:개의?\s*)?(?:프로세스|실험|작업))")
#: a batch times a length worked out to its tokens ("per chip batch 4 x seq 4096 = 16384 tokens")
_BATCH_BY_SEQ = re.compile(r"(?<![\d.])(\d{1,5})\s*[x×*]\s*(?:seq(?:uence)?(?:[_ ]?len(?:gth)?)?\s*)?(\d{2,7})\s*=\s*"
                           r"(\d{2,9})\s*(?:tokens?|токен\w*|토큰|トークン|个?\s*token|टोकन)")
#: a figure said of each of several runs ("each one peaks ~22 GiB", "jeweils", "كل وحدة")
_EACH = re.compile(r"(?<![a-z])(?:each|apiece|jeweils|je|chacun\w*|cada|каждый|каждому|каждая|各|ずつ|씩|각각|हर|لكل|كل وحدة)(?![a-z])")
#: one share proposed for all of them ("all at 0.30", "الكل 0.30", "alle auf .3")
_SHARE_ALL = re.compile(r"(?:(?<![a-z])(?:all|all of them|everyone|todos|todas|alle|tous|toutes|все|всем)(?![a-z])|"
                        r"الكل|كلها|الجميع|全部|都|모두|전부|सब|सभी|すべて|全て)\s*(?:at|to|on|a|à|auf|на|em|en|على|को|में|を|に)?"
                        r"\s*[=:]?\s*(0?\.\d{1,2})(?!\d)")
#: a process, run or experiment added, by its ordinal ("a fourth run", "تجربة رابعة", "第四个进程"):
#: the ordinals, and the nouns they count
_ORDINALS = {"second": 2, "third": 3, "fourth": 4, "fifth": 5, "2nd": 2, "3rd": 3, "4th": 4, "5th": 5,
             "zweite": 2, "dritte": 3, "vierte": 4, "fünfte": 5, "deuxième": 2, "troisième": 3, "quatrième": 4,
             "cinquième": 5, "segundo": 2, "segunda": 2, "tercer": 3, "tercero": 3, "tercera": 3, "terceiro": 3,
             "terceira": 3, "cuarto": 4, "cuarta": 4, "quarto": 4, "quarta": 4, "quinto": 5, "quinta": 5,
             "второй": 2, "третий": 3, "четвёртый": 4, "четвертый": 4, "пятый": 5, "دوسरा": 2,
             "दूसरा": 2, "दूसरी": 2, "तीसरा": 3, "तीसरी": 3, "चौथा": 4, "चौथी": 4, "पांचवां": 5, "पाँचवाँ": 5,
             "第二": 2, "第三": 3, "第四": 4, "第五": 5, "2つ目": 2, "3つ目": 3, "4つ目": 4, "5つ目": 5,
             "二つ目": 2, "三つ目": 3, "四つ目": 4, "두 번째": 2, "세 번째": 3, "네 번째": 4, "다섯 번째": 5,
             "ثانية": 2, "ثاني": 2, "ثالثة": 3, "ثالث": 3, "رابعة": 4, "رابع": 4, "خامسة": 5, "خامس": 5}
_ORDINAL_NOUNS = (r"runs?|process(?:es)?|jobs?|experiments?|trials?|scripts?|workers?|instances?|prozess\w*|läufe?|"
                  r"lauf|processus|expériences?|procesos?|experimentos?|processos?|процесс\w*|эксперимент\w*|"
                  r"запуск\w*|个?进程|个?实验|个?任务|の?プロセス|の?実験|の?ジョブ|프로세스|실험|작업|प्रोसेस|प्रयोग|"
                  r"تجربة|تجارب|عملية|مهمة")
_ORDINAL_WORDS = "|".join(sorted((re.escape(w) for w in _ORDINALS), key=len, reverse=True))
_ORDINAL_COUNT = re.compile(rf"(?<![\w])({_ORDINAL_WORDS})(?:\s*[^\W\d_]{{2,12}}){{0,1}}\s*(?:{_ORDINAL_NOUNS})(?![a-z])|"
                            rf"(?:{_ORDINAL_NOUNS})\s+({_ORDINAL_WORDS})(?![\w])")
# a shape written out: [32, 2048, 4096], (32,2048,4096), 32x2048x4096, 32 × 2048 × 4096 (not a
# layout's tile, T(8,128))
_SHAPE_WRITTEN = re.compile(r"(?:\[|(?<![a-zA-Z])\()\s*\d{1,10}(?:\s*,\s*\d{1,10}){1,5}\s*[\])]|"
                            r"(?<![a-zA-Z_])\d{1,10}(?:\s*[x×*]\s*\d{1,10}){1,5}")  # (not a name's "threefry2x32")
#: XLA's BFC allocator, refused a block by the driver, asks again for this share of it (kBackpedalFactor),
#: until one fits; this many sizes in a row, each that share of the last within the slack, are its retries
BACKPEDAL = 0.9
BACKPEDAL_SLACK = 0.012
BACKPEDAL_MIN = 3
#: a size said in GiB ("12.95GiB", "9.44 GiB")
_GIB_SAID = re.compile(r"(?<![\d.])(\d{1,4}(?:\.\d{1,3})?)\s*gib(?![a-z])")
#: a failed allocation more than this factor of an array's bytes, and at most the second factor times
#: them, is read per element of the array's shape (several arrays of that shape alive at once)
REQUEST_SLACK = 1.05
REQUEST_PER_ELEMENT_MAX = 64
#: the largest failed request read as a size at all (an exbibyte)
MAX_REQUEST = 1 << 60
#: more elements than any device or host holds: dates, IDs or versions written with "x", not an array
MAX_ELEMENTS = 1 << 50
#: the fewest elements a kernel's block named as such is sized from (a (128, 128) tile is 16384)
BLOCK_ELEMENTS_MIN = 1 << 12


#: a tuple assigned to a kernel's tiling or grid ("tiling=(tm,tk,tn)=(512,2048,2048)", "grid=(8, 8, 4)"):
#: block sizes or step counts, not an array's shape
_TILING_BEFORE = re.compile(r"(?:tiling|tiles?|tile_sizes?|block_sizes|grid|\(\s*(?:[a-z_]*[mkn]\s*,\s*){2}[a-z_]*[mkn]\s*\))"
                            r"\s*[=:]\s*$", re.IGNORECASE)


#: a product worked out in the text ("8192*72*4 = 2.25MiB"): arithmetic, not a shape
_PRODUCT_RESULT = re.compile(r"\s*(?:=|≈|->|→)\s*\d")


class _Shapes:
    """The shapes a text writes out (`_SHAPE_WRITTEN`), less those too large to be an array and
    those assigned to a kernel's tiling or grid."""

    def finditer(self, text: str):
        return (m for m in _SHAPE_WRITTEN.finditer(text)
                if math.prod(int(d) for d in re.findall(r"\d+", m.group(0))) <= MAX_ELEMENTS
                and not _TILING_BEFORE.search(text, max(0, m.start() - 40), m.start())
                and not ("*" in m.group(0) and _PRODUCT_RESULT.match(text, m.end())))

    def search(self, text: str) -> re.Match[str] | None:
        return next(self.finditer(text), None)


_SHAPE = _Shapes()
# a dtype written right after the (KV) cache ("kv cache bf16", "KV 缓存 int8", "cache int8 me")
_KV_DTYPE = re.compile(r"(?:kv[ _-]?)?(?:cache|кэш|缓存|キャッシュ|캐시|कैश)\W{0,3}"
                       r"(?:(?:a|to|in|en|em|à|au|на|в|zu|auf|para|into|als|comme|como)\W{1,2})?"  # "KV cache a int8"
                       r"((?:bf16|bfloat16|fp16|float16|f32|fp32|float32|int8|fp8)\b)")
#: a dtype written right before the (KV) cache ("int8 KV cache", "fp8 kv-cache", "int8 的 KV cache")
_KV_DTYPE_BEFORE = re.compile(r"(?<![a-z0-9_])((?:bf16|bfloat16|fp16|float16|f32|fp32|float32|int8|fp8))\s*(?:的\s*)?"
                              r"kv[ _-]?(?:cache|кэш|缓存|キャッシュ|캐시|कैश)")
# what a dtype said just after them is the dtype of: the training state, or the activations
_STATE_WORDS = re.compile(r"(?<![a-z])(?:params?|parameters|param_dtype|p(?=\s*=)|weights|grads?|gradients?|mu|nu|moments?|master|"
                          r"参数|权重|梯度|パラメータ|重み|勾配|파라미터|가중치|그래디언트|параметр\w*|вес[аы]?|"
                          r"градиент\w*|pesos|poids|gewichte|gradientes|पैरामीटर|वेट्स|الأوزان|المعاملات)(?![a-z])")
#: what else a dtype may be said of besides the weights: the KV cache, the activations
_OTHER_SUBJECT = re.compile(r"(?<![a-z])kv(?![a-z])|cache|кэш|缓存|キャッシュ|캐시|कैश|activ|aktiv|актив|激活|活性化|활성화")
#: everything said to be in one dtype ("all in bf16", "alles in bf16", "tout en bf16", "全部 bf16"): the state's too
_ALL_IN = re.compile(r"(?:(?<![a-z])(?:all|everything|alles|tout|todo|tudo|всё|все)\s+(?:in|en|em|на|в)?\s*|全部(?:用|是|都)?\s*|"
                     r"すべて\s*|全て\s*|전부\s*|모두\s*|सब\s*(?:कुछ)?\s*|الكل\s*(?:ب|في)?\s*)$")
_ACTIVATION_WORDS = re.compile(r"activ|aktiv|актив|激活|活性化|활성화|एक्टिवेशन|التنشيط|carry|input|输入|入力|입력|"
                               r"(?<![a-z])c\s*=|compute|(?<![a-z_])o\s*=|"  # (jmp's "p=f32,c=bfloat16": the compute dtype)
                               r"вход|entrada|entrée|eingabe|cache|缓存|キャッシュ|캐시|кэш")
# a batch size and the temporaries measured at it ("batch=8 ... temp 6.00 GiB")
_BATCH_TEMP = re.compile(r"(?<![a-z_])(?:per-device |per device )?(?:batch|bs|批|バッチ|배치|батч)\w*\s*(?:size)?\s*[=:]?\s*"
                         r"(\d{1,5})(?!\d|\.\d)[^;；\n]{0,60}?(?:temp\w*|temporar\w*|临时|一時|임시)\s*[=:]?\s*"
                         r"(\d+(?:\.\d+)?)\s*(?:gib|gb|g)")
#: a peak measured at a batch size ("batch 8 -> 21.3 GiB", "bs=16: peak 29.7 GiB")
_BATCH_PEAK = re.compile(r"(?<![a-z_])(?:per-device |per device )?(?:batch|bs|批|バッチ|배치|батч)\w*\s*(?:size)?\s*[=:]?\s*"
                         r"(\d{1,5})(?!\d|\.\d)\s*(?:->|→|=>|:|=|,|时|で|에서)?\s*(?:peak\w*\s*[=:]?\s*)?"
                         r"(\d+(?:\.\d+)?)\s*(?:gib|gb|g)(?![a-z])")
# a whole number as people write it: 10000, 10.000, 10,000, 10 000, 10k (not part of a name: A100, v4)
_WHOLE = re.compile(r"(?<![\w.,])(\d{1,3}(?:[.,\u202f\xa0 ]\d{3})+|\d+)(\s*k(?![a-z]))?(?![\d]|[.,]\d)")
# a number that is a size, a share or a version, not a dimension or a count
_UNIT_AFTER = re.compile(r"\s*(?:[kmgt]i?b|gb|go|гб|bytes?|bytes|%|байт|字节|バイト|바이트)(?![a-z])", re.I)
MAX_FACTORS = 5  # an allocation explained by at most this many of the stated numbers
# a number written with thousands separators: 10,000 or 10.000 or 10 000 (narrow or no-break space),
# not inside a shape or a tuple ("(32,128,128)"), a version (0.4.31) or a decimal (2.5)
_THOUSANDS = re.compile(r"(?<![\d.,(\[])\d{1,3}(?:,\d{3})+(?![\d,)\]]|\.\d)|(?<![\d.,(\[])[1-9]\d{0,2}(?:\.\d{3}){2,}(?![\d,)\]]|\.\d)"
                        # one dot group before GB or TB is a decimal ("13.535 GiB", not 13535 GiB, more than any
                        # device holds); before MiB it stays thousands, as nvidia-smi's "61.214 MiB" is in Portuguese
                        r"|(?<![\d.,(\[])[1-9]\d{0,2}\.\d{3}(?![\d,)\]]|\.\d|\s*(?i:gi?b|ti?b|g|go|to|гб)(?![a-zA-Z]))"
                        r"|(?<![\d.,(\[])\d{1,3}(?:[\u202f\xa0]\d{3})+(?![\d])"
                        # plain spaces only with two groups or more ("6 053 381 344"), not "8 128"
                        r"|(?<![\d.,(\[])\d{1,3}(?: \d{3}){2,}(?![\d])"
                        # in parentheses before a word: a count, not a tuple ("(1,887,621,120 params)")
                        r"|(?<=\()\d{1,3}(?:,\d{3})+(?=\s+[^\W\d_])"
                        r"|(?<=\()[1-9]\d{0,2}(?:\.\d{3}){2,}(?=\s+[^\W\d_])"  # "(1.235.814.400 params)"
                        r"|(?<=\()[1-9]\d{0,2}(?: \d{3}){2,}(?=\s+[^\W\d_])")  # "(2 506 172 416 параметров)"
# a size with its unit ("600 MiB", "1.5 GB", "600 МБ"), and the words that leave it outside JAX's pool
_SIZE = re.compile(r"(?<![a-z0-9_.])(\d+(?:\.\d+)?)\s*(gib|gb|mib|mb|go|mo|гб|мб)(?![a-z])")
_UNIT_BYTES = {"g": float(1 << 30), "m": float(1 << 20)}
_LEAVE = re.compile(r"leave|spare|headroom|keep .{0,12}free|छोड़|laisser|garder .{0,12}libre|dejar|deixar|lassen|"
                    r"оставить|оставля|留出|留下|留给|残し|残す|남기|남겨|اترك|أترك|ترك|يتبقى")
# a decimal comma before a magnitude or a unit ("32,5 milliards", "7,8 Mio.", "1,5 GB"): a decimal
_DECIMAL_COMMA = re.compile(r"(?<![\d.,])(\d{1,4}),(\d{1,2})(?=\s*(?:milliard\w*|mrd\.?|billion\w*|bilh\w*|mil millones|"
                            r"млрд\w*|миллиард\w*|million\w*|millones|milhões|mio\.?|млн\w*|миллион\w*|"
                            r"[bmk](?![a-z])|gi?b(?![a-z])|gio(?![a-z])|go(?![a-z])|гб|g\s*param|%))", re.I)
_DIGIT_GROUP = re.compile(r"(?<=\d)_(?=\d{3}(?!\d))|(?<=\d)_(?=\d{3}_)")
#: a count written in scientific notation ("1e9", "2.5e6"): a whole number, not a rate ("1e-3")
_SCIENTIFIC = re.compile(r"(?<![\w.])\d(?:\.\d{1,3})?e\+?(?:[3-9]|1[0-5])(?![\w.])")
#: a product written as one axis of a shape ("shape=(64*64, 4000000)"): that axis's length
_AXIS_PRODUCT = re.compile(r"([(\[,]\s*)(\d{1,7}(?:\s*\*\s*\d{1,7})+)(?=\s*[,)\]])")
_SLICE = re.compile(r"(?<![a-z0-9_])(v\d[a-z]*|tpu7x)-(\d+)(?![a-z0-9_])")
_QUANTITIES = ("params", "layers", "batch", "seq", "kv_heads", "heads", "head_dim", "hidden",
               "tensors", "devices_times_model", "items", "vocab", "block_m", "block_k", "block_n", "block_q", "block_kv",
               "analysis_argument", "analysis_output", "analysis_alias", "analysis_temp", "max_len",
               "chips_per_host", "state_per_chip", "host_ram", "save_multiple", "steps", "new_tokens", "prompt", "num_stages", "ffn", "experts",
               "batch_from", "per_sample", "per_param_claim", "pad_multiple",
               "mcmc_samples", "mcmc_chains", "latent_values", "model_axis", "fsdp_axis", "microbatches", "vocab_tiles", "logits_chunk", "channels", "mem_utilization",
               "reserve", "checkpoints", "topk", "page_size", "kv_budget", "weights_size")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Pattern(_Strict):
    pattern: str
    scale: float = 1.0
    k_scale: float | None = None
    value: float | None = Field(default=None, description="the quantity a match says in words, whatever its "
                                "group captures (\"ONE sequence\": a batch of 1)")


class DType(_Strict):
    pattern: str
    bytes: float = Field(gt=0)
    name: str


class Optimizer(_Strict):
    pattern: str
    name: str
    moments: int = Field(ge=0)


class Gpu(_Strict):
    names: list[str] = Field(min_length=1)
    memory: str
    source: str
    shared_kib: float | None = None  # the most shared memory a thread block may use
    # the total CUDA reports for the card (what JAX's pool is a fraction of), where a public log shows it
    reported: str | None = None
    reported_source: str | None = None


class Message(_Strict):
    params: list[str]
    text: dict[str, str]


class Model(_Strict):
    name: str
    pattern: str
    source: str
    values: dict[str, float]


class SizingFile(_Strict):
    quantities: dict[str, list[Pattern]]
    models: list[Model] = Field(default_factory=list)
    dtypes: list[DType]
    optimizers: list[Optimizer]
    cues: dict[str, list[str]]
    gpus: list[Gpu]
    unless: dict[str, list[str]] = Field(default_factory=dict)
    replaces: dict[str, list[str]] = Field(default_factory=dict)
    excludes: dict[str, list[str]] = Field(default_factory=dict)
    remat_policies: list[str] = Field(default_factory=list)
    arguments: list[str] = Field(default_factory=list)
    # a Pallas matmul's operands (x, y, out) as the asker names them, each followed by its dtype
    # ("x en bf16, w int8, salida bf16"): the words naming each, and the words between it and the dtype
    block_operands: dict[str, str] = Field(default_factory=dict)
    operand_joiner: str = r"\s*"
    # a training state's parts as the asker lists them with their dtypes ("f32 master weights + Adam in
    # f32 + bf16 grads"): the words naming weights, grads and moments; a dtype right after or before each
    state_parts: dict[str, str] = Field(default_factory=dict)
    # how many copies of an operand's block the kernel's pipeline keeps, said after the operand
    # ("RHS はトリプルバッファ", "rhs triple-buffered"): the words for each count; the default is two.
    # `buffer_word`: a word for buffering, which the text must use somewhere for the counts to be read
    buffer_counts: dict[int, str] = Field(default_factory=dict)
    buffer_word: str = ""
    limit_snippet: str = ""  # code computing a kernel's vmem_limit_bytes from its blocks, to fill
    matmul_snippet: str = ""  # the tiled matmul with those blocks, after limit_snippet, when code is asked
    mcmc_snippet: str = ""  # an MCMC run in pieces, each moved to host RAM, to fill
    shard_snippet: str = ""  # the asker's arrays made sharded over their devices, to fill
    shard_map_snippet: str = ""  # shard_map with lax.map over the asker's array's local block, to fill
    # an n × m matrix of pairs: the point counts that size it, the rows made at once, and its code
    pairwise_points: list[Pattern] = Field(default_factory=list)
    pairwise_blocks: list[Pattern] = Field(default_factory=list)
    pairwise_snippet: str = ""
    pairwise_sinkhorn_snippet: str = ""
    pairwise_solve_snippet: str = ""
    pairwise_apply_snippet: str = ""
    # a measurement at a count of items and another count asked: the nouns counted, the words that
    # scale a count ("2 millones", "10万"), and the words that ask how much
    count_nouns: str = ""
    count_scales: dict[str, float] = Field(default_factory=dict)
    how_much: str = ""
    messages: dict[str, Message]


@dataclass
class Stated:
    """What a text states, each the last value given."""

    values: dict[str, float] = field(default_factory=dict)
    dtype: DType | None = None
    dtypes_named: set[str] = field(default_factory=set)
    optimizer: Optimizer | None = None
    cues: set[str] = field(default_factory=set)
    device: str | None = None          # the label of the device named
    device_memory: int | None = None   # bytes per device (on a GPU: JAX's pool on the card)
    card_memory: int | None = None     # a GPU's whole memory
    pool_share: float | None = None    # the XLA_PYTHON_CLIENT_MEM_FRACTION the text sets
    memory_label: str | None = None    # as the question or the public page states it
    devices: int | None = None
    gpu: bool = False
    kv_dtype: DType | None = None      # the dtype named right after "KV cache" ("KV cache bf16")
    state_dtype: DType | None = None   # the dtype named right after the weights or their state
                                       # ("params/grads/mu/nu 全是 f32"), which a later one for the
                                       # activations ("only each layer's input, bf16") does not change
    model: str | None = None           # a model named whose public configuration filled values
    from_model: list[str] = field(default_factory=list)  # the values it filled
    from_log: bool = False             # the device's capacity came from the user's own TPU log
    log_used: int | None = None        # what that log says the program used per device
    shared_per_block: int | None = None  # a GPU named: the most shared memory a thread block may use
    replicated: tuple[str, int] | None = None  # a shape said to stay replicated (the rest sharded): it, its elements
    widths: list[int] = field(default_factory=list)  # whole numbers of 3 to 6 digits the text writes, in order
    # a baseline the text compares with ("compared with AdamW fp32"): its optimizer and dtype
    baseline_optimizer: Optimizer | None = None
    baseline_dtype: DType | None = None
    operand_dtypes: dict[str, DType] = field(default_factory=dict)  # a Pallas matmul's x, y, out: each one's dtype named
    state_parts: dict[str, DType] = field(default_factory=dict)  # weights, grads, moments: each one's dtype named
    operand_buffers: dict[str, int] = field(default_factory=dict)  # ... and each one's buffer count, where said
    # the parameter count computed from the dims the text gives (hidden, MLP, heads, layers, vocab):
    # its parts, and the count the text or a name said before (replaced by it)
    from_dims: dict[str, float] | None = None


#: quantities that are settings, not a model's sizes: read from the whole text
_SETTING_QUANTITIES = frozenset({"mem_utilization"})
#: a count said to be the parameters ("3.3B params", "7 млрд параметров"): a total
_PARAMS_WORD = re.compile(r"\s*(?:params?|parameters?|parâmetros|parámetros|paramètres|параметр\w*|个?参数|パラメータ|파라미터|पैरामीटर|معامل\w*|معلمة)")
#: between a total and its parts ("3.3B params: PaliGemma 3B + 300M action expert", "7B (6.7B + ...")
_PARTS_AFTER = re.compile(r"[:(=（]|\+")


def _total_before_parts(patterns, text: str, hit: tuple[int, float]) -> tuple[int, float]:
    """The parameter count to use where the last one read is a part of a total said just before it
    ("~3.3B params: PaliGemma 3B + 300M action expert" is 3.3B, not 3B); else `hit`."""
    totals = [(m.start(1), float(m.group(1)) * p.scale) for p, compiled in patterns for m in compiled.finditer(text)
              if m.start(1) < hit[0] and _PARAMS_WORD.match(text, m.end())]
    if not totals:
        return hit
    at, value = max(totals)
    between = text[at:hit[0]]
    return (at, value) if len(between) <= 60 and _PARTS_AFTER.search(between) and value > hit[1] else hit


def _line_through(pairs: dict[int, float], last: bool = False) -> tuple[int, float, int, float, float, float] | None:
    """The line through the first two (count, GiB) measurements, or the last two (`last`: the nearest
    to a larger count asked): (b1, t1, b2, t2, slope, fixed part), None with fewer than two or a peak
    that does not grow with the count."""
    if len(pairs) < 2:
        return None
    (b1, t1), (b2, t2) = sorted(pairs.items())[-2:] if last else sorted(pairs.items())[:2]
    slope = (t2 - t1) / (b2 - b1)
    return (b1, t1, b2, t2, slope, t1 - slope * b1) if slope > 0 else None


def _exact_over_nominal(patterns, text: str, hit: tuple[int, float]) -> tuple[int, float]:
    """An exact parameter count written out ("1.235.814.400 params") over a nominal size said
    anywhere near it ("1B fits easily"): the model's own count, where the two are within a third."""
    exact = [(m.start(1), float(m.group(1)) * p.scale) for p, compiled in patterns if p.scale == 1
             for m in compiled.finditer(text)]
    if not exact or any(at == hit[0] for at, _ in exact):
        return hit
    at, value = max(exact)
    return (at, value) if abs(value - hit[1]) <= hit[1] / 3 else hit


def _stated_over_nominal_again(patterns, text: str, hit: tuple[int, float]) -> tuple[int, float]:
    """A count said as parameters ("Qwen-1.5B (about 1.78B params)") over the model's nominal size
    said again after it without that word ("why doesn't the 1.5B one fit?"): the stated count."""
    if _PARAMS_WORD.match(text, _match_end(patterns, text, hit[0])):
        return hit
    said = [(m.start(1), float(m.group(1)) * p.scale, _PARAMS_WORD.match(text, m.end()) is not None)
            for p, compiled in patterns for m in compiled.finditer(text) if m.start(1) < hit[0]]
    stated = [(at, value) for at, value, worded in said if worded and abs(value - hit[1]) <= hit[1] / 3]
    if not stated:
        return hit
    at, value = max(stated)
    nominal_before = any(not worded and where < at and value_ == hit[1] for where, value_, worded in said)
    return (at, value) if nominal_before and value != hit[1] else hit


def _match_end(patterns, text: str, start: int) -> int:
    """The end of the match whose number starts at `start`."""
    return next((m.end() for _, compiled in patterns for m in compiled.finditer(text) if m.start(1) == start), start)


def _last(patterns, text: str) -> tuple[int, float] | None:
    """(position, value) of the last match of any pattern in `text`."""
    best = None
    for p, compiled in patterns:
        for m in compiled.finditer(text):
            if p.value is not None:
                if best is None or m.start(1) >= best[0]:
                    best = (m.start(1), p.value)
                continue
            raw = m.group(1).replace(" ", "")
            scale = p.scale
            if raw.endswith("k"):
                if p.k_scale is None:
                    continue
                raw, scale = raw[:-1], scale * p.k_scale
            try:
                value = float(raw) * scale
            except ValueError:
                continue
            if best is None or m.start(1) >= best[0]:  # where the number stands: "batch 32→16" is 16
                best = (m.start(1), value)
    return best


#: A sentence of a question (a decimal point is no end: "2.5B").
_SENTENCE = re.compile(r"[^.!?;。！？؛\n]*(?:(?<=\d)\.(?=\d)[^.!?;。！？؛\n]*)*")

#: `XLA_PYTHON_CLIENT_ALLOCATOR=platform` set (quoted or not).
_PLATFORM_ALLOCATOR = re.compile(r"xla_python_client_allocator\s*=\s*[\"']?platform")

#: A GPU card named, whatever its size ("one A100 40GB"): where it stands against a TPU named (the word
#: "GPU" alone is not a card: "on GPU, accumulation does not add memory" speaks of GPUs in general).
_GPU_NAMED = re.compile(r"(?<![a-z0-9_])(?:[ahlv]\d{2,3}s?|a10g?|t4|rtx ?\d{4}|a[4-6]000|mi\d{3}x?|"
                        r"显卡|グラボ|그래픽카드)(?![a-z0-9_])")

#: What one JAX process takes on a GPU outside its pool (the CUDA context, cuBLAS/cuDNN handles), about.
CUDA_CONTEXT = 400 << 20
MANY_PROCESSES = 6  # from this many processes on one card, shares are split to the percent (pytest -n 12)
#: How far after the words of a cap its figure may stand ("no more than about 8GB").
CAP_REACH = 24
#: An [N, N] failed allocation of N items at least this many, nothing pairing them on purpose: a broadcast.
SQUARE_BROADCAST_MIN = 10_000
#: A model state this small a share of the one device named is not worth a line unless asked.
SMALL_SHARE = 0.5
#: MCMC samples under this share of the device named are not what fills it.
MCMC_SMALL_SHARE = 0.1
#: MCMC samples under this size are not what fills any accelerator.
MCMC_SMALL_BYTES = 256 << 20
#: The share of the device named that one piece of an MCMC run's samples may take.
MCMC_BUDGET_SHARE = 0.25
#: A tensor this big a share of the one device named is worth its line unasked.
BIG_SHARE = 0.25
#: A shape ending in [S, S] with S at least this is read as attention scores.


class Sizing:
    """The loaded sizing file and the lines it computes."""

    def __init__(self, data: SizingFile, figures: Figures, count_facts=None):
        self.data = data
        self.figures = figures
        self._count_facts = count_facts  # EvidenceRules.read_count_facts (devices and GPU memory named)
        compile_ = lambda p: re.compile(p, re.IGNORECASE)  # noqa: E731
        self._quantities = {q: [(p, compile_(p.pattern)) for p in ps] for q, ps in data.quantities.items()}
        self._dtypes = [(d, compile_(d.pattern)) for d in data.dtypes]
        self._optimizers = [(o, compile_(o.pattern)) for o in data.optimizers]
        self._cues = {k: [compile_(p) for p in ps] for k, ps in data.cues.items()}
        self._points = [(p, compile_(p.pattern)) for p in data.pairwise_points]
        self._blocks = [compile_(p.pattern) for p in data.pairwise_blocks]
        self._models = [(m, re.compile(rf"(?<![a-z0-9]){m.pattern}(?![a-z0-9])", re.IGNORECASE)) for m in data.models]
        self._gpus = [(g, [re.compile(rf"(?<![a-z0-9_]){re.escape(n)}(?![a-z0-9_])") for n in g.names])
                      for g in data.gpus]
        self._operands = {k: compile_(rf"(?:{p}){data.operand_joiner}") for k, p in data.block_operands.items()}
        # a part then its dtype within a few words ("تدرجات bf16", "Adam (mu و nu بـ f32)"), or the dtype first ("bf16 grads")
        self._parts_after = {k: compile_(rf"(?<![a-z0-9_])(?:{p})[^\d+,;،、，\n]{{0,16}}?(?=\S)") for k, p in data.state_parts.items()}
        self._parts_before = {k: compile_(rf"(?:{p})") for k, p in data.state_parts.items()}
        self._buffer_word = compile_(data.buffer_word) if data.buffer_word else None
        self._buffer_counts = [(n, compile_(rf"[^,，、;；。.\n]{{0,14}}?(?:{p})")) for n, p in data.buffer_counts.items()]
        scales = "|".join(re.escape(w) for w in sorted(data.count_scales, key=len, reverse=True))
        # "10000 secuencias", "2 millones de secuencias", "10万条序列", "1M samples" (digits already plain)
        self._counted = compile_(
            rf"(?<![\w.])(\d{{1,12}}(?:\.\d{{1,3}})?)\s*((?:{scales})(?![a-z]))?\s*"
            rf"(?:(?:of|de|d'|der|die|von)\s+)?(?:[条个個件本개장枚]\s*)?(?:の|的)?\s*({data.count_nouns})(?![a-z])"
        ) if data.count_nouns and scales else None
        self._how_much = compile_(data.how_much) if data.how_much else None

    # -- reading ----------------------------------------------------------------------------

    def read(self, text: str, capacity: int | None = None) -> Stated:
        """What `text` states. `capacity`: the HBM per device the user's own TPU log reports; of the
        generations named, the one whose device has it is the device ("on a v2-8 ... only v3 then?").
        (One answer reads the same text several times: read once, each caller gets its own copy.)"""
        s = self._read(text or "", capacity)
        return replace(s, values=dict(s.values), cues=set(s.cues), dtypes_named=set(s.dtypes_named),
                       from_model=list(s.from_model), widths=list(s.widths))

    @lru_cache(maxsize=256)
    def _read(self, text: str, capacity: int | None) -> Stated:
        low = _plain_digits(text or "").lower()
        s = Stated()
        at: dict[str, int] = {}
        # "Gemma2 9B ... Gemma2 2B worked fine on the eight": the model that worked is not the one asked
        # about; its sentence is left out of the sizes read, when another size is named outside it
        sizes_text = self._without_what_worked(low)
        # a mixture of experts' active count ("190B total (19B active)") is not the model's size: the
        # total is what its weights and state take
        sizes_text = _ACTIVE_PARAMS.sub(lambda m: " " * len(m.group(0)), sizes_text)
        # a paged cache's page ("páginas de 16 tokens", "page_size 16") and a chunked loss's chunk
        # ("chunk = 1024 tokens") are not a sequence's length: read, then left out of every other quantity's text
        for name in _TOKEN_PARTS:
            part = _last(self._quantities.get(name, []), sizes_text)
            if part is not None and part[1] > 0:
                s.values[name] = part[1]
                for _, compiled in self._quantities[name]:
                    sizes_text = compiled.sub(lambda m: " " * len(m.group(0)), sizes_text)
        for name, patterns in self._quantities.items():
            if name in _TOKEN_PARTS:
                continue
            # (a setting said in the sentence about what worked is still the setting: "0.98 worked for them")
            hit = _last(patterns, low if name in _SETTING_QUANTITIES else sizes_text)
            if name == "params" and hit is not None:
                hit = _exact_over_nominal(patterns, sizes_text, _total_before_parts(patterns, sizes_text, hit))
                hit = _stated_over_nominal_again(patterns, sizes_text, hit)
            if hit is not None and hit[1] > 0:
                s.values[name] = hit[1]
                at[name] = hit[0]
        for m in _BATCH_BY_SEQ.finditer(low):  # "batch 4 x seq 4096 = 16384 tokens": the product is the tokens
            b, n, total = (int(x) for x in m.groups())
            if b * n == total and m.start(3) >= at.get("seq", -1):
                s.values.update(batch=float(b), seq=float(n))
                at.update(batch=m.start(1), seq=m.start(2))
        if "batch" in at and at["batch"] == at.get("seq"):
            # one number read as both ("B=32768 tokens (batch×seq)"): a count of tokens, not a batch of sequences
            s.values["batch"] = 1.0
        named = [(m.start(), m.end(), model) for model, p in self._models for m in p.finditer(sizes_text)]
        if named:  # the last model named: its public configuration fills what the text leaves out
            start, end, model = max(named, key=lambda n: n[0])
            s.model = model.name
            for key, value in model.values.items():
                # a count read from the model's own name ("gemma-2b") is the name, not a figure
                if key not in s.values or (key == "params" and start <= at.get(key, -1) < end):
                    s.values[key] = value
                    s.from_model.append(key)
            layers, full = s.values.get("layers"), model.values.get("layers")
            if ("params" in s.from_model and "layers" not in s.from_model and layers and full and layers < full
                    and model.values.get("vocab") and model.values.get("hidden")):
                # the model cut to fewer layers ("--override_num_layers=25" of Llama-3-70B's 80): its embedding
                # and output head whole, the rest in proportion to the layers kept
                ends = 2 * model.values["vocab"] * model.values["hidden"]
                s.values["params"] = ends + (model.values["params"] - ends) * layers / full
        # a baseline compared with ("vs AdamW fp32") is not the choice: read the choice without it
        baselines = [m.group(0) for p in self._cues.get("compared", []) for m in p.finditer(low)]
        # ("a bf16 reference model": its dtype is not the trained state's)
        chosen = dlow = self._without_copies(low)
        for p in self._cues.get("compared", []):
            chosen = p.sub(" ", chosen)
        s.baseline_optimizer = self._last_of(self._optimizers, " ".join(baselines))
        if s.baseline_optimizer is None:
            # two optimizers named, no "compared with": the one said first is the baseline of the one
            # switched to ("AdamW in fp32 ... and if I switch to Adafactor?")
            named = sorted(((m.start(), o) for o, p in self._optimizers for m in p.finditer(low)), key=lambda x: x[0])
            if len({o.name for _, o in named}) > 1 and named[0][1].name != named[-1][1].name:
                s.baseline_optimizer = named[0][1]
        s.baseline_dtype = self._last_of(self._dtypes, " ".join(baselines))
        s.dtype = self._last_of(self._dtypes, chosen) or self._last_of(self._dtypes, dlow)
        # the last one: "and in int8?" about the cache wins; said after the cache or before it ("int8 KV cache")
        near = sorted([*_KV_DTYPE.finditer(dlow), *_KV_DTYPE_BEFORE.finditer(dlow)], key=lambda m: m.start())
        if near:
            s.kv_dtype = self._last_of(self._dtypes, near[-1].group(1))
            # the model's own dtype is the last one said elsewhere ("bf16 ..., KV cache a int8")
            rest = _KV_DTYPE_BEFORE.sub(" ", _KV_DTYPE.sub(" ", dlow))
            s.dtype = self._last_of(self._dtypes, rest) or s.dtype
        s.dtypes_named = {d.name for d, pattern in self._dtypes if pattern.search(dlow)}
        s.state_dtype = self._state_dtype(chosen) or self._state_dtype(dlow)
        s.optimizer = self._last_of(self._optimizers, chosen) or self._last_of(self._optimizers, low)
        s.cues = {k for k, ps in self._cues.items() if any(p.search(low) for p in ps)}
        if "sharding_named" in s.cues:  # (sharding named is a share per device asked: one pattern for both)
            s.cues.add("shard_asked")
        s.replicated = _replicated_shape(low)
        if not {"block_m", "block_k", "block_n"} & s.values.keys():
            s.values.update(_block_shapes(low))
        triple = _block_triple(low, named={"block_m", "block_k", "block_n"} <= s.values.keys())
        if triple is not None and triple[0] > max((at.get(k, -1) for k in ("block_m", "block_k", "block_n")), default=-1):
            s.values.update(triple[1])  # the tiling said last ("2048/1024/2048 after all") wins
        if self._parts_after:
            s.state_parts = self._state_parts(low.split("\n")[-1])  # (the newest turn's own list)
        if {"block_m", "block_k", "block_n"} <= s.values.keys():
            s.operand_dtypes = self._operand_dtypes(low)
            s.operand_buffers = self._operand_buffers(low)
        s.widths = [int(n) for n in re.findall(r"(?<![\d.])(\d{3,6})(?!\d|\.\d)", low)]
        s.from_dims = _params_from_dims(s)
        if s.from_dims is not None:
            if s.values.get("params"):  # the count a name or the text said ("22b.sh"), replaced
                s.from_dims["named"] = s.values["params"]
            s.values["params"] = s.from_dims["params"]
            s.from_model = [k for k in s.from_model if k != "params"]
        if "params" not in s.values and s.values.get("weights_size") and "training" in s.cues:
            # "the params weigh 10.9 GiB" (a checkpoint's size) of a model to train: its parameters, float32
            # unless a 16-bit type is named (the training state's arithmetic says which it assumed)
            per = s.dtype.bytes if s.dtype and s.dtype.bytes in (2, 4) else 4
            s.values["params"] = s.values["weights_size"] / per
        if "params" not in s.values and s.optimizer is not None and s.optimizer.moments:
            # a table trained with an optimizer that keeps moments ("2^24 rows × 1024 float32 with Adam"):
            # its elements are the parameters whose state is asked about
            tables = [math.prod(dims) for _, dims in _big_shapes(low)]
            if len(tables) == 1:
                s.values["params"] = float(tables[0])
        self._read_devices(low, s, capacity)
        share = s.values.get("mem_utilization")
        if share and 0.3 <= share < 1 and s.device_memory:  # "only 90% of the HBM": what the server may use
            s.memory_label = f"{format_bytes(s.device_memory * share)} = {round(share * 100)}% × {format_bytes(s.device_memory)}"
            s.device_memory = int(s.device_memory * share)
        axis = s.values.get("fsdp_axis")
        if axis and axis > 1 and (not s.devices or s.devices < axis or (s.devices > axis and s.devices % axis == 0)):
            # the state sharded over the FSDP axis only: other slices or a data axis hold copies of it
            # (and "--fsdp-devices 4" after "2× A100": the devices it now runs on)
            s.devices = int(axis)
        return s

    def _usable(self, gen: str) -> int | None:
        """The usable HBM of one JAX device of `gen` (a TensorCore of v2/v3, a whole chip where JAX
        runs megacore or the chip has one core), as a deviceless compile reports it."""
        f, hw = self.figures.data.generations.get(gen), self.figures.gens.get(gen)
        if f is None or hw is None or not hw.hbm_reported:
            return None
        per_chip = 1 if f.megacore is not None else hw.devices_per_chip
        return parse_size(hw.hbm_reported) * (hw.devices_per_chip // per_chip)

    def _state_dtype(self, low: str) -> DType | None:
        """The last dtype said of the weights, gradients or optimizer state: one whose few words
        before name them and no activations."""
        best: tuple[int, DType] | None = None
        for dtype, pattern in self._dtypes:
            for m in pattern.finditer(low):
                before = low[max(0, m.start() - 40): m.start()]
                words = list(_STATE_WORDS.finditer(before))
                # (not a dtype said of something else after the weights' own: "weights bf16, only the KV fp8")
                after = before[words[-1].end():] if words else ""
                said_of_state = bool(words) and not (_OTHER_SUBJECT.search(after)
                                                     and any(p.search(after) for _, p in self._dtypes))
                if ((said_of_state and not _ACTIVATION_WORDS.search(before))
                        or _ALL_IN.search(before[-14:])):  # "alles in bf16 – Params, Grads, mu und nu"
                    if best is None or m.start() > best[0]:
                        best = (m.start(), dtype)
        return best[1] if best else None

    def _state_parts(self, low: str) -> dict[str, DType]:
        """The dtype of each part of a training state (weights, grads, moments) where `low` names one
        right after the part or right before it; the last said winning."""
        out: dict[str, DType] = {}
        for part, pattern in self._parts_after.items():
            for m in pattern.finditer(low):
                dtype = next((d for d, p in self._dtypes if p.match(low, m.end())), None)
                if dtype is not None:
                    out[part] = dtype
        for part, pattern in self._parts_before.items():
            for d, p in self._dtypes:
                for m in p.finditer(low):
                    if pattern.match(low, m.end() + len(re.match(r"\s*", low[m.end():]).group(0))):
                        out.setdefault(part, d)
        return out

    def _operand_dtypes(self, low: str) -> dict[str, DType]:
        """Each Pallas matmul operand's dtype where the text names it right after the operand
        ("x en bf16, w int8, salida bf16"), the last one said winning."""
        return self._after_operands(low, self._dtypes)

    def _operand_buffers(self, low: str) -> dict[str, int]:
        """Each Pallas matmul operand's buffer count where the text says it right after the operand
        ("LHS はダブルバッファ、RHS はトリプルバッファ"), in a text that speaks of buffering at all."""
        if self._buffer_word is None or not self._buffer_word.search(low):
            return {}
        return self._after_operands(low, self._buffer_counts)

    def _after_operands(self, low: str, said: list[tuple[Any, re.Pattern[str]]]) -> dict[str, Any]:
        """For each Pallas matmul operand (x, y, out), the value whose words `low` writes right after
        it, the last one said winning."""
        out: dict[str, Any] = {}
        for operand, pattern in self._operands.items():
            for m in pattern.finditer(low):
                value = next((v for v, p in said if p.match(low, m.end())), None)
                if value is not None:
                    out[operand] = value
        return out

    def _without_copies(self, low: str) -> str:
        """`low` with each copy of the weights kept beside the trained ones ("a bf16 reference model",
        "rollout용 bf16 웨이트 복사본") and a dtype said just before it blanked (same length): their dtype
        is the copy's, not the state's."""
        for cue in WEIGHT_COPIES:
            for p in self._cues.get(cue, []):
                for m in list(p.finditer(low)):
                    before = low[max(0, m.start() - 14):m.start()]
                    # (the dtype written right before it: "bf16 reference model")
                    adjacent = [d.start() for _, dp in self._dtypes for d in dp.finditer(before)
                                if not before[d.end():].strip(" -_")]
                    start = m.start() - (len(before) - min(adjacent)) if adjacent else m.start()
                    low = f"{low[:start]}{' ' * (m.end() - start)}{low[m.end():]}"
        return low

    def _without_what_worked(self, low: str) -> str:
        """`low` with the sentences that say a model worked blanked (same length), when a model or
        parameter count is still named outside them; else `low` itself."""
        worked = self._cues.get("worked_before", [])
        if not worked:
            return low
        spans = [(m.start(), m.end()) for m in _SENTENCE.finditer(low) if any(p.search(m.group(0)) for p in worked)]
        if not spans:
            return low
        masked = list(low)
        for a, b in spans:
            masked[a:b] = " " * (b - a)
        out = "".join(masked)
        params = self._quantities.get("params", [])
        still = _last(params, out) is not None or any(p.search(out) for _, p in self._models)
        return out if still else low

    @staticmethod
    def _last_of(items, low: str):
        best = None
        for item, pattern in items:
            for m in pattern.finditer(low):
                if best is None or m.start() > best[0]:
                    best = (m.start(), item)
        return best[1] if best else None

    def _read_devices(self, low: str, s: Stated, capacity: int | None = None) -> None:
        counted = self._count_facts({}, low) if self._count_facts else {}
        n = s.values.get("devices_times_model") or counted.get("devices_named")
        s.devices = int(n) if n else None
        gens = self.figures.generations_in(low)
        gpu_at = max((m.start() for m in _GPU_NAMED.finditer(low)), default=-1)
        if gens and gpu_at > self.figures.last_generation_at(low):
            # "saved on a v4-32, restored on one A100": the device named last is the one it runs on,
            # and the TPU slice's size is not its device count
            gens = []
            s.devices = int(s.values["devices_times_model"]) if s.values.get("devices_times_model") else None
        if gens:  # a TPU generation named: its chips and their HBM
            at = self.figures.last_generation_at(low)
            # the one named last ("v4-128 and v5p-64 ... and the 32B on a v4-512?": v4), not the last new name
            gen = (self.figures.generations_in(low[at:]) or gens)[0] if at >= 0 else gens[-1]
            turn_start = low.rfind("\n", 0, at) + 1  # (a conversation's turns are lines)
            before = [g for g in self.figures.generations_in(low[turn_start:at]) if g != gen]
            if len(gens) > 1 and before and _SWITCH.search(low[max(0, at - 40):at]):
                # "on a v2-8 ... is switching to a v3-8 pointless?": the last one named is considered,
                # the device the text runs on is named before it in the same turn (a later turn's
                # "if I switch to a v3-8 instead, how much per core?" asks about the v3-8)
                gen = before[-1]
            logged = [g for g in gens if capacity and self._usable(g) and abs(self._usable(g) - capacity) <= 0.01 * capacity]
            if logged and gen not in logged:  # the log says which of the generations named it ran on
                gen = logged[-1]
            f = self.figures.data.generations.get(gen)
            if f is None or f.hbm_public is None:
                return
            s.device = _tpu_label(gen)
            # what one JAX device has on the hardware: a TensorCore of v2/v3, a whole chip where
            # JAX runs megacore (v4) or the chip has one core; the usable HBM measured per device
            hw = self.figures.gens.get(gen)
            per_chip = 1 if (f.megacore is not None or hw is None) else hw.devices_per_chip
            if self._usable(gen):
                s.device_memory = self._usable(gen)
            else:
                s.device_memory = parse_size(str(f.hbm_public.value))
            s.memory_label = format_bytes(s.device_memory)  # one unit in every figure: GiB
            slices = [m for m in _SLICE.finditer(low) if gen in self._slice_generations(m.group(1), low)]
            if slices and f.slice_counts is not None:
                n = int(slices[-1].group(2))
                cores = int(f.cores_per_chip.value) if f.cores_per_chip else 1
                chips = max(1, n // cores) if f.slice_counts.value == "cores" else n
                s.devices = chips * per_chip
                # several slices (multislice): "4 slices v6e-128", or the chips counted outright ("512 chips")
                # (the last said: "and with only 2 slices (256 chips)?" after "4 slices (512 chips)")
                many = ([m for m in _SLICES_COUNT.finditer(low)] or [None])[-1]
                chips_said = [int(m.group(1)) for m in _CHIPS_COUNT.finditer(low)]
                explicit = chips_said[-1] if chips_said else counted.get("devices_named")
                if many and chips_said and many.start() < low.rfind(str(chips_said[-1])):
                    many = None  # the chips counted after the slices say it outright
                if many and int(many.group(1)) > 1:
                    s.devices *= int(many.group(1))
                elif (isinstance(explicit, int) and explicit > s.devices and explicit % s.devices == 0
                      and (chips_said or explicit not in self._slice_device_counts(low))):
                    # (not "32 devices, right?" said of a v4-32: the name's number counts cores, not devices)
                    s.devices = explicit
            return
        memory = counted.get("gpu_memory_named_bytes")
        label = None
        card = _own_card(low, self._gpus)
        sized = _SIZED_CARD.search(low)
        first = _first_named(low, card, self._gpus) if card is not None else 0
        if (card is not None and memory and sized is not None and sized.start() < first
                and not _MY_CARD.search(low[max(0, first - 24): first])):
            # a card named with its size first ("A100 80GB ... the eval fits a 2080 Ti"): that one, whose
            # size the text gives, is the card it runs on
            card = None
        if card is not None:
            # a card with one size: its public memory, not a figure the question gives for
            # something else ("8x H100 ... ~11GB of params on each GPU")
            label, memory = card.names[0].upper(), parse_size(card.memory)
            s.shared_per_block = int(card.shared_kib * 1024) if card.shared_kib else None
        # a kernel moved between cards ("works on the H100, fails on the MI300X"): the smallest block's
        # shared memory of the cards named is the limit that fails
        named_shared = [g.shared_kib for g, patterns in self._gpus if g.shared_kib and any(p.search(low) for p in patterns)]
        if len(named_shared) > 1 and any(p.search(low) for p in self._cues.get("shared_named", [])):
            s.shared_per_block = int(min(named_shared) * 1024)
        profile = _MIG_PROFILE.search(low)
        mig = [int(m.group(1)) << 20 for m in _CARD_MIB.finditer(low)] if _MIG.search(low) else []
        if profile:
            # a MIG profile named ("1g.16gb"): the instance's memory, whatever total the parent card reports
            # (nvidia-smi --query-gpu shows the whole card's)
            memory, label = int(profile.group(2)) << 30, "MIG"
        elif mig and (memory is None or max(mig) <= memory):
            # a MIG instance's memory quoted ("7 parts of an A100, 9728MiB each"): one process has that
            # instance, not the card
            memory, label = max(mig), "MIG"
        elif memory is None and _ANY_GPU.search(low):
            # a card the table does not know (an MX250, a GTX 1650) with nvidia-smi's total quoted
            # ("2048MiB"): that total, the largest figure in MiB the text quotes
            quoted = [int(m.group(1)) << 20 for m in _CARD_MIB.finditer(low)]
            if quoted:
                memory, label = max(quoted), "GPU"
        if memory is None:
            return
        reported = self._reported_total(label)
        exact = _card_total(low, memory)
        memory = reported or memory
        if exact and not profile:  # what nvidia-smi or JAX reports of this card (not the parent of a MIG profile)
            memory = exact
        s.gpu = True
        s.device = label or "GPU"
        # what JAX can use of the card is its pool: the XLA_PYTHON_CLIENT_MEM_FRACTION the text sets,
        # else the default three quarters; every fit is checked against that, not the whole card
        s.card_memory = int(memory)
        share = counted.get("mem_fraction_named_fraction")
        share = share if isinstance(share, float) and 0 < share < 1 else GPU_POOL_SHARE
        s.pool_share = share if share != GPU_POOL_SHARE else None  # a share the text sets
        s.device_memory = int(memory * share)
        s.memory_label = f"{format_bytes(s.device_memory)} = {round(share * 100)}% × {format_bytes(int(memory))}"

    def _reported_total(self, label: str | None) -> int | None:
        """The total CUDA reports for the card named where it is well under the size the card is
        sold as (a T4's 16 GB are 14.75 GiB): JAX's pool is a fraction of that."""
        gpu = next((g for g, _ in self._gpus if label == g.names[0].upper()), None)
        return parse_size(gpu.reported) if gpu is not None and gpu.reported else None

    # -- answering --------------------------------------------------------------------------

    def without_repeats(self, lines: list[FigureAnswer], answered: set[str]) -> list[FigureAnswer]:
        """`lines` less those that a short answer given beside them already says (`unless`)."""
        return [a for a in lines if not answered.intersection(self.data.unless.get(a.subject, ()))]

    def hlo_largest(self, log: str, language: str) -> FigureAnswer | None:
        """The largest buffer an HLO dump pasted in `log` defines, with the instructions of that shape
        and the source lines their metadata names; where they feed a reduction, that a fused
        reduction never holds them. None without HLO, or when its largest buffer is small."""
        buffers = hlo_buffers(log or "")
        if not buffers or (buffers[0].size_bytes or 0) < HLO_BIG:
            return None
        top = buffers[0]
        same = [b for b in buffers if b.shape == top.shape]
        names = ", ".join(f"`{b.instruction}`" for b in same[:HLO_NAMES])
        sources = list(dict.fromkeys(f"{Path(b.source_file).name}:{b.source_line}" for b in same if b.source_file))
        parts = [self._msg("hlo_largest", language, shape=f"`{top.shape}`", size=format_bytes(top.size_bytes),
                           count=len(same), names=names + (", …" if len(same) > HLO_NAMES else ""),
                           sources=", ".join(sources[:HLO_NAMES]) or "—")]
        reduced = next((b for b in buffers if b.op_type == "reduce" and (b.size_bytes or 0) < top.size_bytes
                        and b.size_bytes >= top.size_bytes // HLO_REDUCE_MAX), None)
        if reduced is not None and {b.op_type for b in same} & HLO_ELEMENTWISE:
            parts.append(self._msg("hlo_reduced", language, shape=f"`{top.shape}`", reduce=f"`{reduced.shape}`",
                                   reduce_size=format_bytes(reduced.size_bytes)))
        return FigureAnswer(kind=KIND, subject="hlo_largest", text=self._join(parts, language),
                            value_bytes=int(top.size_bytes), sources=["computed"])

    @staticmethod
    def settings_in(log: str) -> str:
        """The GPU pool's settings that `log` shows, one `NAME=value` per line (an environment printed
        by a launcher): read beside the question, as the asker's own."""
        lines = [m.group(0) for m in _POOL_SETTING.finditer(log or "")]
        # the card the log's framework reports ("deviceMemorySize: 4.63GiB" from TensorFlow's device
        # list, "with 14678 MB memory"): its memory, as nvidia-smi would quote it
        reported = [round(float(m.group(1) or m.group(3)) * (1024 if (m.group(2) or "m").lower().startswith("g") else 1))
                    for m in _LOG_CARD_MEMORY.finditer(log or "")]
        if reported:
            lines.append(f"GPU {max(reported)}MiB")
        return "\n".join(lines)

    @staticmethod
    def process_count(text: str) -> int | None:
        """How many processes or runs `text` says (the last count said)."""
        return _process_count(text or "")

    def excluded(self, lines: list[FigureAnswer]) -> set[str]:
        """The remedies that `lines` show cannot help (`excludes`: a VMEM limit above the VMEM there is)."""
        return {rid for a in lines for rid in self.data.excludes.get(a.subject, ())}

    def replaced(self, lines: list[FigureAnswer]) -> set[str]:
        """The short answers that `lines` say better with the asker's own figures (`replaces`)."""
        return {sid for a in lines for sid in self.data.replaces.get(a.subject, ())}

    def params_stated(self, text: str) -> tuple[float, str] | None:
        """The model's parameter count that `text` states or names (a public model), and how the
        answer writes it (6.74B)."""
        params = self.read(text).values.get("params")
        return (params, _count(params)) if params else None

    def asks_max_batch(self, text: str) -> bool:
        """Whether `text` asks for the largest batch ("what max batch can I run?")."""
        low = (text or "").lower()
        return any(p.search(low) for p in self._cues.get("max_batch", []))

    def names_memory(self, text: str) -> bool:
        """Whether `text` speaks of memory, HBM or devices ("how much memory then?"), not of time."""
        low = (text or "").lower()
        return any(p.search(low) for p in self._cues.get("memory_named", []))

    def asks_to_fit(self, text: str) -> bool:
        """Whether `text` asks if something fits ("will it fit?", "放得下吗")."""
        low = (text or "").lower()
        return any(p.search(low) for p in self._cues.get("fits", []))

    def answer(self, text: str, language: str, asked: bool = False, earlier: str = "",
               capacity: int | None = None, shared: int | None = None,
               requested: int | None = None, used: int | None = None) -> list[FigureAnswer]:
        """The lines the figures in `text` allow, in `language`. `asked`: the question asks for a
        figure or whether something fits (then a model's size is given even without a device
        named). `earlier`: the conversation's earlier questions; only lines that the new turn
        changes are returned. `capacity`: the HBM per device that the user's own TPU log reports,
        which wins over the catalogue's measured figure (one capacity in one answer). `shared`: the
        shared memory a GPU kernel's block gets, from the user's error. `requested`: the bytes of an
        allocation that failed; when the stated figures multiply to it, its shape counts as written
        out (a chunk size of it can be asked), and the turn that states them gets the product."""
        text, earlier = _plain_digits(text or ""), _plain_digits(earlier or "")
        earlier = _bind_symbols(earlier, text) if earlier else earlier  # ("T = 10000" of an earlier "(T, 10, 5)")
        factored = self.allocation_shape(f"{earlier}\n{text}", requested) if requested else None
        own = factored is not None and self.allocation_shape(text, requested) is not None
        # a later turn asking for a chunk of it ("which batch_size fits?") reads the earlier turn's
        # array as a shape written out
        chunked = factored is not None and not own and "chunks" in self.read(text).cues
        shape = f"\n[{', '.join(map(str, factored.dims))}] {factored.dtype}" if factored and chunked and not own else ""
        lines = self._answer(f"{earlier}\n{text}{shape}" if earlier else f"{text}{shape}", language, asked,
                             capacity, turn=f"{text}{shape}", used=used, requested=requested)
        pairs = next((a for a in lines if a.subject == "pairwise"), None)
        if pairs is not None and requested and abs(pairs.value_bytes - requested) <= PAIRS_SLACK * requested:
            # the log's failed allocation is the matrix of pairs the question's counts make: said so
            said_it = self._msg("pairwise_request", language, requested=format_bytes(requested))
            lines[lines.index(pairs)] = pairs.model_copy(update={"text": self._join([pairs.text, said_it], language),
                                                                 "subject": "pairwise_log"})
        if own:
            square = "square_meant" not in self.read(f"{earlier}\n{text}").cues
            lines.insert(0, self._allocation_line(factored, requested, language, square_broadcast=square))
        said = self.read(f"{earlier}\n{text}" if earlier else text)
        whole = next((a for a in lines if a.subject == "tensor" and a.value_bytes), None)
        if (whole is not None and requested and said.devices and said.devices > 1 and "shard_asked" in said.cues
                and abs(whole.value_bytes - requested) <= WHOLE_ARRAY_SLACK * requested):
            # "each GPU should hold only its shard, but it asks for ~27GiB": the request is the whole array
            gathered = self._msg("request_whole_array", language, requested=format_bytes(requested),
                                 whole=format_bytes(whole.value_bytes),
                                 share=format_bytes(whole.value_bytes / said.devices), devices=said.devices)
            lines[lines.index(whole)] = whole.model_copy(update={"text": self._join([whole.text, gathered], language)})
        line = self._shared_blocks(said, language, shared or said.shared_per_block)  # the log's, else the card's
        if line is not None:  # (the blocks written "128x128x128" are no array to size whole)
            lines = [line, *(a for a in lines if a.subject not in ("tensor", "padded_tensor", "shared_per_card"))]
        state = next((a for a in lines if a.subject in ("training_state", "weights") and a.value_bytes), None)
        if state is not None:  # several slices named ("per chip on a v4-128 and a v5p-64?"): each one's share
            # (a follow-up naming another slice, "a v4-16 instead?", beside the one the conversation named)
            both = f"{earlier}\n{text}" if earlier and self._slices_in(text) else text
            per_slice = self._state_per_slice(both, state.value_bytes, language)
            if per_slice is not None:
                lines.insert(lines.index(state) + 1, per_slice)
        lines = self._left_after(text, earlier, lines, language)
        lines = self._kv_beside_state(text, earlier, lines, language)
        lines = self._data_on_host(text, earlier, lines, language)
        lines = self._tensor_part(text, lines, language)
        lines = self._tensor_per_item(text, lines, language)
        growth = self._seq_growth(f"{earlier}\n{text}" if earlier else text, text, language)
        if growth is not None:  # "at seq 512 it passed, at 16384 it does not compile": what grows with S and S²
            lines.insert(0, growth)
        table = self._smem_table(text, language, earlier)
        if table is not None:  # "a block table of 300,000 int32 in SMEM: how many entries fit?"
            lines = [table, *(a for a in lines if a.subject not in ("tensor", "slice"))]
        changes = self._changes(text, earlier, language)
        if changes is not None:  # "the saving in % for all three, and the new per-device numbers?": those,
            lines = [changes, *(a for a in lines if not a.subject.startswith("slice"))]  # not the slices' chip counts
        per_card = self._shared_per_card(text, language)
        if per_card is not None and not any(a.subject == "gpu_shared_blocks" for a in lines):
            lines.insert(0, per_card)  # "how much shared memory per block on this card against the H100?"
        fraction_range = self._fraction_range(text, earlier, language)
        if fraction_range is not None:  # "28.6 GiB outside the pool, high-water 143.84 GiB: which fraction?"
            lines = [fraction_range, *(a for a in lines if not a.subject.startswith(("pool", "gpu_pool")))]
        scaled = self._scaled_measure(text, earlier, language)
        if scaled is not None:  # "0.16 GB at 10,000 sequences: how much for 2 million?": in proportion
            lines.insert(0, scaled)
        over = self._over_limit(text, earlier, language)
        if over is not None:  # "peaks 151.760 and 151.791 GiB, limit 138.225 GiB: how much over each?"
            lines.insert(0, over)
        series = self._batch_series(text, earlier, language)
        if series is not None:  # "b64 102.4, b96 125.8, b128 148.2 GiB: does b160 fit?": the line through them
            lines = [series, *(a for a in lines if not a.subject.startswith(("gpu_pool", "pool_")))]
        # (with a log's failed size, its evidence rule says it: gpu-allocation-backpedal)
        retried = self._backpedal(f"{earlier}\n{text}", language) if not requested else None
        if retried is not None:  # "14.39GiB, then 12.95, 11.66, 10.49, 9.44": one reservation retried at 90%
            lines = [retried, *(a for a in lines if not a.subject.startswith(("gpu_pool", "pool_")))]
        scaled = self._batch_scaled(text, earlier, language) if earlier else None
        if scaled is not None:  # "batch 1024 needed >215 GB; at 256, does it fit?": that need scaled
            lines.insert(0, scaled)
        split = self._microbatches(text, earlier, language)
        if split is not None:  # "num_microbatches = 8: how many per core, do the activations double?"
            lines.insert(0, split)
        other = self._shared_on_card(text, shared, requested, language)
        if other is not None:  # "and on an H100, does it pass?": the kernel's block against that card's limit
            lines = [other, *(a for a in lines if not a.subject.startswith(("gpu_pool", "pool_")))]
        if earlier and lines:  # what the last two earlier turns were answered with, each turn's figures first
            turns = earlier.split("\n")
            # (a line whose code this turn asks for and an earlier answer did not give is new)
            before = {(a.text, a.snippet) for n in range(max(1, len(turns) - 1), len(turns) + 1)
                      for a in self._answer("\n".join(turns[:n]), language, True, capacity, turn=turns[n - 1])}
            lines = [a for a in lines if (a.text, a.snippet) not in before]
        return lines

    def _answer(self, text: str, language: str, asked: bool, capacity: int | None = None,
                turn: str | None = None, used: int | None = None, requested: int | None = None) -> list[FigureAnswer]:
        """`text`: the conversation's questions so far; `turn`: the newest of them, whose own
        figures win where one figure replaces another (a peak measured since). `requested`: the
        bytes of an allocation that failed, read per element of the shape the text writes out."""
        s = self.read(text, capacity)
        if capacity and s.device and s.device.startswith("TPU"):
            s.device_memory, s.memory_label = capacity, format_bytes(capacity)
            s.from_log, s.log_used = True, used
        asked = asked or "fits" in s.cues
        # asked about accumulation: its own extra memory first
        per_example = self._per_example(s, language)
        if per_example is not None:  # vmap(grad): the per-example gradients are the memory, not the model's state
            return [per_example]
        beyond = self._size_not_vmem(turn or text, s, language)
        if beyond is not None:  # "~1 GB too much (something about VMEM?)": that size is HBM
            return [beyond]
        kib = self._kib_flag(turn or text, s, language)
        if kib is not None:  # "--xla_tpu_scoped_vmem_limit_kib=98304: how many MiB, and 131072?"
            return [kib]
        over = self._limit_over_physical(turn or text, s, language)
        if over is not None:  # "raise vmem_limit_bytes to 64MB: does that help on v4?"
            return [over]
        shares = self._vmem_capacity_fractions(turn or text, s, language)
        if shares is not None:  # "vmem_capacity_bytes * 0.9 changed to 0.85: what values on v6e?"
            return [shares]
        samples = self._mcmc_samples(s, language)
        if samples is not None:  # an MCMC run's kept samples: that arithmetic, not a model's state
            return [samples]
        hosts = self._hosts_batch(text, s, language)
        if hosts is not None:  # "per_device × jax.device_count() on a v4-32": what each device really gets
            return [hosts]
        host = self._host_checkpoint(s, language)
        if host is not None:  # a save filling host RAM: that arithmetic, not the device's
            return [host]
        donated = self._donated(s, language) if asked else None
        if donated is not None:  # "how much did donation save?": that state, not the whole training state
            step = self._batch_step(s, language, saving=donated.value_bytes)
            return [donated, step] if step is not None else [donated]
        accumulator = self._accumulator(s, language)
        turn_cues = self.read(turn).cues if turn else s.cues  # what this turn itself asks about
        if accumulator is not None and "extra" in turn_cues:
            return [accumulator]  # "how much more does MultiSteps cost?" asked in this turn: that
        out = [line for line in (accumulator, self._params_line(s, language),
                                 self._model(s, language, asked, turn_cues=turn_cues if turn else None),
                                 self._kv(s, language), self._scores(s, language), self._logits(s, language),
                                 self._pallas_blocks(s, language), self._activations(s, language))
               if line is not None]
        # a shape asked about and nothing else computed: its size; unasked, a shape that says what it
        # is (attention scores, logits) or takes a good share of the device named (the
        # f32[8,16,8192,8192] that fills a chip)
        raw = self._raw_bytes(turn or text, s, language) if asked else None
        if raw is not None:  # "[1606439424, 1606437376, ...]: how many GiB per chip?"
            out.insert(0, raw)
        jacobian = self._jacobian(turn or text, s, language)
        if jacobian is not None:  # "root_find with Newton tries to allocate 77 TB": the dense Jacobian of the state
            return [jacobian]
        modes = self._jacobian_modes(text, s, language)
        if modes is not None:  # "jacfwd OOMs, jacrev is fine: 1e7 inputs, a scalar out": each mode's memory
            return [modes]
        loading = self._host_load(s, language)
        if loading is not None:  # "the session crashed after using all available RAM" loading a model: host RAM
            return [loading]
        trajectory = self._trajectory(text, s, language)
        if trajectory is not None:  # "721×1440 grid, 227 channels, float32: 40 steps, and 120?"
            return [trajectory]
        pairs = self._pairwise(text, turn or text, s, language)
        if pairs is not None:  # "sinkhorn on x 65536 points, y 32768": the matrix of pairs, whole and in blocks
            # (the points themselves, when one point's shape is said: "30000 images 3×512×512")
            data = self._dataset(turn or text, s, language)
            shapes = list(_SHAPE.finditer(turn or text or ""))
            item = [int(d) for d in re.findall(r"\d+", shapes[-1].group(0))] if shapes else []
            # (an item's shape smaller than the count of items: "30000 images 3×512×512", not the matrix
            # itself written out, "60000×60000", beside the "32767 samples" of the next turn)
            if data is not None and data.value_bytes > pairs.value_bytes and item and max(item) < s.values.get("items", 0):
                return [pairs, data]
            return [pairs]
        chunks = self._chunks(text, turn or text, s, language)
        if chunks is not None:  # the chunk size asked for, not the whole array's size again
            return [chunks]
        saved = self._saved_names(text, turn or text, s, language)
        if saved is not None:  # "how many named tensors per layer can I afford?"
            return [saved]
        policies = self._policies(text, s, language)
        if policies is not None:
            out.insert(0, policies)
        experts = self._experts(s, language)
        if experts is not None:  # a mixture of experts' weights: the experts first, the rest beside them
            out = [experts, *[a for a in out if a.subject != "weights"]]
        logits = next((a for a in out if a.subject == "logits"), None)
        if logits is not None and "logits" in turn_cues and not {"optimizer_state", "full_training"} & turn_cues:
            # "full logits [batch, seq, vocab] in fp16 are 20GB, right?": those, not the model's weights or state
            out = [logits, *(a for a in out if a.subject not in ("logits", "weights", "training_state"))]
        kept = self._policy_weight_dots(turn_cues, s, language)
        if kept is not None:  # "and with dots_with_no_batch_dims_saveable, how much more?"
            return [kept]
        line = (self._batch_line(text, s, language) or self._count_line(text, turn or text, s, language)
                or self._noun_line(turn or text, language))
        if line is not None:  # "what per-device batch fits, from these two measurements?"
            return [line]
        blocks = self._attention_blocks(text, s, language)
        if blocks is not None:  # "block_q = block_k = 512, head_dim 72: the blocks' VMEM?": those, not the array
            return [blocks, *out]
        tensor = self._tensor(text, s, language, turn, requested)
        if tensor is not None and tensor.subject == "logits_tensor":  # the log's own logits say it with the fix
            out = [a for a in out if a.subject != "logits"]  # (not again from the question's words, or assumed)
        kept = self._kept_per_step(tensor, s, language) if tensor is not None else None
        if kept is not None:  # the shape appended every step: how long until it fills the device
            out.append(kept)
        elif tensor is not None and ((asked and not out) or tensor.subject != "tensor" or _request_of(tensor.value_bytes, requested)
                                     or (asked and _TYPED_SHAPE.search(turn or text)) or (
                s.device_memory and tensor.value_bytes >= BIG_SHARE * s.device_memory)
                or (asked and turn is not None and turn != text and _SHAPE.search(turn))
                # a kernel's block beside the VMEM limit set for it ("raised vmem_limit_bytes to 100MB, still OOM")
                or ("vmem_named" in s.cues and limit_asked(turn or text))):
            out.append(tensor)  # (a follow-up that writes a shape out asks about it: "(32, 6144, 5120), how much?")
            if asked and _TYPED_SHAPE.search(turn or text):  # a buffer copied from a dump asked about, first;
                out = [tensor, *(a for a in out if a is not tensor and a.subject != "weights")]  # not the model's weights
        stacked = self._scan_stacked(text, turn or text, s, language)
        if stacked is not None:  # "lax.scan over 2000 steps, each returns (512, 512, 3) f32": steps × that
            out = [stacked, *(a for a in out if a.subject != "tensor")]
        patches = self._patches(turn or text, s, language)
        if patches is not None:  # "patch_size=96, stride 4 over 256x256": the windows, each materialised
            out = [patches, *(a for a in out if a.subject != "tensor")]
        batch = self._input_batch(turn or text, s, language)
        data = self._dataset(text, s, language) if batch is None else batch
        if data is not None and batch is not None:
            out.append(batch)
        elif data is not None and (asked or (s.device_memory and data.value_bytes >= BIG_SHARE * s.device_memory)):
            out.append(data)
        step = self._batch_step(s, language)
        if step is not None:  # "each sample takes 0.45 GiB: batch 16 → 24?"
            out.append(step)
        copy = self._kept_copy(s, language)
        if copy is not None:  # "I keep an f32 copy of the params as self.eval_params": that copy first
            out.insert(0, copy)
        outside = self._pool_outside(s, language, text)
        if outside is not None:
            out.append(outside)
        analysis = self._analysis(s, language, text)
        if analysis is not None:
            out.insert(0, analysis)
        # a failed allocation measured in this turn (bytes in use + the request) over the share set:
        # that process's share, before the conversation's earlier split of the card
        shares = self._pool_share_short(turn, text, s, language) if _in_use_and_request(turn or "") else None
        if shares is None:  # a GB10 or Jetson: the pool is the system's RAM
            shares = self._unified_machine(turn or text, s, language, conversation=text)
        if shares is None and _UNIFIED_SAID.search((text or "").lower()):
            # (CUDA's unified memory: a host budget is the host RAM the pool may take, not a cap on the card)
            shares = self._unified_for_host(turn or text, text, s, language)
        # a MIG instance is one process's alone: no split of it between processes
        mig = s.device == "MIG"
        if shares is None and not mig:
            shares = self._pool_split(text, s, language)
        if shares is None and not mig:
            shares = self._pool_per_process(text, s, language)
        if shares is None:
            shares = self._pool_shares(text, s, language, turn)
        if shares is None and not mig:  # "2 servers on this card, what fraction each?": one even share
            shares = self._pool_even_split(turn or text, s, language, conversation=text)
        if shares is None:
            shares = self._pool_share_short(turn or text, text, s, language)
        if shares is None:
            shares = self._pool_cap(turn or text, s, language)
        if shares is None:
            shares = self._pool_for_jax(turn or text, s, language)
        if shares is None:
            shares = self._pool_beside(turn or text, s, language)
        if shares is None:
            shares = self._pool_leave(turn or text, s, language)
        if shares is None:  # "at most 32 GiB of host RAM with unified memory", "96 GB past its memory": which value?
            shares = self._unified_for_host(turn or text, text, s, language)
        if shares is None:  # "the docs say ~60GB; my L40 has 48": no pool setting can fit it
            shares = self._need_beyond_card(turn or text, s, language)
        if shares is None:
            shares = self._pool_beyond_card(turn or text, s, language)
        if shares is None:
            shares = self._pool_for_need(turn or text, s, language)
        if shares is None:
            shares = self._pool_unified(text, s, language)
        ceiling = self._pool_ceiling(text, s, language, turn)
        if shares is None and (ceiling is None or (ceiling.subject == "gpu_pool_seen" and (
                "mib_asked" in s.cues or _fractions_named(text, self._cues.get("mem_fraction", []))))):
            # (the pool seen, and its exact size or another share's asked: "how many MiB, and with .3?")
            shares = self._pool_default_asked(s, language, text)
        if ceiling is not None and ceiling.subject == "pool_other_share":  # "is it leaking?": answered first
            out.insert(0, ceiling)
            ceiling = None
        out += [line for line in (ceiling, shares, self._buckets(s, language)) if line is not None]
        if shares is not None and shares.subject == "need_beyond_card":  # said first; the share's room is beside it
            out = [shares, *(a for a in out if a.subject != "pool_outside" and a is not shares)]
        # slices compared ("so a v4-8 has half the HBM of a v3-8?") are a question about their memory
        if batch is None and (("memory_named" in s.cues and asked and not s.values.get("params"))
                              or "pooled_sum" in s.cues  # "8 cores of 8 GB, so 64 GB?": per device, not a pool
                              or (len(self._slices_in(text)) > 1  # two slices named: compared, each per device
                                  and not ("vmem_named" in s.cues and "memory_named" not in s.cues))):
            out += self._slices(text, language, used=s.log_used if s.from_log else None,
                                log_device=(s.device, s.device_memory) if s.from_log else None)
        return out

    def _size_not_vmem(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """VMEM named beside a shortfall larger than any core's VMEM ("about 1GB too much, the log
        said something about VMEM?"): that much is HBM, which no VMEM setting reaches."""
        if "vmem_named" not in s.cues or "kernel_named" in s.cues or {"block_m", "block_k", "block_n"} & set(s.values):
            return None  # (a kernel of their own named: its blocks are in VMEM, whatever their size)
        sizes = sizes_in(text or "")
        # two generations named ("OOM on a v3-8; on v4 it runs"): neither is the device said to fail
        named = set(self.figures.generations_in(text or ""))
        hw = self.figures.gens.get(s.device.removeprefix("TPU ")) if s.device and len(named) <= 1 else None
        physical = hw.vmem_bytes if hw is not None and hw.vmem_bytes else max(
            (g.vmem_bytes or 0 for name, g in self.figures.gens.items() if name in named or not named), default=0)
        if not sizes or not physical or min(sizes) <= physical:
            return None
        parts = [self._msg("size_not_vmem", language, size=format_bytes(min(sizes)), physical=format_bytes(physical),
                           where=s.device if hw is not None else "TPU")]
        if hw is not None and s.device_memory:
            parts.append(self._msg("size_not_vmem_hbm", language, device=s.device, memory=format_bytes(s.device_memory)))
        return FigureAnswer(kind=KIND, subject="size_not_vmem", text=self._join(parts, language),
                            value_bytes=int(min(sizes)), sources=["computed"], cite=NOT_VMEM_CITE)

    def _limit_over_physical(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """A VMEM limit the text wants set above the physical VMEM of the one generation it runs on
        ("raise vmem_limit_bytes to 64MB on v4"): it cannot be set there; smaller blocks fit."""
        limit = limit_asked(text or "")
        if not limit or "vmem_named" not in s.cues or not s.device:
            return None
        hw = self.figures.gens.get(s.device.removeprefix("TPU "))
        # "raise vmem_limit_bytes above 64 MiB?" or "to 131072 KiB" on a core of that much: all of it, nothing
        # left to the compiler
        above = hw is not None and limit == hw.vmem_bytes
        if hw is None or not hw.vmem_bytes or (limit <= hw.vmem_bytes and not above):
            return None
        text_ = self._msg("limit_at_physical" if above else "limit_over_physical", language,
                          limit=format_bytes(limit), device=s.device,
                          physical=format_bytes(hw.vmem_bytes),
                          scoped=format_bytes(hw.scoped_vmem_default_bytes or hw.vmem_bytes))
        return FigureAnswer(kind=KIND, subject="limit_over_physical", text=text_, value_bytes=int(hw.vmem_bytes),
                            sources=["computed"], cite=LIMIT_CITE)

    def _kib_flag(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """`--xla_tpu_scoped_vmem_limit_kib` values the turn writes (its own, and others proposed as bare
        numbers): each in MiB against the VMEM of the core the conversation names."""
        low = (text or "").lower()
        if "scoped_vmem_limit_kib" not in low or not (s.device and s.device.startswith("TPU")):
            return None
        hw = self.figures.gens.get(s.device.removeprefix("TPU "))
        if hw is None or not hw.vmem_bytes:
            return None
        values = list(dict.fromkeys(int(n) for n in _KIB_VALUE.findall(low) if 1024 <= int(n) <= 1 << 22))
        if not values:
            return None
        physical = hw.vmem_bytes
        rows = _LIST_SEPARATOR.get(language, "; ").join(self._msg("kib_row_full", language, kib=v, mib=format_bytes(v * 1024)) if v * 1024 >= physical
                         else self._msg("kib_row_fits", language, kib=v, mib=format_bytes(v * 1024),
                                        left=format_bytes(physical - v * 1024)) for v in values)
        text_ = self._msg("kib_flag", language, rows=rows, device=s.device, physical=format_bytes(physical),
                          scoped=format_bytes(hw.scoped_vmem_default_bytes or physical))
        return FigureAnswer(kind=KIND, subject="kib_flag", text=text_, value_bytes=int(values[0] * 1024),
                            sources=["computed"], cite=LIMIT_CITE)

    def _vmem_capacity_fractions(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """A kernel's limit written as a fraction of the core's VMEM ("vmem_capacity_bytes * 0.9",
        changed to 0.85) on the generation named: each value, and what each leaves of the VMEM."""
        low = (text or "").lower()
        if "vmem_capacity" not in low or not (s.device and s.device.startswith("TPU")):
            return None
        hw = self.figures.gens.get(s.device.removeprefix("TPU "))
        named = _fractions_named(low, [re.compile(r"vmem_capacity\w*")])
        if hw is None or not hw.vmem_bytes or not named:
            return None
        physical = hw.vmem_bytes
        rows = "; ".join(self._msg("vmem_fraction_row", language, fraction=f"{f:g}", limit=format_bytes(physical * f),
                                   left=format_bytes(physical * (1 - f))) for f in named)
        text_ = self._msg("vmem_capacity_fractions", language, device=s.device, physical=format_bytes(physical),
                          rows=rows)
        return FigureAnswer(kind=KIND, subject="vmem_capacity_fractions", text=text_,
                            value_bytes=int(physical * min(named)), sources=["computed"], cite=LIMIT_CITE)

    def _mcmc_samples(self, s: Stated, language: str) -> FigureAnswer | None:
        """The samples an MCMC run keeps on the device until it ends: samples × latent values ×
        bytes, per chain and for all chains; against the device named, thinning or pieces that fit."""
        v = s.values
        samples, latent = v.get("mcmc_samples"), v.get("latent_values")
        if "mcmc" not in s.cues or not (samples and latent):
            return None
        chains = int(v.get("mcmc_chains") or 1)
        dtype_bytes, dtype_name = (s.dtype.bytes, s.dtype.name) if s.dtype else (4, "float32")
        per_chain = samples * latent * dtype_bytes
        size = per_chain * chains
        counts = dict(samples=_grouped(samples, language), latent=_grouped(latent, language),
                      bytes=_num(dtype_bytes), dtype=dtype_name, size=format_bytes(size))
        parts = [self._msg("mcmc_samples", language, per_chain=format_bytes(per_chain), chains=_num(chains), **counts)
                 if chains > 1 else self._msg("mcmc_samples_one", language, **counts)]
        snippet, subject = None, "mcmc_samples"
        if s.device_memory:
            parts.append(self._share(s, size, language))
        if size < MCMC_SMALL_BYTES or (s.device_memory and size < MCMC_SMALL_SHARE * s.device_memory):
            # not what fills the device: said, and the question's own answer (the pool, the real use) leads
            parts.append(self._msg("mcmc_samples_small", language))
            subject = "mcmc_samples_small"
        else:  # big, or no device named to say otherwise: the ways to keep fewer on the device
            budget = MCMC_BUDGET_SHARE * (s.device_memory or size)
            pieces = max(2, math.ceil(size / budget))
            parts.append(self._msg("mcmc_samples_fix", language, thinning=pieces, pieces=pieces))
            if self.data.mcmc_snippet:
                snippet = self.data.mcmc_snippet.format(pieces=pieces, per_piece=math.ceil(samples / pieces),
                                                        samples=int(samples), chains=chains)
        return FigureAnswer(kind=KIND, subject=subject, text=self._join(parts, language),
                            value_bytes=int(size), sources=["computed"], cite=DATASET_CITE, snippet=snippet)

    def _host_checkpoint(self, s: Stated, language: str) -> FigureAnswer | None:
        """A checkpoint save on a multi-host slice: the chips per host × the state per chip is what
        each save copies into host RAM; times the multiple the text gives, against the host's RAM."""
        v = s.values
        chips, state = v.get("chips_per_host"), v.get("state_per_chip")
        if "checkpoint_save" not in s.cues or not (chips and state) or chips > 64:
            return None
        per_host = chips * state
        parts = [self._msg("host_checkpoint", language, chips=_num(chips), state=format_bytes(state),
                           per_host=format_bytes(per_host))]
        need, multiple = per_host, v.get("save_multiple")
        if multiple and 1 < multiple <= 10:
            need = multiple * per_host
            parts.append(self._msg("host_checkpoint_multiple", language, multiple=_num(multiple),
                                   need=format_bytes(need)))
        ram = v.get("host_ram")
        if ram and ram > state:  # the state per chip read twice is no host
            if need > ram:
                parts.append(self._msg("host_checkpoint_short", language, ram=format_bytes(ram),
                                       short=format_bytes(need - ram), share=f"{100 * per_host / ram:.0f}%"))
            else:
                parts.append(self._msg("host_checkpoint_left", language, ram=format_bytes(ram),
                                       left=format_bytes(ram - need)))
        return FigureAnswer(kind=KIND, subject="host_checkpoint", text=self._join(parts, language),
                            value_bytes=int(need), sources=["computed"], cite=POOL_CITE)

    def _kept_copy(self, s: Stated, language: str) -> FigureAnswer | None:
        """A copy of the parameters the text keeps (an attribute) on the device it names: its bytes
        beside everything else the step holds."""
        params = s.values.get("params")
        if "kept_copy" not in s.cues or not params or not s.device_memory:
            return None
        dtype_bytes, dtype_name = (s.dtype.bytes, s.dtype.name) if s.dtype else (4, "float32")
        size = params * dtype_bytes
        return FigureAnswer(kind=KIND, subject="kept_copy", text=self._msg(
            "kept_copy", language, params=_count(params), bytes=_num(dtype_bytes), dtype=dtype_name,
            size=format_bytes(size), share=f"{100 * size / s.device_memory:.0f}%"), value_bytes=int(size),
            sources=["computed"], cite=KEPT_CITE)

    def _pool_outside(self, s: Stated, language: str, text: str = "") -> FigureAnswer | None:
        """A high XLA_PYTHON_CLIENT_MEM_FRACTION the text sets on the GPU it names: what it leaves
        outside JAX's pool for CUDA's own allocations (cuBLAS and cuDNN handles, NCCL). Several
        fractions compared ("0.87 works, 0.9 dies"): each one's pool and what it leaves outside."""
        if not (s.gpu and s.card_memory):
            return None
        card = s.card_memory
        named = _fractions_named(text, self._cues.get("mem_fraction", []))
        if len(named) == 1 and "default_asked" in s.cues and abs(named[0] - GPU_POOL_SHARE) > 0.005:
            named = [GPU_POOL_SHARE, *named]  # "with 0.88 vs the default": both pools
        if len(named) >= 2 and (_process_count(text or "") or 0) < 2:  # (not one share per process: ".57 and .26")
            rows = [self._msg("pool_fraction_row", language, fraction=_fraction(f).rstrip("0"), pool=format_bytes(int(card * f)),
                              left=format_bytes(int(card * (1 - f)))) for f in named]
            # a margin of 1 GiB outside the pool, in steps of .05 (never above .95)
            safe = min(0.95, math.floor((card - (1 << 30)) / card * 20) / 20)
            text_ = self._msg("pool_fractions", language, card=format_bytes(card), rows="; ".join(rows),
                              safe=_fraction(safe).rstrip("0"), pool=format_bytes(int(card * safe)),
                              left=format_bytes(int(card * (1 - safe))))
            return FigureAnswer(kind=KIND, subject="pool_fractions", text=text_, value_bytes=int(card * (1 - safe)),
                                sources=["computed"], cite=POOL_CITE)
        if not (s.pool_share and s.pool_share >= HIGH_POOL_SHARE):
            return None
        text = self._msg("pool_outside", language, fraction=f"{s.pool_share:.2f}".rstrip("0").lstrip("0"),
                         card=format_bytes(card), pool=format_bytes(int(card * s.pool_share)),
                         left=format_bytes(int(card * (1 - s.pool_share))), left_90=format_bytes(int(card * 0.1)))
        return FigureAnswer(kind=KIND, subject="pool_outside", text=text, value_bytes=int(card * (1 - s.pool_share)),
                            sources=["computed"], cite=POOL_CITE)

    def _batch_line(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """The largest batch that fits, from the temporaries the question measured at two batch
        sizes ("batch=8: argument 4.50 GiB, temp 6.00 GiB; batch=16: temp 11.50 GiB"): a line
        through the two, the arguments beside it, against the device named."""
        if not s.device_memory:
            return None
        low = (text or "").lower()
        pairs: dict[int, float] = {}
        for m in _BATCH_TEMP.finditer(low):
            pairs.setdefault(int(m.group(1)), float(m.group(2)))
        peaks = not pairs
        if peaks:  # the peaks measured at two batch sizes: the arguments are inside them
            for m in _BATCH_PEAK.finditer(low):
                pairs.setdefault(int(m.group(1)), float(m.group(2)))
        line = _line_through(pairs)
        if line is None:
            return None
        b1, t1, b2, t2, slope, fixed = line
        args, _ = self._policy_sizes(text)
        memory = s.device_memory / (1 << 30)
        best = math.floor((memory - (args or 0) - fixed) / slope)
        if best < 1:
            return None
        peak = (args or 0) + fixed + slope * best
        if peaks:
            # a share proposed rather than set ("if I set MEM_FRACTION=0.95, which batch?"): the batch against it too
            proposed = _fractions_named(text, self._cues.get("mem_fraction", [])) if s.pool_share is None else []
            if proposed and s.gpu and s.card_memory:
                s = replace(s, pool_share=proposed[-1])
            return self._batch_line_peaks(s, language, b1, t1, b2, t2, slope, fixed)
        text_ = self._msg("batch_line", language, slope=f"{_num(round(slope, 4))} GiB", b1=_num(b1), t1=f"{_num(t1)} GiB",
                          b2=_num(b2), t2=f"{_num(t2)} GiB", fixed=f"{_num(round(fixed, 3))} GiB",
                          args=f"{_num(args or 0)} GiB", device=s.device or "", memory=f"{_num(round(memory, 2))} GiB",
                          best=_num(best), peak=f"{_num(round(peak, 2))} GiB")
        return FigureAnswer(kind=KIND, subject="batch_line", text=text_, value_bytes=int(peak * (1 << 30)),
                            sources=["computed"], cite=ANALYSIS_CITE)

    def _count_line(self, text: str, turn: str, s: Stated, language: str) -> FigureAnswer | None:
        """A peak measured at two values of a count other than the batch ("n_steps=25: peak 19.6 GiB,
        50: 38.4 GiB"): the line through them, at each value the newest turn names, and the most that
        fits the device."""
        if not s.device_memory:
            return None
        low = _plain_digits(text or "").lower()
        named = _COUNT_NAMED.search(low)
        if not named:
            return None
        pairs: dict[int, float] = {}
        for m in _COUNT_PEAK.finditer(low, named.start()):
            pairs.setdefault(int(m.group(1)), float(m.group(2)))
        line = _line_through(pairs)
        if line is None:
            return None
        b1, t1, b2, t2, slope, fixed = line
        memory, name = s.device_memory / (1 << 30), named.group(1)
        best = math.floor((memory - fixed) / slope)
        said = [int(m.group(1) or m.group(2)) for m in _COUNT_ASKED.finditer(_plain_digits(turn or "").lower())]
        asked = [v for v in said if v not in pairs] if turn != text else []
        rows = []
        for value in dict.fromkeys(asked):
            peak = fixed + slope * value
            verdict = self._fit_verdict(peak * (1 << 30), memory * (1 << 30), language)
            rows.append(self._msg("count_line_row", language, value=_num(value),
                                  peak=format_bytes(peak * (1 << 30)), verdict=verdict))
        gib = lambda x: format_bytes(x * (1 << 30))  # noqa: E731
        text_ = self._msg("count_line", language, name=name, b1=_num(b1), t1=gib(t1), b2=_num(b2), t2=gib(t2),
                          slope=gib(slope), fixed=gib(fixed), rows=_LIST_SEPARATOR.get(language, "; ").join(rows),
                          memory=s.memory_label or gib(memory), device=s.device or "", best=_num(max(best, 0)))
        text_ = text_.replace(" . ", " ").replace(". .", ".").replace("。。", "。")
        return FigureAnswer(kind=KIND, subject="count_line", text=text_, value_bytes=int(t2 * (1 << 30)),
                            sources=["computed"], cite=ANALYSIS_CITE)

    def _noun_line(self, text: str, language: str) -> FigureAnswer | None:
        """Memory measured at two counts of one thing the text names ("with 1000 synapses the first run
        takes 7.8 GB, with 2000 already 16 GB, and with 3000 it hangs"): the line through them, per unit
        of that thing, and at each larger count said the same way."""
        plain = _plain_digits(text or "").replace(",", ".")
        low = plain.lower()
        pairs: dict[int, float] = {}
        lead, noun = None, None
        for m in _NOUN_PEAK.finditer(low):
            n, gb = int(m.group(2)), float(m.group(4))
            if noun is None and m.group(3):  # (the thing as written: "Synapsen")
                lead, noun = m.group(1), plain[m.start(3):m.end(3)] if len(plain) == len(low) else m.group(3)
            if lead is not None and m.group(1) == lead:  # said the same way ("mit 1000 ..., mit 2000 ...")
                pairs.setdefault(n, gb)
        line = _line_through(pairs)
        if noun is None or line is None or len(pairs) < 2:
            return None
        b1, t1, b2, t2, slope, fixed = line
        if fixed < -0.1 * t1:  # (not a line through its origin or above it: two unrelated figures)
            return None
        asked = [int(m.group(1)) for m in re.finditer(rf"(?<![a-z]){re.escape(lead)}\s+(\d{{2,7}})(?![\d.])", low)]
        asked = [v for v in dict.fromkeys(asked) if v not in pairs]
        gib = lambda x: format_bytes(x * (1 << 30))  # noqa: E731
        rows = [self._msg("count_line_open_row", language, value=_num(v), peak=gib(fixed + slope * v)) for v in asked]
        key = "count_line_open" if fixed >= 0.02 * t1 else "count_line_open_through_zero"
        text_ = self._msg(key, language, name=noun, b1=_num(b1), t1=gib(t1), b2=_num(b2), t2=gib(t2),
                          slope=gib(slope), fixed=gib(max(fixed, 0)),
                          rows=_LIST_SEPARATOR.get(language, "; ").join(rows) or _NO_ROWS)
        if not rows:  # no other count said: the sentence ends before its rows
            at = text_.index(_NO_ROWS)
            cut = max(text_.rfind(c, 0, at) for c in (";", "；", "؛", "。"))
            text_ = text_[:cut] + {"zh": "。", "ja": "。", "hi": "।"}.get(language, ".")
        return FigureAnswer(kind=KIND, subject="count_line", text=text_,
                            value_bytes=int(t2 * (1 << 30)), sources=["computed"], cite=ANALYSIS_CITE)

    def _jacobian(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """The dense Jacobian of the state the text writes out, where it names a Jacobian (a Newton solve,
        `jacfwd`, implicit differentiation): N x N entries for a state of N elements, against one vector of
        N that a matrix-free solver keeps a few of."""
        if "jacobian" not in s.cues:
            return None
        shapes = [m for m in _SHAPE.finditer(text or "") if math.prod(_dims_of(m)) >= 1 << 10]
        if not shapes:
            return None
        dims = _dims_of(shapes[-1])
        n = math.prod(dims)
        dtype_bytes, dtype_name = (s.dtype.bytes, s.dtype.name) if s.dtype else (4, "float32")
        vector, dense = n * dtype_bytes, n * n * dtype_bytes
        parts = [self._msg("jacobian_dense", language, shape="[" + ", ".join(map(str, dims)) + "]",
                           n=_grouped(n, language), dtype=dtype_name, vector=format_bytes(vector),
                           dense=format_bytes(dense))]
        if s.device_memory:
            parts.append(self._share(s, dense, language))
        return FigureAnswer(kind=KIND, subject="jacobian", text=self._join(parts, language), value_bytes=int(dense),
                            sources=["computed"], cite=ANALYSIS_CITE)

    def _jacobian_modes(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """A Jacobian of a function whose input and output sizes the text says ("a has 10 million elements
        ... sum to a scalar", "returns a length-1000 vector, input is still 1e7"): the full Jacobian, what
        forward mode's basis of tangents and reverse mode's cotangents take, and the gradient."""
        if "jacobian" not in s.cues:
            return None
        low = _plain_digits(text or "").lower()
        inputs = [_count_said(m) for m in _INPUT_COUNT.finditer(low)]
        if not inputs:
            return None
        n = max(inputs)  # (not a small factor said beside it: "matmul with a 10x10 b")
        outputs = [int(next(g for g in m.groups() if g)) for m in _OUTPUT_COUNT.finditer(low)]
        m = outputs[-1] if outputs else (1 if _SCALAR_OUT.search(low) else None)
        if m is None or n < 2 or not 0 < m < n:
            return None
        size = s.dtype.bytes if s.dtype else 4
        dtype = s.dtype.name if s.dtype else "float32"
        text_ = self._msg("jacobian_modes", language, n=_grouped(n, language), m=_grouped(m, language), dtype=dtype,
                          full=format_bytes(m * n * size), basis=format_bytes(n * n * size),
                          grad=format_bytes(n * size))
        if s.device_memory and m > 1:
            text_ = self._join([text_, self._share(s, m * n * size, language)], language)
        return FigureAnswer(kind=KIND, subject="jacobian_modes", text=text_, value_bytes=int(m * n * size),
                            sources=["computed"], cite=ANALYSIS_CITE)

    def _batch_line_peaks(self, s: Stated, language: str, b1: int, t1: float, b2: int, t2: float,
                          slope: float, fixed: float) -> FigureAnswer | None:
        """The largest batch from two measured peaks; on a GPU with a share the text sets, against
        JAX's default pool first and then against that share."""
        gib = 1 << 30

        def best_at(memory: float) -> tuple[int, float]:
            best = math.floor((memory - fixed) / slope)
            return best, fixed + slope * best

        default = s.card_memory * GPU_POOL_SHARE / gib if (s.gpu and s.card_memory and s.pool_share) else None
        memory = default if default is not None else s.device_memory / gib
        device = (f"{s.device or 'GPU'}, 75% × {format_bytes(s.card_memory)}" if default is not None
                  else s.device or "")
        best, peak = best_at(memory)
        if best < 1:
            return None
        parts = [self._msg("batch_line_peak", language, slope=f"{_num(round(slope, 4))} GiB", b1=_num(b1),
                           t1=f"{_num(t1)} GiB", b2=_num(b2), t2=f"{_num(t2)} GiB", fixed=f"{_num(round(fixed, 3))} GiB",
                           device=device, memory=f"{_num(round(memory, 2))} GiB", best=_num(best),
                           peak=f"{_num(round(peak, 2))} GiB")]
        if default is not None:  # "and with MEM_FRACTION .95?"
            share_memory = s.pool_share * s.card_memory / gib
            best2, peak2 = best_at(share_memory)
            parts.append(self._msg("batch_line_share", language, fraction=_fraction(s.pool_share),
                                   memory=format_bytes(int(share_memory * gib)), best=_num(best2),
                                   peak=f"{_num(round(peak2, 2))} GiB"))
        return FigureAnswer(kind=KIND, subject="batch_line", text=self._join(parts, language),
                            value_bytes=int(peak * gib), sources=["computed"], cite=ANALYSIS_CITE)

    def _pool_cap(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """One most JAX may take of the GPU named ("JAX should use at most 30 GB of the 48 GB A6000,
        the rest is vLLM's"): the fraction of the whole card that stays under it, rounded down."""
        if not (s.gpu and s.card_memory and ({"mem_fraction", "env_var"} & s.cues and "cap" in s.cues
                                             or "limit_jax" in s.cues)):
            return None
        low = (text or "").lower()
        hits = [m for pattern in self._cues["cap"] for m in pattern.finditer(low)]
        if "limit_jax" not in s.cues and hits and all(
                _PROGRAM_FIGURE.search(low, max(0, m.start() - PROGRAM_FIGURE_REACH), m.start()) for m in hits):
            return None  # the cap words only stand after a need ("braucht doch nur 8 GB"), not a limit
        card = s.card_memory / (1 << 30)
        needs = self._needs(text, card)
        if len(needs) != 1:  # several figures: the one the cap words stand before ("not more than ~8GB")
            needs = [n for n in self._capped(text) if n in needs][:1]
        if len(needs) != 1:
            return None
        cap = needs[0]
        fraction = math.floor(cap / card * 100) / 100
        default = (self._msg("pool_default", language, card=f"{_num(round(card, 2))} GB",
                             pool=format_bytes(GPU_POOL_SHARE * s.card_memory))
                   if "default_asked" in s.cues else "")
        text_ = self._msg("pool_cap", language, cap=f"{_num(cap)} GB", card=f"{_num(round(card, 2))} GB",
                          exact=f"{cap / card:.3f}".rstrip("0").lstrip("0"), fraction=_fraction(fraction),
                          pool=f"{_num(round(fraction * card, 2))} GB", left=f"{_num(round(card - fraction * card, 2))} GB")
        text_ = self._join([default, text_], language) if default else text_
        return FigureAnswer(kind=KIND, subject="pool_shares", text=text_, value_bytes=int(fraction * s.card_memory),
                            sources=["computed"], cite=POOL_CITE)

    def _pool_default_asked(self, s: Stated, language: str, text: str = "") -> FigureAnswer | None:
        """How much JAX takes by default of the GPU named, when that is asked ("wie viel will JAX per
        Default reservieren?"): 75% of the card; beside another framework, what stays outside it."""
        if not (s.gpu and s.card_memory and ({"default_asked", "jax_may_use"} & s.cues) and "memory_named" in s.cues):
            return None
        card, pool = s.card_memory, GPU_POOL_SHARE * s.card_memory
        # "how many MiB exactly?", or a MIG instance quoted in MiB as nvidia-smi lists it
        size = _in_mib if "mib_asked" in s.cues or s.device == "MIG" else format_bytes
        parts = [self._msg("pool_default", language, card=size(card), pool=size(pool))]
        if "ceiling_asked" in s.cues:  # "is it a real cap?"
            parts.append(self._msg("pool_default_ceiling", language, ceiling=format_bytes(0.95 * card)))
        each = pool  # the pool of each card: the last share named, else the default
        for f in _fractions_named(text, self._cues.get("mem_fraction", [])):  # "and with .3?": that pool too
            each = f * card
            if abs(f - GPU_POOL_SHARE) > 0.005:
                parts.append(self._msg("pool_default_other", language, fraction=_fraction(f).rstrip("0"),
                                       pool=size(f * card)))
        if s.devices and s.devices > 1 and s.device != "MIG":  # "4x16 GB, so why not 64 GB?": one pool per card
            parts.append(self._msg("pool_default_each", language, count=s.devices, pool=size(each),
                                   total=size(s.devices * each)))
        if "other_program" in s.cues:
            parts.append(self._msg("pool_default_rest", language, rest=format_bytes(card - pool), pool=format_bytes(pool)))
        elif "second_process" in s.cues:  # "and how much is left for a second notebook?"
            parts.append(self._msg("pool_default_second", language, rest=size(card - pool)))
        return FigureAnswer(kind=KIND, subject="pool_default", text=self._join(parts, language), value_bytes=int(pool),
                            sources=["computed"], cite=POOL_CITE)

    def _pool_beside(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """Another program's fixed need on the GPU named, JAX to get the rest ("vLLM needs 30 GiB,
        JAX gets everything else, 1 GiB for the contexts"): the share of the whole card left to JAX."""
        if not (s.gpu and s.card_memory and "other_program" in s.cues):
            return None
        card = s.card_memory / (1 << 30)
        needs = self._needs(text, card)
        own = self._jax_need(text, needs)
        if not ("mem_fraction" in s.cues or (own is not None and {"env_var", "code_asked", "fits"} & s.cues)):
            return None  # (JAX's own peak said beside the other's, with code or a fit asked: the same question)
        # the rest named ("JAX gets everything else"), or the other program's one need said beside
        # the fraction asked ("a 35GB torch model in the same process: what MEM_FRACTION?")
        if own is not None and len(needs) == 2:  # "my jax side peaks around 30 GiB, the torch side needs ~25"
            other, buffer = next(n for n in needs if n != own) if needs[0] != needs[1] else needs[0], 1.0
        elif not (1 <= len(needs) <= 2 and ("rest" in s.cues or len(needs) == 1)):
            return None
        else:
            other, buffer = max(needs), (min(needs) if len(needs) == 2 else 1.0)
        exact = (card - other - buffer) / card
        if exact <= 0.05:
            return None
        fraction = math.floor(exact * 100) / 100
        text_ = self._msg("pool_beside", language, card=f"{_num(round(card, 2))} GiB", other=f"{_num(other)} GiB",
                          buffer=f"{_num(buffer)} GiB", exact=f"{exact:.4f}".lstrip("0"), fraction=_fraction(fraction),
                          pool=format_bytes(fraction * s.card_memory))
        snippet = None
        if own is not None:  # JAX's own peak said: whether the pool holds it, and the lines to set it
            key = "pool_beside_holds" if own <= fraction * card else "pool_beside_short"
            text_ = self._join([text_, self._msg(key, language, need=f"{_num(own)} GiB",
                                                 pool=format_bytes(fraction * s.card_memory))], language)
            snippet = (f'import os\nos.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = "{_fraction(fraction)}"'
                       "  # first lines of the script, before anything imports jax\n"
                       "import jax\nimport torch  # the other framework after it, in the same process\n\n"
                       'print(jax.local_devices()[0].memory_stats()["bytes_limit"] / 2**30, "GiB in JAX\'s pool")')
        return FigureAnswer(kind=KIND, subject="pool_shares", text=text_, value_bytes=int(fraction * s.card_memory),
                            sources=["computed"], cite=POOL_CITE, snippet=snippet)

    def _jax_need(self, text: str, needs: list[float]) -> float | None:
        """Of two needs `text` states, the one said of JAX itself when the other is said of the other
        program ("my jax side peaks around 30 GiB and the torch side needs ~25 GiB")."""
        low = _plain_digits(text or "").lower()
        own, other = None, None
        for m in _GB.finditer(low):
            before = low[max(0, m.start() - 30): m.start()]
            named = [(before.rfind("jax"), "jax")] if "jax" in before else []
            named += [(x.start(), "other") for p in self._cues.get("other_program", []) for x in p.finditer(before)]
            if not named or float(m.group(1)) not in needs:
                continue
            if max(named)[1] == "jax":  # the name said last before the figure is whose it is
                own = float(m.group(1))
            else:
                other = float(m.group(1))
        return own if own is not None and other is not None else None

    def _unified_for_host(self, turn: str, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """In a conversation about CUDA unified memory, the fraction that keeps JAX to the host RAM the
        newest turn gives it ("at most 32 GiB of host RAM: which value?"): (card + that) / card."""
        low, turn_low = (text or "").lower(), _plain_digits(turn or "").lower()
        if not (s.gpu and s.card_memory and _UNIFIED_SAID.search(low)
                and (_FRACTION_ASKED.search(turn_low) or _VALUE_ASKED.search(turn_low))):
            return None
        # the host RAM it may take, or how far past the card it may go ("~96 GB past its memory")
        def size(m: re.Match[str]) -> float:
            return float(m.group(1)) * _UNIT_BYTES[m.group(2)[0] if m.group(2)[0] in "gm" else
                                                   {"г": "g", "м": "m"}[m.group(2)[0]]]
        # (past the card first: "96 GB past its memory ... the node has 256 GB RAM" is 96 GB each)
        past = [size(m) for m in _SIZE.finditer(turn_low) if _PAST_CARD.match(turn_low, m.end())]
        budgets = past[:1] or [size(m) for m in _SIZE.finditer(turn_low)
                               if _HOST_NEAR.search(turn_low[m.end(): m.end() + 14])]
        # a limit with the process's own share set aside ("unter 12 GB bleiben und ~3 GB für den
        # Python-Prozess selbst"): what is left of the limit is what the pool may take of the host
        reserved = [m for m in _SIZE.finditer(turn_low) if _FOR_PROCESS.match(turn_low, m.end())]
        limits = [m for m in _SIZE.finditer(turn_low)
                  if m.start() not in {r.start() for r in reserved} and not _PAST_CARD.match(turn_low, m.end())]
        if not past and len(reserved) == 1 and len(limits) == 1 and size(limits[0]) > size(reserved[0]):
            budgets = [size(limits[0]) - size(reserved[0])]
        if not budgets:
            return None
        card, host = s.card_memory, budgets[-1]
        fraction = math.floor((card + host) / card * 100) / 100
        text_ = self._msg("pool_unified_for_host", language, fraction=_num(fraction), card=format_bytes(card),
                          host=format_bytes(host), total=format_bytes(fraction * card))
        ram, gpus = s.values.get("host_ram"), s.devices
        if ram and gpus and gpus > 1 and ram > host:  # each GPU of the node taking that much: the RAM for all of them
            every = host * gpus
            if every <= 0.9 * ram:
                extra = self._msg("pool_unified_gpus_fit", language, gpus=gpus, host=format_bytes(host),
                                  every=format_bytes(every), ram=format_bytes(ram))
            else:
                each = 0.9 * ram / gpus
                most = math.floor((card + each) / card * 100) / 100
                extra = self._msg("pool_unified_gpus_short", language, gpus=gpus, host=format_bytes(host),
                                  every=format_bytes(every), ram=format_bytes(ram), each=format_bytes(each),
                                  most=_num(most))
            text_ = self._join([text_, extra], language)
        return FigureAnswer(kind=KIND, subject="pool_shares", text=text_, value_bytes=int(fraction * card),
                            sources=["computed"], cite=POOL_CITE)

    def _pool_unified(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """`XLA_PYTHON_CLIENT_MEM_FRACTION` above 1 (AlphaFold's 4.0 with `TF_FORCE_UNIFIED_MEMORY=1`):
        the pool that many cards' worth, the part beyond the card living in host RAM."""
        m = _FRACTION_SET.search((text or "").lower())
        if m is None and _UNIFIED_SAID.search((text or "").lower()):
            # a follow-up in a unified-memory conversation naming the value alone ("if I take 3.2?")
            last = (text or "").lower().rsplit("\n", 1)[-1]
            m = next((x for x in _BARE_FRACTION.finditer(last)
                      if not _VERSION_BEFORE.search(last, max(0, x.start() - 24), x.start())), None)
        if not (m and s.gpu and s.card_memory):
            return None
        fraction = float(m.group(1))
        card = s.card_memory
        if 16 < fraction <= 100:  # "100", meant as a percent
            text_ = self._msg("pool_percent", language, fraction=_num(fraction), exact=_fraction(fraction / 100),
                              card=format_bytes(card), pool_exact=format_bytes(fraction / 100 * card),
                              pool90=format_bytes(0.9 * card))
            return FigureAnswer(kind=KIND, subject="pool_shares", text=text_, value_bytes=int(0.9 * card),
                                sources=["computed"], cite=POOL_CITE)
        unified = bool(_UNIFIED_SAID.search((text or "").lower()))
        if unified and 0 < fraction <= 1:  # ".80 with unified memory": the pool stays on the card
            text_ = self._msg("pool_unified_under_one", language, fraction=_num(fraction), card=format_bytes(card),
                              pool=format_bytes(fraction * card), total=format_bytes(4 * card),
                              host=format_bytes(3 * card))
            if _PLATFORM_ALLOCATOR.search((text or "").lower()):
                text_ = self._join([text_, self._msg("pool_platform_allocator", language)], language)
            return FigureAnswer(kind=KIND, subject="pool_shares", text=text_, value_bytes=int(fraction * card),
                                sources=["computed"], cite=POOL_CITE)
        if not 1 < fraction <= 16:
            return None
        text_ = self._msg("pool_unified" if unified else "pool_over_one", language, fraction=_num(fraction),
                          card=format_bytes(card), total=format_bytes(fraction * card),
                          host=format_bytes((fraction - 1) * card))
        ram = s.values.get("host_ram")
        if unified and ram:  # the host RAM said ("node pe 64 GB RAM"): whether it holds the part beyond the card
            beyond = (fraction - 1) * card
            short = beyond > 0.9 * ram
            text_ = self._join([text_, self._host_room(beyond, ram, card, language, format_bytes)], language)
            if short:  # the most that RAM allows, a tenth of it left to the host
                most = math.floor((card + 0.9 * ram) / card * 10) / 10
                text_ = self._join([text_, self._msg("pool_unified_most", language, most=_num(most),
                                                     card=format_bytes(card), pool=format_bytes(most * card),
                                                     host=format_bytes((most - 1) * card))], language)
        if _PLATFORM_ALLOCATOR.search((text or "").lower()):
            # the platform allocator has no pool: neither the fraction nor unified memory applies
            text_ = self._join([text_, self._msg("pool_platform_allocator", language)], language)
        return FigureAnswer(kind=KIND, subject="pool_shares", text=text_, value_bytes=int(fraction * card),
                            sources=["computed"], cite=POOL_CITE)

    def _host_room(self, beyond: float, ram: float, card: float, language: str, format_bytes) -> str:
        """Whether `ram` of host RAM holds the `beyond` bytes of a unified pool past the card: with room
        (at most 60% of it), only just (up to 90%: with the fraction that leaves half the RAM free) or not."""
        if beyond > 0.9 * ram:
            return self._msg("pool_beyond_host_short", language, ram=format_bytes(ram), host=format_bytes(beyond))
        if beyond <= 0.6 * ram:
            return self._msg("pool_beyond_host_ok", language, ram=format_bytes(ram), host=format_bytes(beyond))
        lower = math.floor((card + 0.5 * ram) / card * 10) / 10
        return self._msg("pool_beyond_host_tight", language, ram=format_bytes(ram), host=format_bytes(beyond),
                         lower=_num(lower), pool=format_bytes(lower * card), lower_host=format_bytes((lower - 1) * card))

    def _pool_beyond_card(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """A size JAX should reach that is more than the card ("~500 GB tak use karna hai" on A100
        40GB): the fraction above 1 that gives it, with unified memory, and the host RAM it takes."""
        if not (s.gpu and s.card_memory and "mem_fraction" in s.cues):
            return None
        low = _plain_digits(text or "").lower()
        card = s.card_memory / (1 << 30)
        wanted = [float(m.group(1) or m.group(3)) * (1024 if (m.group(2) or m.group(4)) == "tb" else 1)
                  for m in _SIZE_TO_USE.finditer(low)]
        wanted = [w for w in wanted if card < w <= 16 * card]
        if not wanted:
            return None
        size = wanted[-1]
        fraction = math.ceil(size / card * 10) / 10
        host = s.values.get("host_ram")
        beyond = (fraction - 1) * s.card_memory
        parts = [self._msg("pool_beyond_card", language, size=f"{_num(size)} GB", card=format_bytes(s.card_memory),
                           fraction=_num(fraction), pool=format_bytes(fraction * s.card_memory),
                           host=format_bytes(beyond))]
        if host:  # the host RAM said: whether it holds the part beyond the card
            parts.append(self._host_room(beyond, host, s.card_memory, language, format_bytes))
        return FigureAnswer(kind=KIND, subject="pool_shares", text=self._join(parts, language),
                            value_bytes=int(fraction * s.card_memory), sources=["computed"], cite=POOL_CITE)

    def _batch_scaled(self, turn: str, earlier: str, language: str) -> FigureAnswer | None:
        """A need an earlier turn stated at one batch, and a new batch this turn proposes: the need
        scaled by the batch's ratio, as a bound (only what grows with the batch shrinks)."""
        before, now = self.read(earlier), self.read(f"{earlier}\n{turn}")
        old_batch, new_batch = before.values.get("batch"), self.read(turn).values.get("batch")
        memory = now.device_memory
        if not (old_batch and new_batch and memory and new_batch < old_batch):
            return None
        low = _plain_digits(earlier).lower()
        needs = [float(m.group(1)) for m in _GB.finditer(low)
                 if _NEED_NEAR.search(low[max(0, m.start() - 40): m.start()])
                 and float(m.group(1)) * (1 << 30) > memory]
        if not needs:
            return None
        need, ratio = needs[-1], new_batch / old_batch
        scaled = need * ratio * (1 << 30)
        values = dict(before=_num(old_batch), after=_num(new_batch), ratio=f"{ratio:.3g}", need=f"{_num(need)} GB",
                      scaled=format_bytes(scaled), memory=now.memory_label or format_bytes(memory))
        text_ = (self._msg("batch_scaled_fits", language, left=format_bytes(memory - scaled), **values)
                 if scaled <= memory else self._msg("batch_scaled_over", language, **values))
        return FigureAnswer(kind=KIND, subject="batch_scaled", text=text_, value_bytes=int(scaled),
                            sources=["computed"], cite=TRAINING_CITE)

    def _batch_series(self, turn: str, earlier: str, language: str) -> FigureAnswer | None:
        """Peaks measured at two or more batches ("b64 102.4 GiB, b96 125.8, b128 148.2") and a batch
        asked without one ("b160, does it fit on 164 GiB?"): the line through the last two points,
        its value at that batch, against the memory said. (`_batch_line` gives the largest batch
        from two peaks against a device it knows; this one answers the batch asked, and reads the
        memory from the text when the card is not in the catalogue.)"""
        low = _plain_digits(turn or "").lower()
        points = _series_points(low)
        if len(points) < 2 and earlier:  # "if it grows linearly, what at batch 28?": the points measured before
            points = _series_points(_plain_digits(earlier).lower())
        if len(points) < 2:
            return None
        asked = [int(m.group(1)) for m in _SERIES_ASKED.finditer(low) if int(m.group(1)) not in points]
        now = self.read(f"{earlier}\n{turn}")
        # a GPU's whole card: peaks measured above JAX's default pool mean the pool is not the limit,
        # unless the turn asks about that pool ("the largest batch in the default pool")
        card = now.card_memory if now.gpu and now.card_memory else None
        whole = card
        # JAX's default pool is the limit when the turn names it, or when no pool setting is said and every
        # peak measured is under it ("32 → >64 GB y OOM" on an 80 GB card: the 60 GiB pool)
        conversation = f"{earlier}\n{turn}".lower()
        set_now = [float(m.group(1)) for m in _FRACTION_SET.finditer(low) if 0 < float(m.group(1)) <= 1]
        if card and set_now:  # "and with XLA_PYTHON_CLIENT_MEM_FRACTION=0.9, does batch 32 fit?": that pool
            card = set_now[-1] * card
        elif card and (_POOL_NAMED.search(low) or (not _POOL_SETTING_SAID.search(conversation)
                                                   and max(points.values()) * (1 << 30) < GPU_POOL_SHARE * card)):
            card = GPU_POOL_SHARE * card
        memory = card or now.device_memory
        if not memory:  # the memory the asker states beside the peaks ("164 GiB usable", "fits in 164 GiB?")
            said = [float(m.group(1)) for m in _GB.finditer(_plain_digits(f"{earlier}\n{turn}").lower())
                    if float(m.group(1)) not in points.values() and float(m.group(1)) > max(points.values())]
            card = memory = said[-1] * (1 << 30) if said else None
        line = _line_through(points, last=True)
        if not asked or not memory or line is None:
            return None
        b1, g1, b2, g2, per, fixed = line
        target = asked[-1]
        predicted = (fixed + per * target) * (1 << 30)
        values = dict(b1=b1, g1=f"{_num(g1)} GiB", b2=b2, g2=f"{_num(g2)} GiB", per=format_bytes(per * (1 << 30)),
                      target=target, predicted=format_bytes(predicted),
                      memory=format_bytes(card) if card else now.memory_label or format_bytes(memory))
        fits = predicted <= memory
        text_ = self._msg("batch_series_fits" if fits else "batch_series_over", language,
                          left=format_bytes(memory - predicted), over=format_bytes(predicted - memory), **values)
        if not fits or _LARGEST_ASKED.search(low):  # (or asked: "and the largest batch that fits?")
            largest = math.floor((memory / (1 << 30) - fixed) / per) if memory / (1 << 30) > g2 else None
            if largest and largest > b2:
                text_ = self._join([text_, self._msg("batch_series_largest", language, largest=largest)], language)
        if whole and card and card < whole:  # the limit used is JAX's pool, not the card: said so
            extra = (self._msg("batch_series_fraction", language, pool=format_bytes(card), card=format_bytes(whole),
                               fraction=_num(set_now[-1]), rest=format_bytes(whole - card)) if set_now else
                     self._msg("batch_series_pool", language, pool=format_bytes(card), card=format_bytes(whole)))
            text_ = self._join([text_, extra], language)
        return FigureAnswer(kind=KIND, subject="batch_series", text=text_, value_bytes=int(predicted),
                            sources=["computed"], cite=TRAINING_CITE)

    def _changes(self, turn: str, earlier: str, language: str) -> FigureAnswer | None:
        """Measurements the conversation says moved ("on v5p-512 it went from 11.99 GB to 6.74 GB",
        "dropped by 5.129 GB on v5p-128 ... the baselines were 16.16 GB vs 19.81 GB") and a turn that
        asks for the percentages: each one's change in % of where it started, and where a drop is said
        beside its baseline, the new value. Each is computed in the unit the asker wrote."""
        low = _plain_digits(turn or "").lower()
        if not _PERCENT_ASKED.search(low):
            return None
        said = _plain_digits(f"{earlier}\n{turn}" if earlier else turn or "").lower()
        rows: list[tuple[str, float, float, str, int]] = []  # (label, before, after, unit, decimals)
        for sentence in re.split(r"(?<=[!?。！？\n;])|(?<=\.)\s", said):
            for m in _FROM_TO.finditer(sentence):
                g = m.groups()
                a, ua, b, ub = g[0:4] if g[0] is not None else g[4:8]
                unit = _unit_of(ub or ua)
                if not unit:
                    continue
                rows.append((self._change_label(sentence, m.start(), m.end()), _float(a), _float(b), unit,
                             _decimals(a, b)))
            drops = [(m, _float(m.group(1)), _unit_of(m.group(2))) for m in _DROP_AMOUNT.finditer(sentence)
                     if m.group(2)] if _DROP_VERB.search(sentence) else []
            if not drops:
                continue
            where = _BASELINE.search(sentence)
            bases = [] if where is None else [(_float(x.group(1)), x.group(2)) for x in re.finditer(_AMOUNT, sentence[where.end():])
                                              if x.group(2)]
            if len(bases) != len(drops):
                continue
            for (m, d, unit), (base, _) in zip(drops, bases):
                if 0 < d < base:
                    rows.append((self._change_label(sentence, m.start(), m.end()), base, base - d, unit,
                                 _decimals(m.group(1), str(base))))
        rows = [r for r in rows if r[1] > 0 and r[1] != r[2] and math.isfinite(r[1]) and math.isfinite(r[2])]
        if not rows:
            return None
        seen, lines = set(), []
        for label, before, after, unit, places in rows:
            if (label, before, after) in seen:
                continue
            seen.add((label, before, after))
            unit_ = _UNIT_WRITTEN.get(unit, unit.upper())
            percent = abs(before - after) / before * 100
            key = "change_row_down" if after < before else "change_row_up"
            lines.append(self._msg(key, language, label=f"{label}: " if label else "",
                                   before=f"{_places(before, places)} {unit_}", after=f"{_places(after, places)} {unit_}",
                                   delta=f"{_places(abs(before - after), places)} {unit_}", percent=f"{percent:.1f}"))
        text_ = self._msg("changes", language, rows=_LIST_SEPARATOR.get(language, "; ").join(lines))
        return FigureAnswer(kind=KIND, subject="changes", text=text_, sources=["computed"])

    def _counts(self, text: str) -> list[tuple[re.Match[str], float, str]]:
        """The counts of items a text states ("10000 secuencias", "2 millones de secuencias"): each
        match, its value and its noun as written."""
        if self._counted is None:
            return []
        out = []
        for m in self._counted.finditer(text):
            scale = self.data.count_scales.get((m.group(2) or "").lower(), 1.0)
            value = float(m.group(1)) * scale
            if 0 < value < 1e15:
                out.append((m, value, m.group(3).lower()))
        return out

    def _scaled_measure(self, turn: str, earlier: str, language: str) -> FigureAnswer | None:
        """Sizes the asker measured at one count of items, and a turn that asks how much at another
        count of the same items ("with 10,000 sequences xs is 0.16 GB and ys 0.4 GB ... how much RAM
        for 2 million sequences?"): each size scaled in proportion, in the unit the asker wrote and in
        binary units, with their sum."""
        low = _plain_digits(turn or "").lower()
        if self._how_much is None or not self._how_much.search(low):
            return None
        asked = self._counts(low)
        if not asked:
            return None
        target = asked[-1]  # the count asked about: the last one the turn names
        said = _plain_digits(f"{earlier}\n{turn}" if earlier else turn or "").lower()
        base = None  # the last sentence that states sizes beside a count of the same items, another count
        for sentence in re.split(r"(?<=[!?。！？\n;])|(?<=\.)\s", said):
            counts = [c for c in self._counts(sentence) if c[2][:4] == target[2][:4] and c[1] != target[1]]
            sizes = [(m, _float(m.group(1)), _unit_of(m.group(2))) for m in re.finditer(_AMOUNT, sentence)
                     if m.group(2) and _unit_of(m.group(2)) != "g"]
            sizes = [x for x in sizes if x[2] in _UNIT_FACTOR
                     and not any(c[0].start() <= x[0].start() < c[0].end() for c in self._counts(sentence))
                     # (a card's size, "RTX 4090 24GB", "a 40 GB card", is not a measurement)
                     and not _CARD_SIZE_BEFORE.search(sentence[max(0, x[0].start() - 12):x[0].start()])
                     and not _CARD_AFTER.match(sentence, x[0].end())]
            if len({c[1] for c in counts}) == 1 and sizes:
                base = (counts[0], sizes, sentence)
        if base is None:
            return None  # (no size measured at another count of the same items)
        (_, n, noun), sizes, sentence = base
        ratio = target[1] / n
        rows, total = [], 0.0
        for m, value, unit in sizes:
            bytes_ = value * _UNIT_FACTOR[unit]
            scaled = bytes_ * ratio
            total += scaled
            label = self._change_label(sentence, m.start(), m.end())
            measured = f"{_places(value, _decimals(m.group(1)))} {_UNIT_WRITTEN[unit]}"
            rows.append(self._msg("scaled_row", language, label=f"{label}: " if label else "", measured=measured,
                                  scaled=self._in_units(scaled, unit)))
        if len(rows) > 1:
            rows.append(self._msg("scaled_total", language, size=self._in_units(total, sizes[0][2])))
        text_ = self._msg("scaled_measure", language, base=self._count_words(n, noun, language),
                          asked=self._count_words(target[1], target[2], language), ratio=_num(round(ratio, 2)),
                          rows=_LIST_SEPARATOR.get(language, "; ").join(rows))
        return FigureAnswer(kind=KIND, subject="scaled_measure", text=text_, value_bytes=int(total), sources=["computed"])

    def _fraction_range(self, turn: str, earlier: str, language: str) -> FigureAnswer | None:
        """The `XLA_PYTHON_CLIENT_MEM_FRACTION` asked for on a card whose step peak and whose memory
        taken outside JAX's pool (NCCL, cuBLAS, the CUDA context) the conversation states: at least
        the peak over the card, at most the card less that memory over the card, and a value between."""
        said = _plain_digits(f"{earlier}\n{turn}" if earlier else turn or "").lower()
        low_turn = _plain_digits(turn or "").lower()
        if "mem_fraction" not in self.read(low_turn).cues:
            return None
        s = self.read(said)
        if not (s.gpu and s.card_memory):
            return None
        outside = self._amount_by(said, "outside_pool", after_only=False)
        peak = self._amount_by(said, "peak_measured", after_only=True)
        if outside is None or peak is None:
            return None
        card = float(s.card_memory)
        if not (0 < outside < card and 0 < peak):
            return None
        low, high = peak / card, (card - outside) / card
        values = dict(card=format_bytes(int(card)), peak=format_bytes(int(peak)), outside=format_bytes(int(outside)))
        if low >= high:
            text_ = self._msg("fraction_range_none", language, over=format_bytes(int(peak + outside - card)), **values)
            return FigureAnswer(kind=KIND, subject="pool_fraction_range", text=text_, sources=["computed"])
        value = math.floor((high - 0.01) * 100) / 100
        if value < low:
            value = min(math.ceil(low * 1000) / 1000, high)
        text_ = self._msg("fraction_range", language, low=_share_3(low, up=True), high=_share_3(high, up=False),
                          value=_fraction(value) if value * 100 == int(value * 100) else _share_3(value, up=True),
                          pool=format_bytes(int(value * card)), **values)
        return FigureAnswer(kind=KIND, subject="pool_fraction_range", text=text_, value_bytes=int(value * card),
                            sources=["computed"])

    def _amount_by(self, text: str, cue: str, after_only: bool) -> float | None:
        """The size (in bytes, GB read as GiB as a card's size is) said with the last words of `cue` in
        `text`: right before them in the same clause (unless `after_only`), else right after them."""
        found = [m for p in self._cues.get(cue, []) for m in p.finditer(text)]
        if not found:
            return None
        m = max(found, key=lambda x: x.start())
        if not after_only:  # ("take about 28.6 GiB outside the pool"): the size said just before, first
            window = text[max(0, m.start() - 60):m.start()]
            before = [x for x in re.finditer(_AMOUNT, window) if x.group(2) and not re.search(r"[.;\n]", window[x.end():])]
            if before:
                x = before[-1]
                return _float(x.group(1)) * _BINARY_FACTOR.get(_unit_of(x.group(2)) or "", 0) or None
        after = re.search(r"^[^.;\n\d]{0,40}?" + _AMOUNT, text[m.end():m.end() + 80])
        if after is not None and after.group(2):
            return _float(after.group(1)) * _BINARY_FACTOR.get(_unit_of(after.group(2)) or "", 0) or None
        return None

    @staticmethod
    def _count_words(value: float, noun: str, language: str) -> str:
        return f"{_grouped(value, language)} {noun}"

    @staticmethod
    def _in_units(size: float, unit: str) -> str:
        """A size in the kind of unit the asker wrote (decimal or binary, the next larger one when it
        reaches a thousand, the next smaller one below one), with the binary size beside a decimal one."""
        while unit in _UNIT_NEXT and size / _UNIT_FACTOR[_UNIT_NEXT[unit]] >= 1:
            unit = _UNIT_NEXT[unit]
        previous = {v: k for k, v in _UNIT_NEXT.items()}
        while unit in previous and size / _UNIT_FACTOR[unit] < 1:
            unit = previous[unit]
        written = f"{size / _UNIT_FACTOR[unit]:.2f} {_UNIT_WRITTEN[unit]}"
        return written if unit in ("gib", "mib", "tib", "kib", "gio", "mio") else f"{written} ({format_bytes(int(size))})"

    def _over_limit(self, turn: str, earlier: str, language: str) -> FigureAnswer | None:
        """Figures set against a limit the asker states ("peaks of 151.760 GiB and 151.791 GiB, allocator
        limit 138.225 GiB: how much over each, and how much to cut?"): each one's excess over it, in the
        limit's unit and in %, and the least cut that brings the largest under it."""
        low = _plain_digits(turn or "").lower()
        if not _OVER_ASKED.search(low):
            return None
        said = _plain_digits(f"{earlier}\n{turn}" if earlier else turn or "").lower()
        every = [(m, _unit_of(m.group(2))) for m in re.finditer(_AMOUNT, said)
                 if not _CARD_SIZE_BEFORE.search(said[max(0, m.start() - 12):m.start()])]
        units = [u for _, u in every if u]
        # the limit: a figure right after a limit's word; without a unit of its own, the unit of the figures
        # beside it ("110592 bytes of shared memory and the limit is 101376")
        limits = [(m, u or (units[0] if units else None)) for m, u in every
                  if _LIMIT_WORD.search(said[max(0, m.start() - 30):m.start()])
                  and not re.search(r"\d", said[max(0, m.start() - 30):m.start()][-12:])]
        limits = [(m, u) for m, u in limits if u]
        if not limits:
            return None
        limit, unit = limits[-1]
        limit_bytes = _float(limit.group(1)) * _UNIT_SIZE[unit]
        figures = [(m, u) for m, u in every if u and m.start() != limit.start() and _float(m.group(1)) > 0
                   and _float(m.group(1)) != _float(limit.group(1))]
        if not figures or limit_bytes <= 0:
            return None
        places = _decimals(limit.group(1), *(m.group(1) for m, _ in figures))

        def written(size: float, in_unit: str = unit) -> str:  # (in the limit's unit; bytes with their KiB beside them)
            if in_unit == "bytes":
                return f"{size:.0f} B ({_places(size / 1024, 2)} KiB)"
            return f"{_places(size / _UNIT_SIZE[in_unit], places)} {_UNIT_WRITTEN.get(in_unit, in_unit.upper())}"

        rows, worst = [], 0.0
        for number, written_unit in dict.fromkeys((m.group(1), u) for m, u in figures):
            value = _float(number) * _UNIT_SIZE[written_unit]
            gap = value - limit_bytes
            key = "over_limit_row" if gap > 0 else "under_limit_row"
            rows.append(self._msg(key, language, figure=written(value, written_unit), gap=written(abs(gap)),
                                  percent=f"{abs(gap) / limit_bytes * 100:.1f}"))
            worst = max(worst, value)
        text_ = self._msg("over_limit", language, limit=written(limit_bytes),
                          rows=_LIST_SEPARATOR.get(language, "; ").join(rows))
        if worst > limit_bytes:
            text_ = self._join([text_, self._msg("over_limit_cut", language, cut=written(worst - limit_bytes),
                                                 percent=f"{(worst - limit_bytes) / worst * 100:.1f}")], language)
        return FigureAnswer(kind=KIND, subject="over_limit", text=text_, value_bytes=int(worst), sources=["computed"])

    @staticmethod
    def _change_label(sentence: str, start: int, end: int) -> str:
        """The TPU slice that a measurement in `sentence` is of: the one named right after it ("by 5.1 GB
        on v5p-128"), else the last one before it ("on v5p-512 it went from ...")."""
        after = _SLICE.search(sentence[end:end + CHANGE_LABEL_REACH])
        if after is not None and _LABEL_AFTER.fullmatch(sentence[end:end + after.start()]):
            return after.group(0)
        before = list(_SLICE.finditer(sentence[max(0, start - CHANGE_LABEL_REACH):start]))
        return before[-1].group(0) if before else ""

    def _raw_bytes(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """Byte counts the text quotes bare (memory_stats' "bytes_in_use": 1606439424), asked in GiB:
        each one converted, against the device named."""
        low = (text or "").lower()
        if not (_BYTES_SAID.search(low) and _GIB_ASKED.search(low)):
            return None
        values = list(dict.fromkeys(int(m.group(1)) for m in _BARE_BYTES.finditer(low)))[:4]
        if not values:
            return None
        rows = _LIST_SEPARATOR.get(language, "; ").join(f"{v} B = {format_bytes(v)}" for v in values)
        parts = [self._msg("raw_bytes", language, rows=rows)]
        if s.device_memory and not s.gpu:
            parts.append(self._msg("raw_bytes_share", language, memory=format_bytes(s.device_memory),
                                   percent=f"{max(values) / s.device_memory:.1%}"))
        return FigureAnswer(kind=KIND, subject="raw_bytes", text=self._join(parts, language), value_bytes=max(values),
                            sources=["computed"], cite=POOL_CITE)

    def _trajectory(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """A rollout's outputs kept step after step: a grid (H × W) with its channels in the dtype
        said, per step and for each step count the text names, against the device."""
        channels, low = s.values.get("channels"), _plain_digits(text or "").lower()
        grid = _GRID.search(low)
        counts = sorted({int(m.group(1)) for _, compiled in self._quantities.get("steps", []) for m in compiled.finditer(low)})
        if not (channels and grid and counts):
            return None
        h, w = int(grid.group(1)), int(grid.group(2))
        size = s.dtype.bytes if s.dtype else 4
        step = h * w * channels * size
        totals = _LIST_SEPARATOR.get(language, "; ").join(
            self._msg("trajectory_row", language, steps=_num(n), total=format_bytes(n * step)) for n in counts)
        memory = s.device_memory
        if not memory:  # no device named: nothing to hold it against
            return None
        text_ = self._msg("trajectory", language, h=_num(h), w=_num(w), channels=_num(channels), bytes=_num(size),
                          dtype=s.dtype.name if s.dtype else "float32", step=format_bytes(step), totals=totals,
                          memory=s.memory_label or format_bytes(memory), device=s.device or "", fit=_num(memory // step))
        return FigureAnswer(kind=KIND, subject="trajectory", text=text_, value_bytes=int(counts[-1] * step),
                            sources=["computed"], cite=TRAINING_CITE)

    def _patches(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """Sliding windows cut out of an image or a field ("patch_size_in=96, patch_stride=4" over
        (32, 256, 256)): ((H − k) / stride + 1) × ((W − k) / stride + 1) windows per image without
        padding, and their bytes for the whole batch when every window is materialised (an
        output window size said as well: those too)."""
        low = _plain_digits(text or "").lower()
        size, stride = _PATCH_SIZE.search(low), _PATCH_STRIDE.search(low)
        if size is None or stride is None:
            return None
        k, step = (int(next(g for g in m.groups() if g)) for m in (size, stride))
        shapes = [_dims_of(m) for m in _SHAPE.finditer(text or "")]
        images = [d for d in shapes if len(d) >= 2 and d[-1] > k and d[-2] > k]
        if not images or step < 1:
            return None
        dims = images[-1]
        h, w = dims[-2], dims[-1]
        batch = math.prod(dims[:-2]) if len(dims) > 2 else 1
        rows, cols = (h - k) // step + 1, (w - k) // step + 1
        per_image = rows * cols
        bytes_, dtype = (s.dtype.bytes, s.dtype.name) if s.dtype else (4, "float32")
        in_size = batch * per_image * k * k * bytes_
        parts = [self._msg("patches", language, k=k, stride=step, h=h, w=w, rows=rows, cols=cols,
                           per_image=_grouped(per_image, language), batch=_grouped(batch, language),
                           bytes=_num(bytes_), dtype=dtype, size=format_bytes(in_size))]
        out = _PATCH_OUT.search(low)
        total = in_size
        if out is not None:
            o = int(out.group(1))
            out_size = batch * per_image * o * o * bytes_
            total += out_size
            parts.append(self._msg("patches_out", language, out=o, size=format_bytes(out_size)))
        parts.append(self._msg("patches_chunk", language))
        return FigureAnswer(kind=KIND, subject="patches", text=self._join(parts, language), value_bytes=int(total),
                            sources=["computed"])

    def _scan_stacked(self, text: str, turn: str, s: Stated, language: str) -> FigureAnswer | None:
        """A loop that keeps every step's output (lax.scan's ys): the steps said × one step's array,
        one kept in k where the newest turn says so, against the device named."""
        saved = s.values.get("checkpoints")  # states a differentiated solve keeps ("checkpoints=4000")
        steps = saved or s.values.get("steps")
        if not steps or "pairwise_matrix" in s.cues or (not saved and (
                "loop_named" not in s.cues or _CARRY_OR_GRAD.search(text.lower()))):
            return None  # (a carry, or a loop differentiated through: its residuals, another reading)
        found = [m for m in _SHAPE.finditer(text or "") if len(_dims_of(m)) >= 2 and 0 not in _dims_of(m)]
        if not found:
            return None
        named = _NAMED_SHAPE.search((text or "")[max(0, found[-1].start() - 16):found[-1].start() + 1])
        if named and re.search(rf"(?<![\w]){re.escape(named.group(1))}\s*@|@\s*{re.escape(named.group(1))}(?![\w])", text):
            return None  # a matrix the saved output is multiplied by ("A @ y[0], A is (85, 20000)"), not a step's output
        dims = _dims_of(found[-1])
        bytes_, dtype = (s.dtype.bytes, s.dtype.name) if s.dtype else (4, "float32")
        shape = "[" + ", ".join(map(str, dims)) + "]"
        count = _arrays_each(text)  # "y0 is a tuple (u, v), each (256,256,256)": two arrays a state
        per = math.prod(dims) * bytes_ * count
        if saved:
            parts = [self._msg("checkpoints_saved", language, checkpoints=_grouped(steps, language), count=count,
                               shape=shape, dtype=dtype, per=format_bytes(per), total=format_bytes(steps * per))]
        else:
            parts = [self._msg("scan_stacked", language, steps=_grouped(steps, language), shape=shape, dtype=dtype,
                               per=format_bytes(per), total=format_bytes(steps * per))]
        total = steps * per
        every = _EVERY_KTH.search(_plain_digits(turn or "").lower())
        if every and 1 < int(every.group(1) or every.group(2)) < steps:
            k = int(every.group(1) or every.group(2))
            kept = -(-int(steps) // k)
            total = kept * per
            parts.append(self._msg("scan_stacked_every", language, every=k, kept=_grouped(kept, language),
                                   per=format_bytes(per), total=format_bytes(total)))
        if s.device_memory:
            memory = s.memory_label or format_bytes(s.device_memory)
            parts.append(self._msg("scan_stacked_share", language, share=f"{100 * total / s.device_memory:.0f}%",
                                   memory=memory, device=s.device or ""))
            if _MOST_ASKED.search(_plain_digits(turn or "").lower()):  # "and the most that fits, leaving 10 GiB?"
                reserve = s.values.get("reserve") or 0
                most = int((s.device_memory - reserve) // per)
                if most >= 1:
                    values = dict(memory=memory, most=_grouped(most, language), per=format_bytes(per),
                                  used=format_bytes(most * per))
                    parts.append(self._msg("stacked_most_reserve", language, reserve=format_bytes(reserve), **values)
                                 if reserve else self._msg("stacked_most", language, **values))
        return FigureAnswer(kind=KIND, subject="scan_stacked", text=self._join(parts, language), value_bytes=int(total),
                            sources=["computed"], cite=TRAINING_CITE)

    def _pairwise(self, text: str, turn: str, s: Stated, language: str) -> FigureAnswer | None:
        """An n × m matrix with one value per pair of points (a GP's kernel, a transport cost,
        distances), sized from the point counts the conversation gives, the newest turn's winning:
        whole in each dtype the turn names, its Cholesky factor where one is said, one block of the
        rows made at once (the block said, else one that keeps a block small), against the device."""
        if "pairwise_matrix" not in s.cues:
            return None
        earlier = text[: len(text) - len(turn)] if turn and text.endswith(turn) else ""
        n = m = None
        for part in text.split("\n"):  # (turn by turn: a later turn's count replaces an earlier one)
            unlabeled = []
            for label, count in self._point_counts(part):
                if label == "both":
                    n = m = count
                elif label == "m":
                    m = count
                elif label == "n":
                    n = count
                else:
                    unlabeled.append(count)
            if len(unlabeled) >= 2:
                n, m = unlabeled[0], unlabeled[1]
            elif unlabeled:  # one count: the side a pair matrix of one set has (a GP's n × n)
                square = m is None or m == n
                n = unlabeled[0]
                m = n if square else m
        if n is None:
            return None
        m = m or n
        low_turn = _plain_digits(turn or "").lower()
        found = sorted((hit.start(), i, d) for i, (d, p) in enumerate(self._dtypes) if (hit := p.search(low_turn)))
        named = list({d.name: d for _, _, d in found}.values())  # each dtype the turn names, in its order
        dtypes = named or ([s.dtype] if s.dtype else [])
        first = dtypes[0] if dtypes else None
        bytes_, dtype_name = (first.bytes, first.name) if first else (4, "float32")
        size = n * m * bytes_
        others = "".join(self._msg("pairwise_other", language, dtype=d.name, size=format_bytes(n * m * d.bytes))
                         for d in dtypes[1:])
        parts = [self._msg("pairwise", language, n=_grouped(n, language), m=_grouped(m, language), bytes=_num(bytes_),
                           dtype=dtype_name, size=format_bytes(size), others=others)]
        if first is None:
            parts.append(self._msg("assumed", language, what="float32"))
        if "eigen_decomposed" in s.cues and n == m:
            parts.append(self._msg("pairwise_eigh", language, four=format_bytes(4 * size)))
        elif "factorized" in s.cues and n == m:
            parts.append(self._msg("pairwise_factor", language, double=format_bytes(2 * size)))
        memory = s.device_memory
        if "eigen_decomposed" in s.cues and n == m:  # the whole matrix at once, four of them: no blocks of rows
            if memory:
                parts.append(self._msg("pairwise_eigh_fit", language, memory=s.memory_label or format_bytes(memory),
                                       device=s.device or "", verdict=self._fit_verdict(4 * size, memory, language)))
            return FigureAnswer(kind=KIND, subject="pairwise", text=self._join(parts, language), value_bytes=int(size),
                                sources=["computed"], cite=PAIRWISE_CITE)
        if memory:
            label = s.memory_label or format_bytes(memory)
            parts.append(self._msg("pairwise_fits", language, memory=label, device=s.device or "",
                                   share=f"{100 * size / memory:.0f}%") if size <= memory
                         else self._msg("pairwise_over", language, memory=label, device=s.device or ""))
        if size > BEYOND_ANY_DEVICE:  # "bigger GPU?": none holds it; blocks or an approximation
            parts.append(self._msg("pairwise_beyond_any", language, size=format_bytes(size),
                                   devices=_grouped(math.ceil(size / (80 << 30)), language)))
        said = self._block_rows(low_turn) or self._block_rows(_plain_digits(earlier).lower())
        k = said if said and said < n else None
        if k is None and (not memory or size > memory / 8):  # a block that keeps to a fraction of the device
            budget = min(1 << 30, (memory or 1 << 33) // 8)
            k = 1 << max(0, int(budget // (m * bytes_)).bit_length() - 1)
            k = k if k < n else None
        if k:
            block = k * m * bytes_
            parts.append(self._msg("pairwise_block" if said else "pairwise_block_chosen", language, k=_grouped(k, language),
                                   m=_grouped(m, language), bytes=_num(bytes_), block=format_bytes(block),
                                   chunks=_grouped(math.ceil(n / k), language)))
        snippet = None
        if "code_asked" in self.read(turn or "").cues and self.data.pairwise_snippet:
            rows = k or min(n, 1024)
            eps = _EPSILON.search(_plain_digits(text).lower())
            filled = dict(n=n, m=m, k=rows, dtype=dtype_name, eps=eps.group(1) if eps else "1e-2",
                          x64='jax.config.update("jax_enable_x64", True)\n' if bytes_ == 8 and "float" in dtype_name else "")
            if "sinkhorn" in s.cues and self.data.pairwise_sinkhorn_snippet:  # transport: its own blocked loop
                snippet = self.data.pairwise_sinkhorn_snippet.format(**filled)
            else:  # a kernel's matvec, then its solve (square, a solve said) or one product
                snippet = self.data.pairwise_snippet.format(**filled).rstrip("\n") + (
                    self.data.pairwise_solve_snippet if n == m and "pairwise_solve" in s.cues
                    else self.data.pairwise_apply_snippet)
            parts.append(self._msg("pairwise_code", language, k=_grouped(rows, language)))
        return FigureAnswer(kind=KIND, subject="pairwise", text=self._join(parts, language), value_bytes=int(size),
                            sources=["computed"], cite=PAIRWISE_CITE, snippet=snippet)

    def _point_counts(self, text: str) -> list[tuple[str, int]]:
        """The point counts `text` gives, in order, each with the side a label right before it
        names ("x 65536点・y 32768点": n, m; "x も y も (65536, d)": both; none: "")."""
        low = _plain_digits(text or "").lower()
        hits = sorted({m.start(1): (m, p.scale) for p, compiled in self._points for m in compiled.finditer(low)}.items())
        out, end = [], 0
        for start, (hit, scale) in hits:
            if start < end:
                continue
            end = hit.end(1)
            cut = max(0, start - 24)
            before = low[cut: start]
            if cut and low[cut - 1].isalnum():  # (not the end of a word the window cuts: "um" is no "m")
                before = re.sub(r"^\w+", "", before)
            since = re.split(r"\d", before)
            before = since[-1]  # (the words since the last number only)
            if len(since) > 1:  # (a unit on that number is no label: "2.5m params" names no side m)
                before = re.sub(r"^[a-z]+", "", before)
            if _POINT_LIMIT.search(before):
                continue  # (a limit met before, not the size of the set)
            # a label stands right before its count ("y ~400000", "x has 240000", "x も y も"), not a word
            # some words earlier ("¿y si me quedo con 32767 muestras?": Spanish "and")
            labels = [m.group(1) for m in _POINT_LABEL.finditer(before)
                      if all(w in _LABEL_JOINERS for w in re.findall(r"[^\W\d_]{2,}", before[m.end():]))]
            sides = {"n" if lab in ("x", "n") else "m" for lab in labels}
            label = "both" if sides == {"n", "m"} else (sides.pop() if sides else "")
            out.append((label, int(round(float(hit.group(1)) * scale))))
            # the other side's count said right after it without the noun again ("x de 100000 puntos, y de 50000")
            other = _OTHER_SIDE.match(low, end)
            if label in ("n", "m") and other is not None and ("n" if other.group(1) in ("x", "n") else "m") != label:
                out.append(("n" if other.group(1) in ("x", "n") else "m", int(other.group(2))))
                end = other.end()
        return out

    def _block_rows(self, low: str) -> int | None:
        """The rows of a pair matrix made at once that `low` says ("online=4096", "batch_size=512"): the last."""
        found = [(m.start(), int(m.group(1))) for p in self._blocks for m in p.finditer(low)]
        return max(found)[1] if found else None

    def _unified_machine(self, text: str, s: Stated, language: str, conversation: str = "") -> FigureAnswer | None:
        """A machine whose GPU shares the system's RAM (DGX Spark, Jetson) and the amount it has:
        JAX's default pool taken from it, what that leaves to the system, and a lower share."""
        if "unified_machine" not in s.cues or "mem_fraction" not in s.cues and "default_asked" not in s.cues:
            return None
        low = _plain_digits(text or "").lower()
        if ("force_unified" in low or "force_unified" in (conversation or "").lower() or _FRACTION_ABOVE_ONE.search(low)
                or any(p.search(low) for _, patterns in self._gpus for p in patterns)):
            return None  # CUDA's unified memory on a card of its own (TF_FORCE_UNIFIED_MEMORY, a fraction of 4, an A100)
        sizes = [float(m.group(1)) for m in _GB.finditer(low)]
        if not sizes:
            return None
        total = max(sizes) * (1 << 30)
        pool = GPU_POOL_SHARE * total
        text_ = self._msg("unified_machine", language, total=format_bytes(total), pool=format_bytes(pool),
                          left=format_bytes(total - pool), half=format_bytes(total / 2))
        return FigureAnswer(kind=KIND, subject="pool_unified_machine", text=text_, value_bytes=int(total / 2),
                            sources=["computed"], cite=POOL_CITE)

    def _pool_for_need(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """The fraction a use measured on the GPU named needs, where the text asks which fraction
        ("22.4G at seq 2048: with JAX's defaults does it fit, what MEM_FRACTION would I need?"): the
        largest use it states against the default pool, and the fraction that holds it."""
        if not (s.gpu and s.card_memory and "mem_fraction" in s.cues):
            return None
        low = _plain_digits(text or "").lower()
        if not _FRACTION_ASKED.search(low):
            return None
        card = s.card_memory / (1 << 30)
        others = [float(m.group(1)) for m in _GB.finditer(low)
                  if _CARD_BEFORE.search(low[max(0, m.start() - 12): m.start()]) and float(m.group(1)) < 0.98 * card]
        if others and _SAME_AS.search(low):  # "make the 80GB behave like the 40GB": the other card's pool
            other_pool = GPU_POOL_SHARE * others[0]
            fraction = math.floor(other_pool / card * 1000) / 1000
            text_ = self._msg("pool_like_other", language, other=f"{_num(others[0])} GB",
                              other_pool=f"{_num(other_pool)} GiB", card=format_bytes(s.card_memory),
                              exact=f"{other_pool / card:.4f}".rstrip("0").lstrip("0"),
                              fraction=f"{fraction:.3f}".rstrip("0").lstrip("0"), pool=format_bytes(fraction * s.card_memory))
            return FigureAnswer(kind=KIND, subject="pool_like_other", text=text_,
                                value_bytes=int(fraction * s.card_memory), sources=["computed"], cite=POOL_CITE)
        uses = [float(m.group(1)) for m in _GB.finditer(low)
                if not _CARD_BEFORE.search(low[max(0, m.start() - 12): m.start()])
                and not _FREE_AFTER.match(low, m.end()) and not _HOST_NEAR.search(low[m.end(): m.end() + 12])]
        # (not the card's size again, nor a card's default pool as nvidia-smi shows it with the CUDA
        # context, this card's or another's named: that is no one's need)
        uses = [u for u in uses if 0.3 * card <= u < card and abs(u - card) > 0.02 * card
                and not _a_pool_seen(u, low, card)]
        if not uses:
            return None
        need = max(uses)
        default = GPU_POOL_SHARE * s.card_memory
        values = dict(need=f"{_num(need)} GB", card=format_bytes(s.card_memory), default_pool=format_bytes(default))
        if need * (1 << 30) <= default:
            text_ = self._msg("pool_for_need_default", language, **values)
            fraction = GPU_POOL_SHARE
        else:
            fraction = math.ceil(need / card * 100) / 100
            key = "pool_for_need_tight" if fraction > 0.95 else "pool_for_need"
            text_ = self._msg(key, language, fraction=_fraction(fraction), pool=format_bytes(fraction * s.card_memory),
                              left=format_bytes((1 - fraction) * s.card_memory), **values)
        return FigureAnswer(kind=KIND, subject="pool_for_need", text=text_, value_bytes=int(fraction * s.card_memory),
                            sources=["computed"], cite=POOL_CITE)

    def _need_beyond_card(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """A need the text states (documented, measured elsewhere, asked for by the failing run) that
        is more than the whole GPU it runs on ("the docs say ~60GB" on a 48 GB L40): no pool setting
        fits it; what does, and the unified-memory fraction that would reach it."""
        if not (s.gpu and s.card_memory and {"oom", "fits", "mem_fraction"} & s.cues):
            return None
        low = _plain_digits(text or "").lower()
        card = s.card_memory / (1 << 30)
        needs = []
        for m in _GB.finditer(low):
            before, after = low[max(0, m.start() - 40): m.start()], low[m.end(): m.end() + 20]
            if _CARD_BEFORE.search(before[-12:]) or _HOST_NEAR.search(before[-16:] + " " + after[:12]):
                continue  # a card's own size ("H100 80GB"), host RAM ("64 GB of RAM")
            if _NEED_NEAR.search(before) or _NEED_NEAR.search(after):
                needs.append(float(m.group(1)))
        # (not the cards' sum, "4x16 GB = 64 GB": several cards never pool; nor a need that a
        # fraction above 1 with unified memory already reaches)
        needs = [n for n in needs if card < n <= 8 * card
                 and not (round(n / card) >= 2 and abs(n / card - round(n / card)) < 0.02)]
        beyond_one = [float(m.group(1)) for m in _FRACTION_ABOVE_ONE.finditer(low)]
        if not needs or (beyond_one and max(beyond_one) * card >= min(needs)):
            return None
        need = min(needs)  # (the documented need and a larger use measured elsewhere: the smaller)
        fraction = math.ceil(need * 1.05 / card * 10) / 10
        values = dict(need=f"{_num(need)} GB", card=format_bytes(s.card_memory), device=s.device or "GPU",
                      fraction=_num(fraction), beyond=format_bytes(fraction * s.card_memory - s.card_memory))
        if _UNIFIED_SAID.search(low):
            text_ = self._msg("need_beyond_card_unified", language,
                              default_pool=format_bytes(GPU_POOL_SHARE * s.card_memory), **values)
        else:
            text_ = self._msg("need_beyond_card", language, pool=format_bytes(0.95 * s.card_memory), **values)
        return FigureAnswer(kind=KIND, subject="need_beyond_card", text=text_, value_bytes=int(need * (1 << 30)),
                            sources=["computed"], cite=POOL_CITE)

    def _pool_for_jax(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """A size the text gives to JAX itself on the GPU named ("I want JAX to reserve only 20 GiB and
        leave the rest to PyTorch"): that size over the whole card, rounded down to the percent."""
        if not (s.gpu and s.card_memory and "mem_fraction" in s.cues):
            return None
        low = _plain_digits(text or "").lower()
        card = s.card_memory / (1 << 30)
        for m in _GB.finditer(low):
            before = low[max(0, m.start() - 20): m.start()]  # JAX just before the size: its own
            if "jax" not in before:
                continue
            between = before[before.rindex("jax"):]
            if any(p.search(between) for p in self._cues.get("other_program", [])) or _NEEDS_WORD.search(between):  # "my JAX training needs ...": whose?
                continue
            if not _WISH.search(low[max(0, m.start() - 40): m.end() + 20]):  # "JAX holds 18GB": what it does, not a wish
                continue
            need = float(m.group(1))
            if not 0 < need < 0.9 * card:
                continue
            fraction = math.floor(need / card * 100) / 100
            text_ = self._msg("pool_for_jax", language, need=f"{_num(need)} GiB", card=format_bytes(s.card_memory),
                              exact=f"{need / card:.4f}".lstrip("0"), fraction=_fraction(fraction),
                              pool=format_bytes(fraction * s.card_memory),
                              left=format_bytes(s.card_memory * (1 - fraction)))
            return FigureAnswer(kind=KIND, subject="pool_shares", text=text_, value_bytes=int(fraction * s.card_memory),
                                sources=["computed"], cite=POOL_CITE)
        return None

    def _pool_leave(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """A share of the GPU named that leaves a stated amount outside JAX's pool ("I need to leave
        about 600 MiB free for cuDNN"): the fraction, rounded down to the percent."""
        if not (s.gpu and s.card_memory and "mem_fraction" in s.cues):
            return None
        low = _plain_digits(text or "").lower()
        leave = None
        for m in _SIZE.finditer(low):
            around = low[max(0, m.start() - 40): m.end() + 40]
            if _LEAVE.search(around):
                leave = float(m.group(1)) * _UNIT_BYTES[m.group(2)[0] if m.group(2)[0] in "gm" else
                                                       {"г": "g", "м": "m"}[m.group(2)[0]]]
        card = s.card_memory
        if not leave or not 0 < leave < 0.8 * card:  # (what the other program keeps: up to most of the card)
            return None
        exact = (card - leave) / card
        fraction = math.floor(exact * 100) / 100
        text_ = self._msg("pool_leave", language, leave=format_bytes(leave), card=format_bytes(card),
                          exact=f"{exact:.3f}".lstrip("0"), fraction=_fraction(fraction),
                          pool=format_bytes(fraction * card), left=format_bytes(card - fraction * card))
        return FigureAnswer(kind=KIND, subject="pool_shares", text=text_, value_bytes=int(fraction * card),
                            sources=["computed"], cite=POOL_CITE)

    def _analysis(self, s: Stated, language: str, text: str = "") -> FigureAnswer | None:
        """The peak per device that the memory_analysis() fields the asker pastes add up to
        (arguments + outputs − aliased + temporaries), against the device named, and what it would
        be without donation."""
        v = dict(s.values)
        v.update({k: x for k, x in _analysis_in_units(text).items() if k not in v})
        arg, out, temp = v.get("analysis_argument"), v.get("analysis_output"), v.get("analysis_temp")
        if arg is None or temp is None:
            return None
        alias = v.get("analysis_alias") or 0
        if out is None:  # the outputs not given: arguments + temporaries, a floor
            alias, peak = 0, int(arg + temp)
            parts = [self._msg("analysis_peak_no_output", language, argument=format_bytes(arg), temp=format_bytes(temp),
                               peak=format_bytes(peak))]
        else:
            peak = int(arg + out - alias + temp)
            parts = [self._msg("analysis_peak", language, argument=format_bytes(arg), output=format_bytes(out),
                               alias=format_bytes(alias), temp=format_bytes(temp), peak=format_bytes(peak))]
        if alias:
            parts.append(self._msg("analysis_alias", language, alias=format_bytes(alias),
                                   peak=format_bytes(peak + alias)))
        if s.device_memory:
            device = dict(device=s.device or "", memory=s.memory_label or format_bytes(s.device_memory))
            parts.append(self._msg("analysis_fits", language, left=format_bytes(s.device_memory - peak), **device)
                         if peak <= s.device_memory
                         else self._msg("analysis_over", language, over=format_bytes(peak - s.device_memory), **device))
            if peak > s.device_memory and s.gpu and s.card_memory:  # the share of the card that would hold it
                top = MAX_SHARES * s.card_memory
                if peak <= top:
                    share = min(math.ceil((peak / s.card_memory + SHARE_MARGIN) * 20) / 20, MAX_SHARES)
                    parts.append(self._msg("analysis_share_fits", language, share=_fraction(share),
                                           pool=format_bytes(share * s.card_memory),
                                           left=format_bytes(share * s.card_memory - peak)))
                else:
                    parts.append(self._msg("analysis_share_short", language, pool=format_bytes(top),
                                           short=format_bytes(peak - top)))
        return FigureAnswer(kind=KIND, subject="memory_analysis", text=join_sentences(parts, language),
                            value_bytes=peak, sources=["computed"], cite=ANALYSIS_CITE)

    def _state_per_slice(self, text: str, total: int, language: str) -> FigureAnswer | None:
        """A model's state fully sharded on each of the slices the text names (two or more): per device
        against that device's usable HBM; and, asked, the fewest chips of the last generation that
        hold it (the state alone)."""
        rows, last = [], None
        for name, gen, n in self._slices_in(text):
            shape = self._slice_shape(gen, n)
            if shape is None:
                continue
            chips, per_chip, memory, _ = shape
            devices = chips * per_chip
            per = total / devices
            verdict = self._fit_verdict(per, memory, language)
            rows.append(self._msg("state_slice_row", language, slice=name, devices=devices, per=format_bytes(per),
                                  memory=format_bytes(memory), verdict=verdict))
            last = (gen, memory, per_chip)
        if len(rows) < 2 and not (rows and "min_chips" in self.read(text).cues):
            return None
        parts = [self._msg("state_per_slice", language, total=format_bytes(total), rows="; ".join(rows))]
        if last and "min_chips" in self.read(text).cues:
            gen, memory, per_chip = last
            # the generation named in the ask itself ("the minimum of v4 chips"), else the last slice's
            low = (text or "").lower()
            asked = [g for p in self._cues.get("min_chips", []) for m in p.finditer(low)
                     for g in self.figures.generations_in(low[m.start():m.end() + 12])]
            f, hw = (self.figures.data.generations.get(asked[0]), self.figures.gens.get(asked[0])) if asked else (None, None)
            if f is not None and hw is not None and hw.hbm_reported:
                per_chip = 1 if f.megacore is not None else hw.devices_per_chip
                gen, memory = asked[0], parse_size(hw.hbm_reported) * (hw.devices_per_chip // per_chip)
            fewest = math.ceil(total / memory)
            parts.append(self._msg("state_fewest_chips", language, gen=gen, chips=math.ceil(fewest / per_chip),
                                   memory=format_bytes(memory)))
        return FigureAnswer(kind=KIND, subject="state_per_slice", text=self._join(parts, language),
                            value_bytes=int(total), sources=["computed"], cite=TRAINING_CITE)

    def _slice_device_counts(self, low: str) -> set[int]:
        """The number each slice `low` names counts and the devices it makes ("v4-64": 64 and 32):
        a count of devices read off a slice's name, not one the text states (a follow-up's "a v4-16
        instead?" runs on the v4-16, not on the v4-64 named before it)."""
        counts: set[int] = set()
        for _, gen, n in self._slices_in(low):
            counts.add(n)
            shape = self._slice_shape(gen, n)
            if shape is not None:
                counts.add(shape[0] * shape[1])
        return counts

    def _slices_in(self, text: str) -> list[tuple[str, str, int]]:
        """The TPU slices `text` names, in order, each once: (as written, generation, its number)."""
        low = (text or "").lower()
        out: list[tuple[str, str, int]] = []
        for m in _SLICE.finditer(low):
            gens = self._slice_generations(m.group(1), low)
            if gens and (gens[0], int(m.group(2))) not in [(x[1], x[2]) for x in out]:  # v5e-8 is v5litepod-8
                out.append((m.group(0), gens[0], int(m.group(2))))
        return out

    @staticmethod
    def writes_shape(text: str) -> bool:
        """Whether `text` writes out an array's shape of at least a million elements ("[128,3072,4096]")."""
        return bool(_big_shapes(_plain_digits(text or "").lower()))

    def topology_named(self, text: str) -> str | None:
        """The libtpu topology of the one slice `text` names ("v4-8" -> "v4:2x2x1"), for code that
        compiles for it deviceless; None where it names none or several."""
        named = {(gen, n) for _, gen, n in self._slices_in(text)}
        if len(named) != 1:
            return None
        gen, n = named.pop()
        hw, shape = self.figures.gens.get(gen), self._slice_shape(gen, n)
        if hw is None or shape is None or shape[0] < 1 or shape[0] & (shape[0] - 1):
            return None  # (a chip count that is no power of two: no grid guessed)
        doublings = shape[0].bit_length() - 1
        if hw.topology_dims == 3:  # 2x2x1, 2x2x2, 2x2x4, 2x4x4, 4x4x4, 4x4x8 ...
            if doublings < 2:
                return None
            grid = [2, 2, 1]
            for n in range(doublings - 2):
                grid[2 if n == 0 else (2, 1, 0)[(n - 1) % 3]] *= 2
        else:  # 2x2, 2x4, 4x4, 4x8 ... (2x2 the smallest libtpu compiles for)
            if doublings < 2:
                return None
            grid = [1, 1]
            for n in range(doublings):
                grid[n % 2] *= 2
            grid = sorted(grid)
        return f"{hw.topology_prefix}:{'x'.join(map(str, grid))}"

    def _slice_generations(self, written: str, low: str) -> list[str]:
        """The generations a slice's prefix names; a bare family ("v5-256") is the one of that family
        the text names in full ("v5-256 (v5e)"), where it names exactly one."""
        gens = self.figures.generations_in(written)
        if written.rstrip("0123456789") == "v" and gens:  # "v5": v5e or v5p, as the text says
            family = [g for g in self.figures.generations_in(low) if g.lower().startswith(written) and g != written]
            named = [g for g in family if re.search(rf"(?<![a-z0-9]){re.escape(g.lower())}(?![a-z0-9])", low)]
            if len(set(named)) == 1:
                return named[:1]
        return gens

    def _slice_shape(self, gen: str, n: int) -> tuple[int, int, int, int] | None:
        """A slice of `gen` whose name says `n`: its chips, the JAX devices per chip (one where JAX
        runs megacore or the chip has one core), each device's usable HBM and the cores per chip;
        None where the figures are not recorded."""
        f, hw = self.figures.data.generations.get(gen), self.figures.gens.get(gen)
        if f is None or f.slice_counts is None or f.cores_per_chip is None or hw is None or not hw.hbm_reported:
            return None
        cores = int(f.cores_per_chip.value)
        chips = max(1, n // cores) if f.slice_counts.value == "cores" else n
        per_chip = 1 if f.megacore is not None else hw.devices_per_chip
        return chips, per_chip, parse_size(hw.hbm_reported) * (hw.devices_per_chip // per_chip), cores

    def _slices(self, text: str, language: str, used: int | None = None,
                log_device: tuple[str | None, int | None] | None = None) -> list[FigureAnswer]:
        """Each slice named: its chips (what the number in its name counts), the devices JAX shows
        (one per TensorCore, or one per chip where JAX runs megacore) and their usable HBM; with the
        user's log's program (`used` per device), whether it fits each."""
        out = []
        for name, gen, n in self._slices_in(text):
            shape = self._slice_shape(gen, n)
            if shape is None:
                continue
            chips, per_chip, per_device, cores = shape
            f = self.figures.data.generations[gen]
            counts = (self._msg("slice_counts_cores", language, n=n, cores=cores) if f.slice_counts.value == "cores"
                      else self._msg("slice_counts_chips", language, n=n))
            view = self._msg("slice_device_chip" if per_chip == 1 else "slice_device_core", language)
            # the log's own capacity where the log is from this generation (older logs print the raw
            # HBM, "of 8.00G", where a deviceless compile measures 7.48): one capacity in one answer
            cap = (log_device[1] if used and log_device and log_device[1] and log_device[0] == _tpu_label(gen)
                   else per_device)
            text_ = self._msg("slice_size", language, slice=name, chips=_num(chips), counts=counts,
                              devices=_num(chips * per_chip), view=view, per_device=format_bytes(cap),
                              public=f.hbm_public.value)
            if used:
                text_ = self._join([text_, self._msg("slice_fits", language, used=format_bytes(used),
                                                     left=format_bytes(cap - used)) if used <= cap
                                    else self._msg("slice_over", language, used=format_bytes(used),
                                                   over=format_bytes(used - cap))], language)
            out.append(FigureAnswer(kind=KIND, subject=f"slice {name}", text=text_,
                                    value_bytes=int(per_device * chips * per_chip), sources=["measured"],
                                    cite=TRAINING_CITE))
        return out

    def _donated(self, s: Stated, language: str) -> FigureAnswer | None:
        """What buffer donation saves, asked beside a model's size: the float32 weights and the
        optimizer's moments that the step takes and returns (the old copy no longer lives beside
        the new one)."""
        params = s.values.get("params")
        if not {"donation", "saving"} <= s.cues or not params or params < 1e6 or params > 1e13:
            return None
        opt = s.optimizer or self.data.optimizers[0]
        per_param = 4 + 4 * opt.moments
        size = params * per_param
        text = self._msg("donated_state", language, params=_count(params), per_param=per_param,
                         optimizer=opt.name, moments=opt.moments, saving=format_bytes(size))
        if s.optimizer is None:
            text = self._join([text, self._msg("assumed", language, what=opt.name)], language)
        return FigureAnswer(kind=KIND, subject="donated_state", text=text, value_bytes=int(size),
                            sources=["computed"], cite=DONATION_CITE)

    def _batch_step(self, s: Stated, language: str, saving: float | None = None) -> FigureAnswer | None:
        """A larger batch asked about with the memory one sample takes: what the step adds, and
        against what donation frees (`saving`) when that is asked beside it."""
        per_sample, old, new = (s.values.get(k) for k in ("per_sample", "batch_from", "batch"))
        if not per_sample or not old or not new or new <= old:
            return None
        delta = int(new - old)
        extra = delta * per_sample
        parts = [self._msg("batch_step", language, batch_from=_num(old), batch=_num(new), delta=delta,
                           per_sample=format_bytes(per_sample), extra=format_bytes(extra))]
        if saving:
            values = dict(extra=format_bytes(extra), saving=format_bytes(saving), net=format_bytes(abs(saving - extra)))
            parts.append(self._msg("batch_step_donated", language, batch=_num(new), batch_from=_num(old), **values)
                         if saving > extra else self._msg("batch_step_donated_short", language, **values))
        return FigureAnswer(kind=KIND, subject="batch_step", text=self._join(parts, language), value_bytes=int(extra),
                            sources=["computed"], cite=DONATION_CITE if saving else TRAINING_CITE)

    def _left_after(self, turn: str, earlier: str, lines: list[FigureAnswer], language: str) -> list[FigureAnswer]:
        """"After the weights plus 384 MiB reserved, how much is left per chip? and with 1921 MiB?":
        the device's memory less the weights' share less each amount the newest turn names, one line
        per amount, in place of the weights' line (which said what is left before them)."""
        said = self.read(turn)
        if "left" not in said.cues:
            return lines
        s = self.read(f"{earlier}\n{turn}" if earlier else turn)
        memory, devices = s.device_memory, s.devices or 1
        weights = next((a for a in lines if a.subject == "weights" and a.value_bytes), None)
        if weights is None:  # a follow-up restating the model: its weights, as the conversation gives them
            weights = next((a for a in self._answer(f"{earlier}\n{turn}" if earlier else turn, language, True)
                            if a.subject == "weights" and a.value_bytes), None)
        if weights is None or not memory or s.gpu:  # (a GPU's pool and what lies outside it: not this sum)
            return lines
        total = weights.value_bytes
        named = said.state_dtype or said.dtype  # the weights in the dtype this turn names ("with fp8 weights")
        if named and s.values.get("params"):
            total = s.values["params"] * named.bytes
        share = total / devices if devices > 1 and (total > memory or "shard_asked" in s.cues
                                                   or s.values.get("model_axis")) else total
        low = _plain_digits(turn).lower()
        amounts = [float(m.group(1)) * (1 << 20) for m in _MIB.finditer(low)]
        amounts += [float(m.group(1)) * (1 << 30) for m in _GB.finditer(low)]
        # (not the device's own capacity said again, per chip or for the slice: "4 chips × 32GB = 128GB")
        amounts = [a for a in amounts if a > 0 and all(abs(a - x) > 0.01 * x for x in (memory, share, total))
                   and all(abs(a - k * memory) > 0.05 * k * memory for k in {1, devices})]
        # (a server told to use only a share, "--gpu-memory-utilization=0.98": the memory read is that share already)
        util = s.values.get("mem_utilization")
        usable, label = memory, s.memory_label if util and s.memory_label else format_bytes(memory)
        if util and 0.3 <= util < 1:
            whole = memory / util  # the device's own memory, said again ("jax reports 94.74 GiB per device"): no amount
            amounts = [a for a in amounts if abs(a - whole) > 0.01 * whole]
            shares = sorted({float(m.group(1)) for m in _SHARE_DECIMAL.finditer(low) if 0.3 <= float(m.group(1)) < 1},
                            reverse=True)
            if len(shares) >= 2 and not amounts:
                # "at 0.9 vs 0.55": each share's budget, what it leaves outside for the compiled programs, and
                # what is left of it for the KV cache after the weights
                rows = [self._msg("left_at_utilization", language, share_pct=f"{u:g}", budget=format_bytes(u * whole),
                                  whole=format_bytes(whole), outside=format_bytes((1 - u) * whole),
                                  weights=format_bytes(share), kv=format_bytes(u * whole - share))
                        for u in shares if u * whole > share]
                if rows:
                    text = self._msg("left_at_utilization_lead", language,
                                     lines=_LIST_SEPARATOR.get(language, "; ").join(rows))
                    line = FigureAnswer(kind=KIND, subject="left_after", text=text,
                                        value_bytes=int(shares[0] * whole - share), sources=["computed"], cite=weights.cite)
                    return [line, *(a for a in lines if a is not weights)]
        if share >= usable or not (amounts or util):
            return lines
        parts = []
        if not amounts:  # "with fp8 weights and 0.98, how much is left per chip for the KV cache?"
            parts.append(self._msg("left_after_weights", language, memory=label, share=format_bytes(share),
                                   rest=format_bytes(usable - share)))
        for extra in amounts:
            values = dict(memory=label, share=format_bytes(share), extra=format_bytes(extra))
            parts.append(self._msg("left_after", language, rest=format_bytes(usable - share - extra), **values)
                         if share + extra <= usable else
                         self._msg("left_after_over", language, over=format_bytes(share + extra - usable), **values))
        text = self._msg("left_after_lead", language, lines=_LIST_SEPARATOR.get(language, "; ").join(parts))
        line = FigureAnswer(kind=KIND, subject="left_after", text=text,
                            value_bytes=int(usable - share - (amounts[0] if amounts else 0)),
                            sources=["computed"], cite=weights.cite)
        return [line, *(a for a in lines if a is not weights)]

    def _kv_beside_state(self, turn: str, earlier: str, lines: list[FigureAnswer], language: str) -> list[FigureAnswer]:
        """"and with a KV cache (28 layers, ..., 64 sequences) too, how much is left per chip?" in a
        conversation sizing a training state: the cache's share per device beside the state's (and its
        weight copies'), what is left of each device, first."""
        kv = next((a for a in lines if a.subject == "kv_cache" and a.value_bytes), None)
        if kv is None or "left" not in self.read(turn).cues:
            return lines
        both = f"{earlier}\n{turn}" if earlier else turn
        s = self.read(both)
        if not s.values.get("batch") or not s.device_memory or s.gpu:  # (without a batch the line is per sequence)
            return lines
        state = next((a for a in lines if a.subject == "training_state" and a.value_bytes), None) or next(
            (a for a in self._answer(both, language, True, turn=turn) if a.subject == "training_state" and a.value_bytes),
            None)
        if state is None:
            return lines
        devices, memory = s.devices or 1, s.device_memory
        per_state, per_kv = state.value_bytes / devices, kv.value_bytes / devices
        need = per_state + per_kv
        values = dict(kv=format_bytes(per_kv), state=format_bytes(per_state), memory=format_bytes(memory))
        text = (self._msg("state_kv_left", language, left=format_bytes(memory - need), **values) if need <= memory
                else self._msg("state_kv_over", language, need=format_bytes(need), over=format_bytes(need - memory),
                               **values))
        line = FigureAnswer(kind=KIND, subject="state_kv_left", text=text,
                            value_bytes=int(memory - need), sources=["computed"], cite=TRAINING_CITE)
        return [line, *lines]

    def _data_on_host(self, turn: str, earlier: str, lines: list[FigureAnswer], language: str) -> list[FigureAnswer]:
        """A dataset put on the GPU whole that is larger than the card: no pool share fits it; the data
        stays on the host and goes over one batch at a time (with what a batch of rows takes)."""
        s = self.read(f"{earlier}\n{turn}" if earlier else turn)
        tensor = next((a for a in lines if a.subject == "tensor" and a.value_bytes), None)
        if (tensor is None or "dataset" not in s.cues or not (s.gpu and s.card_memory)
                or tensor.value_bytes <= MAX_POOL_SHARE * s.card_memory):
            return lines
        shapes = [[int(d) for d in re.findall(r"\d+", m.group(0))] for m in _SHAPE.finditer(_plain_digits(turn).lower())]
        if not shapes or shapes[-1][0] < DATA_BATCH_ROWS:
            return lines
        row = tensor.value_bytes / shapes[-1][0]
        extra = self._msg("data_on_host", language, card=format_bytes(s.card_memory),
                          most=format_bytes(MAX_POOL_SHARE * s.card_memory), batch_rows=_grouped(DATA_BATCH_ROWS, language),
                          batch_size=format_bytes(row * DATA_BATCH_ROWS))
        return [tensor.model_copy(update={"text": self._join([tensor.text, extra], language)}) if a is tensor else a
                for a in lines]

    def _tensor_per_item(self, turn: str, lines: list[FigureAnswer], language: str) -> list[FigureAnswer]:
        """A shape sized whole and asked for one item too ("and for one individual alone?"): the slice
        along its first axis (a population, a batch of samples)."""
        tensor = next((a for a in lines if a.subject == "tensor" and a.value_bytes), None)
        if tensor is None or "per_item" not in self.read(turn).cues:
            return lines
        big = _big_shapes(_plain_digits(_bind_symbols(turn)).lower())
        if not big or big[-1][1][0] < 2:
            return lines
        dims = big[-1][1]
        if tensor.value_bytes / math.prod(dims) not in (0.5, 1, 2, 4, 8, 16):
            return lines  # (the line sized something else: this shape times layers, or several shapes)
        extra = self._msg("tensor_per_item", language, count=_grouped(dims[0], language),
                          shape="[" + ", ".join(str(d) for d in dims[1:]) + "]",
                          size=format_bytes(tensor.value_bytes / dims[0]))
        return [tensor.model_copy(update={"text": self._join([tensor.text, extra], language)}) if a is tensor else a
                for a in lines]

    def _tensor_part(self, turn: str, lines: list[FigureAnswer], language: str) -> list[FigureAnswer]:
        """A shape whose axis the text counts with a word ("75 transmits") taken a part at a time ("15
        transmits at a time"): the intermediate's size for that part."""
        tensor = next((a for a in lines if a.subject == "tensor" and a.value_bytes), None)
        if tensor is None:
            return lines
        low = _plain_digits(turn).lower()
        big = _big_shapes(low)
        if not big:
            return lines
        dims = big[-1][1]
        counted: dict[str, list[int]] = {}
        for p in _SIZE_AND_WORD.finditer(low):
            if p.group(2) not in _NOT_AXIS_WORDS:
                counted.setdefault(p.group(2), []).append(int(p.group(1)))
        for word, numbers in counted.items():
            whole = next((n for n in numbers if n in dims), None)
            part = next((n for n in numbers if whole and 0 < n < whole), None)
            if whole and part:
                extra = self._msg("tensor_part", language, part=part, whole=whole, word=word,
                                  chunk=format_bytes(tensor.value_bytes * part / whole))
                return [tensor.model_copy(update={"text": self._join([tensor.text, extra], language)}) if a is tensor
                        else a for a in lines]
        return lines

    def _seq_growth(self, text: str, turn: str, language: str) -> FigureAnswer | None:
        """Two sequence lengths the conversation states, the newest turn naming one (a run that
        worked at 512, one that fails at 16384): how much what grows with S, and with S², grew."""
        patterns = self._quantities.get("seq", [])
        low, own = _plain_digits(text).lower(), _plain_digits(turn).lower()
        def lengths(t: str) -> list[int]:
            found = []
            for p, c in patterns:
                for m in c.finditer(t):
                    raw = m.group(1).replace(" ", "")
                    value = float(raw[:-1]) * (p.k_scale or 1) if raw.endswith("k") else float(raw)
                    found.append(int(value * p.scale))
            return [n for n in found if n >= 128]  # (a run that worked at 512 counts)
        mine, every = lengths(own), sorted(set(lengths(low)))
        # (a length that worked beside the one that fails: not a prompt and a context named together)
        worked = any(p.search(low) for p in self._cues.get("worked_before", []))
        if not mine or len(every) < 2 or not worked:
            return None
        old, new = every[0], every[-1]
        if new < 4 * old:
            return None
        return FigureAnswer(kind=KIND, subject="seq_growth", text=self._msg(
            "seq_growth", language, old=_num(old), new=_num(new), linear=_num(round(new / old, 2)),
            square=_num(round((new / old) ** 2, 2)), head_scores=format_bytes(new * new * 2)),
            sources=["computed"], cite=SCORES_CITE)

    def _smem_table(self, turn: str, language: str, earlier: str = "") -> FigureAnswer | None:
        """A table passed by scalar prefetch (or kept in SMEM) with its element count or shape: its
        bytes against a core's SMEM (about 1 MiB from v4 on), the most entries of its dtype that fit,
        and, over it, how many pieces or which narrower dtype bring it under. A paged cache's page
        table is its sequences × (the cache's length / the page size), from the conversation's figures
        ("max-model-len 16384, page size 16, max-num-seqs 256", then "and with page size 128?")."""
        s = self.read(turn)
        whole = self.read(f"{earlier}\n{turn}") if earlier else s
        if "smem_named" not in s.cues and not ("smem_named" in whole.cues and "page_size" in s.values):
            return None
        low = _plain_digits(turn).lower()
        counts = [int(float(m.group(1))) for m in _ELEMENT_COUNT.finditer(low)]
        if not counts:
            counts = [math.prod(_dims_of(m)) for m in _SHAPE.finditer(low) if math.prod(_dims_of(m)) >= 1000]
        pages = None
        v = whole.values
        if not counts and v.get("page_size") and v.get("max_len") and v.get("batch"):
            pages = math.ceil(v["max_len"] / v["page_size"])
            counts = [int(v["batch"]) * pages]
        if not counts:
            return None
        entries = counts[-1]
        dtype = s.dtype if s.dtype is not None and s.dtype.bytes <= 4 else None
        size_b, name = (dtype.bytes, dtype.name) if dtype else (4, "int32")
        size = entries * size_b
        most = int(SMEM_BYTES // size_b)
        values = dict(entries=_grouped(entries, language), bytes=_num(size_b), dtype=name, size=format_bytes(size),
                      smem=format_bytes(SMEM_BYTES), most=_grouped(most, language))
        parts = math.ceil(size / (SMEM_BYTES * SMEM_TABLE_SHARE))
        per = math.ceil(entries / parts)
        split = dict(parts=parts, per=_grouped(per, language), per_size=format_bytes(per * size_b),
                     half=format_bytes(entries * 2))
        if size <= SMEM_BYTES - SMEM_SCALARS:
            tail = self._msg("smem_table_fits", language, left=format_bytes(SMEM_BYTES - size))
        elif size <= SMEM_BYTES:  # all of it: the kernel's other scalars do not fit beside it
            tail = self._msg("smem_table_full", language, **split)
        else:
            tail = self._msg("smem_table_over", language, over=format_bytes(size - SMEM_BYTES), **split)
        lead = ([self._msg("page_table", language, seqs=_num(v["batch"]), max_len=_num(v["max_len"]),
                           page=_num(v["page_size"]), pages=_num(pages), entries=_grouped(entries, language))]
                if pages else [])
        text = self._join([*lead, self._msg("smem_table", language, **values), tail], language)
        return FigureAnswer(kind=KIND, subject="smem_table", text=text, value_bytes=int(size),
                            sources=["computed"], cite=SMEM_CITE)

    def _microbatches(self, turn: str, earlier: str, language: str) -> FigureAnswer | None:
        """A batch split into the number of microbatches the newest turn states: the examples per
        microbatch and per device, how much the activations change from the number an earlier turn
        (or the same one) stated before, and when the optimizer updates."""
        patterns = self._quantities.get("microbatches", [])
        if _last(patterns, turn.lower()) is None:
            return None
        whole = f"{earlier}\n{turn}" if earlier else turn
        s = self.read(whole)
        k, batch = int(s.values.get("microbatches") or 0), s.values.get("batch")
        if k < 2 or not batch or batch <= k or not float(batch).is_integer():
            return None
        batch = int(batch)
        counts = [int(float(m.group(1))) for _, c in patterns for m in c.finditer(whole.lower())]
        before = [n for n in counts if n != k and n >= 1]
        micro = batch / k
        # (a setup compared with, "tested on 8x V100", is not the asker's own one device)
        devices = s.devices if s.devices and s.devices > 1 and "one_device_only" not in s.cues else None
        if devices:
            parts = [self._msg("microbatches", language, batch=batch, k=k, micro=_num(round(micro, 2)),
                               devices=devices, per_device=_num(round(micro / devices, 2)))]
        else:
            parts = [self._msg("microbatches_one", language, batch=batch, k=k, micro=_num(round(micro, 2)))]
        if batch % k:
            parts.append(self._msg("microbatches_uneven", language, batch=batch, k=k))
        elif devices and micro % devices:
            parts.append(self._msg("microbatches_uneven_devices", language, micro=_num(micro), devices=devices))
        if before:
            old = before[-1]
            parts.append(self._msg("microbatches_change", language, k_old=old, k=k,
                                   micro_old=_num(round(batch / old, 2)), micro=_num(round(micro, 2)),
                                   ratio=_num(round(old / k, 2))))
        calls = re.search(r"multisteps|multi_steps|every_k_schedule", whole.lower())
        parts.append(self._msg("microbatches_update_calls" if calls else "microbatches_update_step", language, k=k))
        return FigureAnswer(kind=KIND, subject="microbatches", text=self._join(parts, language),
                            sources=["computed"], cite=ACCUMULATION_CITE)

    def _accumulator(self, s: Stated, language: str) -> FigureAnswer | None:
        """The float32 gradient accumulator that gradient accumulation adds, when it is named
        beside a model size."""
        params = s.values.get("params")
        if "accumulation" not in s.cues or not params or params < 1e6 or params > 1e13:
            return None
        devices = s.devices or 1
        size = params * 4
        text = self._msg("accumulator", language, params=_count(params), accumulator=format_bytes(size),
                         devices=devices if devices > 1 else "N",  # no count named: "sharded over N", not over 1
                         accumulator_sharded=format_bytes(size / devices) if devices > 1 else f"{format_bytes(size)} / N")
        if devices > 1 and s.device_memory and (s.optimizer is not None or "training" in s.cues):
            # with the training state beside it, per device: float32 (16 B + a 4 B accumulator), and
            # the mixed setup the text names (bfloat16 weights and gradients, float32 moments, the
            # accumulator in the weights' dtype)
            moments = (s.optimizer or self.data.optimizers[0]).moments
            setups = [(4 + 4 + 4 * moments, 4, "float32")]
            if {"bfloat16", "float32"} <= s.dtypes_named:
                setups.append((2 + 2 + 4 * moments, 2, "bfloat16"))
            # (per device as the text runs it: whole on each under plain data parallel, 1/N where sharding is named)
            spread = devices if "sharding_named" in s.cues or s.values.get("fsdp_axis") else 1
            for per_param, acc_bytes, name in setups:
                state, acc = params * per_param / spread, params * acc_bytes / spread
                total, values = state + acc, dict(per_param=per_param, dtype=name, state=format_bytes(state),
                                                 acc=format_bytes(acc), total=format_bytes(state + acc),
                                                 memory=s.memory_label or format_bytes(s.device_memory))
                text = join_sentences([text, self._msg(
                    "accumulator_total_fits", language, left=format_bytes(s.device_memory - total), **values)
                    if total <= s.device_memory else self._msg(
                    "accumulator_total_over", language, over=format_bytes(total - s.device_memory), **values)],
                    language)
        return FigureAnswer(kind=KIND, subject="accumulator", text=text, value_bytes=int(size),
                            sources=["computed"], cite=ACCUMULATION_CITE)

    def _params_line(self, s: Stated, language: str) -> FigureAnswer | None:
        """The parameter count the text's own dims give, each part of it shown."""
        f = s.from_dims
        if f is None:
            return None
        n = _num
        formula = (f"Q, K, V, O: {n(f['d'])} × {n(f['head_dim'])} × ({n(f['heads'])} + {n(f['kv'])} + {n(f['kv'])} + "
                   f"{n(f['heads'])}); MLP: {3 if f['gated'] else 2} × {n(f['d'])} × {n(f['ff'])}; "
                   f"embeddings: {1 if f['tied'] else 2} × {n(f['vocab'])} × {n(f['d'])}")
        named = f.get("named")
        differs = named and abs(named - f["params"]) > 0.05 * f["params"]
        g = lambda x: _grouped(x, language)  # noqa: E731 (29,384,245,248: a count read digit by digit)
        text = self._msg("params_from_dims", language, params=f"{_count(f['params'])} ({g(f['params'])})",
                         layers=n(f["layers"]), attention=g(f["attention"]), mlp=g(f["mlp"]),
                         per_layer=g(f["attention"] + f["mlp"]), embeddings=g(f["embeddings"]), formula=formula,
                         named=self._msg("params_named_differs", language, named=_count(named)) if differs else "")
        return FigureAnswer(kind=KIND, subject="params_from_dims", text=text, value_bytes=None,
                            sources=["computed"], cite=ANALYSIS_CITE)

    def _model(self, s: Stated, language: str, asked: bool, turn_cues: set[str] | None = None) -> FigureAnswer | None:
        """The weights or the training state of the model the text sizes, against the devices named.
        `turn_cues`: what the conversation's last turn itself says, when it is a follow-up."""
        params = s.values.get("params")
        if not params or params < 1e6 or params > 1e13:
            return None
        if "smem_named" in s.cues:
            return None  # a kernel's SMEM running out: the model's size is not what is asked
        if "vmem_named" in s.cues and ("params" in s.from_model or not (
                {"training", "inference", "memory_named", "optimizer_state", "params_only", "full_training"} & s.cues)):
            # a kernel's VMEM asked about: the model's name ("Llama-3.2-3B") says what runs, not a size asked
            return None
        known = s.device_memory is not None
        if {"no_training", "params_only"} & s.cues and s.optimizer is not None and "full_training" in s.cues:
            # "what do the weights alone weigh, and a full fine-tune with adamw?": both, the weights first
            # the state in the dtype said last ("adamw in fp32"), not every dtype the weights were asked in
            # (mu and nu named as parts of that state are not a question about the moments alone)
            full = self._model(replace(s, cues=s.cues - {"no_training", "params_only", "mixed_precision", "optimizer_state"},
                                       dtypes_named={s.dtype.name} if s.dtype else set(s.dtypes_named),
                                       state_dtype=None if s.dtype else s.state_dtype), language, asked)
            if turn_cues is not None and not ({"no_training", "params_only", "full_training"} & turn_cues):
                return full  # a follow-up about the state ("and all in bf16, per chip?"): not the weights again
            alone = self._model(replace(s, optimizer=None, cues=s.cues - {"training", "full_training"}), language, asked)
            if alone is not None and full is not None:
                return full.model_copy(update={"text": self._join([alone.text, full.text], language)})
            return full or alone  # (one of them small beside the device and not asked: the other)
        training = ((s.optimizer is not None or "training" in s.cues)
                    and not {"no_training", "params_only"} & s.cues)  # "only the params in bf16, how much?"
        if not (known or asked):
            return None
        count = _count(params)
        assumed: list[str] = []
        parts: list[str] = []
        devices = s.devices or 1
        if training and not ("inference" in s.cues and s.optimizer is None and "training" not in s.cues):
            opt = s.optimizer or self.data.optimizers[0]
            if s.optimizer is None:
                assumed.append(opt.name)
            per_param, per_half = (2 + opt.moments) * 4, (2 + opt.moments) * 2
            state, half = params * per_param, params * per_half
            dtype = s.state_dtype or s.dtype  # the state's own, when said, over the activations'
            if dtype is not None and dtype.bytes <= 2 or ("bfloat16" in s.dtypes_named and s.state_dtype is None):
                parts.append(self._msg("training", language, params=count, per_param=per_param,
                                       optimizer=opt.name, moments=opt.moments, state=format_bytes(state),
                                       per_param_half=per_half, state_half=format_bytes(half)))
            else:  # no 16-bit type named: the all-bfloat16 figure would read as another part of the state
                parts.append(self._msg("training_f32", language, params=count, per_param=per_param,
                                       optimizer=opt.name, moments=opt.moments, state=format_bytes(state)))
            need = half if (dtype is not None and dtype.bytes <= 2) else state
            # bf16 and f32 both named: the usual mixed precision (bf16 weights and gradients,
            # f32 moments) is what is meant
            if {"bfloat16", "float32"} <= s.dtypes_named and opt.moments and "mixed_precision" in s.cues:
                per_mixed = 2 + 2 + 4 * opt.moments
                need = params * per_mixed
                parts.append(self._msg("training_mixed", language, per_param_mixed=per_mixed,
                                       state_mixed=format_bytes(need),
                                       state_master=format_bytes(params * (per_mixed + 4))))
            listed = "grads" in s.state_parts and len(s.state_parts) >= 2 and bool(opt.moments)
            if listed:
                # the parts listed with their dtypes ("f32 master + Adam f32 + bf16 grads"): their own sum
                # (a part not given a dtype is float32)
                w, g = s.state_parts.get("weights"), s.state_parts["grads"]
                m = s.state_parts.get("moments")
                wb, gb, mb = (w.bytes if w else 4), g.bytes, (m.bytes if m else 4)
                per_parts = wb + gb + opt.moments * mb
                need = params * per_parts
                parts = [self._msg("training_parts", language, params=count, wb=_num(wb), gb=_num(gb), mb=_num(mb),
                                   moments=opt.moments, wd=w.name if w else "float32", gd=g.name,
                                   md=m.name if m else "float32", per_param=_num(per_parts),
                                   state=format_bytes(need), optimizer=opt.name)]
            if "mu_bf16" in s.cues and opt.moments == 2 and need == state:
                # "and with mu_dtype=jnp.bfloat16?": the first moment in 2 bytes, the rest as it was
                need = params * (per_param - 2)
                parts.append(self._msg("training_mu_bf16", language, params=count, per_param=per_param - 2,
                                       state=format_bytes(need)))
            mixed = {"bfloat16", "float32"} <= s.dtypes_named and "mixed_precision" in s.cues
            if "nu_dtype" in s.cues and "full_training" in s.cues:
                parts.append(self._msg("nu_dtype", language))  # (the moments' own line is not shown)
            if ("optimizer_state" in s.cues and opt.moments == 2 and (not mixed or "offload" in s.cues)
                    and "full_training" not in s.cues and not listed):  # (the parts listed: their sum answers)
                # mu and nu asked about: said first (not a mixed setup that only names its f32 moments:
                # its per-parameter sum is the answer; unless the moments are what is moved to the host)
                first = [self._msg("optimizer_state", language, optimizer=opt.name, moments=opt.moments,
                                   opt_state=format_bytes(params * 4 * opt.moments), mu_saving=format_bytes(params * 2))]
                if devices > 1:
                    first.append(self._msg("optimizer_state_sharded", language, devices=devices,
                                           opt_state=format_bytes(params * 4 * opt.moments / devices),
                                           mu_saving=format_bytes(params * 2 / devices)))
                if "nu_dtype" in s.cues:
                    first.append(self._msg("nu_dtype", language))
                if "offload" in s.cues and known and devices == 1:  # "mu, nu to pinned_host: does it fit?"
                    kept = need - params * 4 * opt.moments if need == state else None
                    if kept is not None:
                        where = dict(kept=format_bytes(kept), memory=s.memory_label or format_bytes(s.device_memory),
                                     device=s.device or "")
                        first.append(self._msg("offloaded_moments", language, left=format_bytes(s.device_memory - kept),
                                               **where) if kept <= s.device_memory else
                                     self._msg("offloaded_moments_over", language,
                                               over=format_bytes(kept - s.device_memory), **where))
                parts[:0] = first
            claimed = s.values.get("per_param_claim")
            if claimed and claimed > per_param and need == state:
                # "I read Adam is 20 B per parameter": what that counts beyond this setup's own
                parts.append(self._msg("per_param_claim", language, claimed=_num(claimed), per_param=per_param,
                                       optimizer=opt.name, moments=opt.moments,
                                       claimed_total=format_bytes(params * claimed)))
            if s.baseline_optimizer is not None or s.baseline_dtype is not None:
                # "how much do I save compared with AdamW fp32?": that baseline's state beside this one
                base_opt = s.baseline_optimizer or opt
                base_bytes = s.baseline_dtype.bytes if s.baseline_dtype else 4
                base = params * (2 + base_opt.moments) * base_bytes
                if base > need:
                    name = f"{base_opt.name} {s.baseline_dtype.name if s.baseline_dtype else 'float32'}"
                    parts.append(self._msg("training_compared", language, baseline=name,
                                           per_param=_num((2 + base_opt.moments) * base_bytes),
                                           state=format_bytes(base), saving=format_bytes(base - need)))
            total = state
            if "ema" in s.cues and "ema_off" not in s.cues:  # "and EMA is on too": one more copy of the weights
                ema_bytes = 2 if need == half and half < state else 4
                need, total = need + params * ema_bytes, total + params * ema_bytes
                parts.append(self._msg("training_ema", language, ema=format_bytes(params * ema_bytes), params=count,
                                       bytes=ema_bytes, need=format_bytes(need)))
            copies = [c for c in WEIGHT_COPIES if c in s.cues]
            if copies:  # "and a bf16 reference model too": another bfloat16 copy of the weights each
                extra = params * 2 * len(copies)
                need, total = need + extra, total + extra
                what = _NAME_SEPARATOR.get(language, ", ").join(self._msg(f"copy_{c}", language) for c in copies)
                parts.append(self._msg("training_copies", language, copies=len(copies), what=what, params=count,
                                       extra=format_bytes(extra), need=format_bytes(need)))
            # a log of the user's own run and a model known by its name only, its state sharded to a
            # small share of each device: the log says what fills the device, not this arithmetic
            if (s.from_log and "params" in s.from_model and devices > 1 and "optimizer_state" not in s.cues
                    and need / devices <= SMALL_SHARE * (s.device_memory or 0)):
                return None
            # not asked, and far from the card's size: beside the point, unless the question says
            # it ran out of memory (then that the state is not what fills the device is an answer)
            if known and not asked and "oom" not in s.cues and need <= SMALL_SHARE * (s.device_memory or 0):
                return None
            axis = s.values.get("model_axis")
            if known and axis and "replicated_on_data" in s.cues and 1 < axis < devices:
                # "a 2D mesh, the params split along model only, replicated over data": a share per model device
                per = need / axis
                verdict = (self._msg("model_axis_fits", language, left=format_bytes(s.device_memory - per))
                           if per <= s.device_memory else
                           self._msg("model_axis_over", language, over=format_bytes(per - s.device_memory)))
                parts.append(self._msg("model_axis_only", language, axis=_num(axis), need=format_bytes(need),
                                       per_device=format_bytes(per), memory=format_bytes(s.device_memory),
                                       device=s.device or "", verdict=verdict))
            elif known:
                # one tensor kept replicated: the user's own layout first, the fully sharded one after
                kept = self._replicated_part(s, language, need / params, params, devices)
                parts += [kept] if kept else []
                parts += self._fit(s, language, need, devices, training=True)
                if need == half and half < state and state / devices > (s.device_memory or 0):
                    # the fit above is the all-bfloat16 one: the float32 state asked beside it does not fit
                    parts.append(self._msg("training_f32_over", language, state=format_bytes(state / devices),
                                           memory=s.memory_label or format_bytes(s.device_memory),
                                           over=format_bytes(state / devices - s.device_memory)))
                if s.log_used and devices > 1 and s.log_used >= need and not kept:
                    # the log's per-device figure is above the whole state: one device holds nearly all of it
                    parts.append(self._msg("state_unsharded", language, used=format_bytes(s.log_used),
                                           state=format_bytes(need), devices=_num(devices),
                                           per_device=format_bytes(need / devices),
                                           rest=format_bytes(s.log_used - need / devices)))
                # out of memory although the state fits, and no donation said: the old and the new
                # weights and moments alive together at the update
                kept_per_param = 4 + 4 * opt.moments if need == state else 2 + 2 * opt.moments if need == half else 0
                keep = params * kept_per_param  # the old weights and moments (not the gradients)
                if ("oom" in s.cues and "donation" not in s.cues and keep
                        and need / devices <= (s.device_memory or 0) < (need + keep) / devices):
                    parts.append(self._msg("no_donation", language, extra=format_bytes(keep / devices),
                                           total=format_bytes((need + keep) / devices)))
                elif "donation_off" in s.cues and keep:  # "and without donating the state, how much more?"
                    parts.append(self._msg("without_donation", language, extra=format_bytes(keep / devices),
                                           total=format_bytes((need + keep) / devices)))
        else:
            # "int8 compared with bf16": each dtype named, the widest first; else the last one named
            named = list({d.name: d for d, _ in self._dtypes if d.name in s.dtypes_named}.values())
            # (not when the KV cache has a dtype of its own: the dtypes are then the cache's and the weights')
            dtypes = (sorted(named, key=lambda d: -d.bytes) if len({d.bytes for d in named}) > 1 and not s.kv_dtype
                      else [s.dtype] if s.dtype else [])
            sampled = {"logits", "inference"} <= s.cues and "training" not in s.cues
            if sampled:
                dtypes = []  # a model sampled, its logits kept in f32: the dtype said is the logits'
            # none named: a checkpoint known by its name, one a serving engine loads, or a model sampled
            # from, is published in bfloat16; anything else is created by JAX's initializers in float32
            # (Flax, Haiku and Equinox)
            default = (2, "bfloat16") if s.model or sampled or "published_checkpoint" in s.cues else (4, "float32")
            if not dtypes:
                assumed.append(default[1])
            total = need = params * max((d.bytes for d in dtypes), default=default[0])
            if known and not asked and need <= SMALL_SHARE * (s.device_memory or 0):
                return None
            axis = s.values.get("model_axis")
            # tensor parallel inside data-parallel replicas (TP=4, DP=2 on 8 chips): a replica's chips share them
            over = int(axis) if axis and 1 < axis < devices and {"data_parallel_size", "replicated_on_data"} & s.cues else devices
            for dtype_bytes, dtype_name in [(d.bytes, d.name) for d in dtypes] or [default]:
                weights = params * dtype_bytes
                parts.append(self._msg("weights", language, params=count, bytes=_num(dtype_bytes),
                                       dtype=dtype_name, weights=format_bytes(weights)))
                if known:
                    parts += self._fit(s, language, weights, over, training=False)
        if assumed:
            parts.append(self._msg("assumed", language, what=", ".join(assumed)))
        return FigureAnswer(kind=KIND, subject="training_state" if training else "weights",
                            text=self._join(parts, language), value_bytes=int(total), sources=["computed"],
                            cite=TRAINING_CITE)

    def _replicated_part(self, s: Stated, language: str, per_param: float, params: float, devices: int) -> str | None:
        """The state per device when one tensor the text names stays replicated and the rest is
        sharded ("all matrices sharded except the 256000x2048 embedding"): that tensor's whole state
        on every device, plus a share of the rest."""
        if not s.replicated or devices < 2 or not s.device_memory:
            return None
        shape, elements = s.replicated
        if not 0 < elements < params:
            return None
        rep, rest = elements * per_param, (params - elements) * per_param / devices
        per_device, memory = rep + rest, s.device_memory
        values = dict(shape=shape, rep_params=_count(elements), rep=format_bytes(rep), devices=_num(devices),
                      rest=format_bytes(rest), per_device=format_bytes(per_device), device=s.device or "",
                      memory=s.memory_label or format_bytes(memory),
                      sharded=format_bytes(params * per_param / devices))
        if per_device > memory:
            return self._msg("replicated_part_over", language, over=format_bytes(per_device - memory), **values)
        return self._msg("replicated_part_fits", language, left=format_bytes(memory - per_device), **values)

    def _fit(self, s: Stated, language: str, need: float, devices: int, training: bool) -> list[str]:
        memory = s.device_memory or 0
        device, label = s.device or "", s.memory_label or format_bytes(memory)
        per = need / devices
        out: list[str] = []
        shown = format_bytes(need)
        # (sharding named, not only a figure asked per device: "how much per GPU?" of plain data parallel
        # is the whole state on each, said first, with the sharded figure beside it)
        sharded = devices > 1 and training and (s.values.get("fsdp_axis") or "sharding_named" in s.cues)
        if need <= memory and sharded:  # sharded, as the text says ("--fsdp-devices 2"): what each device keeps
            out.append(self._msg("fits_sharded_said", language, device=device, memory=label, devices=devices,
                                 per_device=format_bytes(per), left=format_bytes(memory - per)))
        elif need <= memory:
            out.append(self._msg("fits_one", language, device=device, memory=label, need=shown,
                                 left=format_bytes(memory - need)))
            if devices > 1:  # "and per card with FSDP over the 4?"
                out.append(self._msg("fits_sharded_replicated", language, devices=devices,
                                     per_device=format_bytes(per)))
        elif devices > 1 and per <= memory:
            if training:
                out.append(self._msg("fits_sharded", language, device=device, memory=label, devices=devices, need=shown,
                                     per_device=format_bytes(per), left=format_bytes(memory - per)))
            else:
                out.append(self._msg("weights_sharded_load", language, device=device, memory=label,
                                     devices=devices, per_device=format_bytes(per)))
                out.append(self._msg("weights_sharded_left", language, left=format_bytes(memory - per)))
        elif devices > 1:
            if training:
                out.append(self._msg("no_fit_sharded", language, device=device, memory=label, need=shown,
                                     devices=devices, per_device=format_bytes(per)))
            else:
                out.append(self._msg("weights_no_fit_one", language, device=device, memory=label))
        else:
            out.append(self._msg("no_fit_one", language, device=device, memory=label, need=shown)
                       if training else self._msg("weights_no_fit_one", language, device=device, memory=label))
        if training and memory and devices > 1 and "data_parallel" in s.cues:
            # "and plain data parallel instead of FSDP?": the whole state on every device
            verdict = (self._msg("dp_fits", language, left=format_bytes(memory - need)) if need <= memory
                       else self._msg("dp_over", language, over=format_bytes(need - memory)))
            out.append(self._msg("data_parallel_state", language, need=shown, memory=label, devices=devices,
                                 verdict=verdict, per_device=format_bytes(per)))
        if training and memory and need > memory and (devices == 1 or per > memory):
            # how many devices it takes, sharded evenly (also when the devices named are too few)
            full, half = math.ceil(need / memory), math.ceil(need / (memory / 2))
            slice_ = half if s.gpu else 1 << (half - 1).bit_length()  # TPU slices come in powers of two
            out.append(self._msg("min_devices", language, need=shown, memory=format_bytes(memory), full=full,
                                 half_memory=format_bytes(memory / 2), half=half, slice=slice_,
                                 per_device=format_bytes(need / slice_)))
        placed = min(need, per if devices > 1 else need)
        if s.gpu and s.card_memory and memory < placed <= s.card_memory:
            # over JAX's pool (the device memory above) but within the card: a larger share holds it
            out.append(self._msg("gpu_pool", language, pool=format_bytes(memory), memory=format_bytes(s.card_memory)))
        return out

    def _activations(self, s: Stated, language: str) -> FigureAnswer | None:
        """Activations kept for the backward pass, when the question gives the model's shape and
        how many [B, S, D] tensors a layer keeps; and with full remat per layer."""
        v = s.values
        layers, tensors, batch, seq, hidden = (v.get(k) for k in ("layers", "tensors", "batch", "seq", "hidden"))
        if "kv_cache" in s.cues and "inference" in s.cues and "training" not in s.cues:
            return None  # serving keeps no activations for a backward pass: the cache is what grows
        if "activations" in s.cues and not tensors and all((layers, batch, seq, hidden, v.get("heads"))):
            return self._activations_estimate(s, language)
        batch, global_note = self._device_batch(s, language)
        if "activations" in s.cues and not tensors and all((layers, batch, seq, hidden)):
            # the shape without the heads or a count of kept tensors: what full remat keeps
            dtype_bytes, dtype_name = (s.dtype.bytes, s.dtype.name) if s.dtype else (2, "bfloat16")
            one = batch * seq * hidden * dtype_bytes
            parts = [self._msg("activations_remat", language, layers=_num(layers), batch=_num(batch), seq=_num(seq),
                               hidden=_num(hidden), bytes=_num(dtype_bytes), dtype=dtype_name,
                               remat=format_bytes(layers * one), one=format_bytes(one))]
            parts += [global_note] if global_note else []
            if s.dtype is None:
                parts.append(self._msg("assumed", language, what="bfloat16"))
            return FigureAnswer(kind=KIND, subject="activations", text=self._join(parts, language),
                                value_bytes=int(layers * one), sources=["computed"], cite=ACTIVATIONS_CITE)
        if "activations" not in s.cues or not all((layers, tensors, batch, seq, hidden)):
            return None
        dtype_bytes, dtype_name = (s.dtype.bytes, s.dtype.name) if s.dtype else (2, "bfloat16")
        one = batch * seq * hidden * dtype_bytes
        parts = [self._msg("activations", language, layers=_num(layers), tensors=_num(tensors), batch=_num(batch),
                           seq=_num(seq), hidden=_num(hidden), bytes=_num(dtype_bytes), dtype=dtype_name,
                           activations=format_bytes(layers * tensors * one), remat=format_bytes(layers * one),
                           one_layer=format_bytes(tensors * one))]
        parts += [global_note] if global_note else []
        if s.dtype is None:
            parts.append(self._msg("assumed", language, what="bfloat16"))
        return FigureAnswer(kind=KIND, subject="activations", text=self._join(parts, language),
                            value_bytes=int(layers * tensors * one), sources=["computed"], cite=ACTIVATIONS_CITE)

    def device_batch(self, text: str) -> float | None:
        """The batch one device holds, as the text states it (a global batch split over the devices named)."""
        s = self.read(text)
        return self._device_batch(s, "en")[0] if s.values.get("batch") else None

    def _device_batch(self, s: Stated, language: str) -> tuple[float | None, str | None]:
        """The batch one device holds: a batch stated beside several devices, a whole multiple of
        them and not said to be per device, is the global batch (JAX's arrays are global), split
        evenly; with the line saying so, since the asker may have meant it per device."""
        batch, n = s.values.get("batch"), s.devices
        if not batch or not n or n <= 1 or "per_device_batch" in s.cues or batch < n or batch % n:
            return batch, None
        return batch / n, self._msg("batch_per_device", language, batch=_num(batch), devices=_num(n),
                                    per_device=_num(batch / n))

    def _experts(self, s: Stated, language: str) -> FigureAnswer | None:
        """A mixture of experts whose shape the text gives: the experts' weights (gate, up and down
        of each), and per device with one expert's share on each beside the other weights replicated."""
        v = s.values
        experts, layers, hidden, ffn = (v.get(k) for k in ("experts", "layers", "hidden", "ffn"))
        if not all((experts, layers, hidden, ffn)) or experts < 2:
            return None
        dtype_bytes = s.dtype.bytes if s.dtype else 2
        mats = 3  # experts as in Mixtral, DeepSeek, Qwen-MoE are gated MLPs: gate, up and down
        total = experts * layers * mats * hidden * ffn * dtype_bytes
        parts = [self._msg("experts", language, experts=_num(experts), layers=_num(layers), mats=mats,
                           hidden=_num(hidden), ffn=_num(ffn), bytes=_num(dtype_bytes), total=format_bytes(total))]
        devices = s.devices or 0
        if devices > 1 and s.device_memory:
            # the weights outside the experts: the text's count less the experts' when it is the whole
            # model's ("190B params total"), else the count itself (what it says sits beside them)
            stated, in_experts = v.get("params") or 0, experts * layers * mats * hidden * ffn
            other = (stated - in_experts if stated > in_experts else stated) * dtype_bytes
            per_chip = total / devices + other
            verdict = (self._msg("experts_fit", language, left=format_bytes(s.device_memory - per_chip))
                       if per_chip <= s.device_memory else
                       self._msg("experts_over", language, over=format_bytes(per_chip - s.device_memory)))
            parts.append(self._msg("experts_per_device", language, devices=devices,
                                   per_device=format_bytes(total / devices), other=format_bytes(other),
                                   per_chip=format_bytes(per_chip), memory=s.memory_label, verdict=verdict))
        return FigureAnswer(kind=KIND, subject="experts", text=self._join(parts, language), value_bytes=int(total),
                            sources=["computed"], cite=TRAINING_CITE)

    def _policy_weight_dots(self, turn_cues: set[str], s: Stated, language: str) -> FigureAnswer | None:
        """What `dots_with_no_batch_dims_saveable` keeps of a transformer whose shape the text gives:
        per layer the outputs of its weight matmuls (q, k, v, o and the MLP's two or three), against
        the layers' inputs alone that `nothing_saveable` keeps."""
        v = s.values
        layers, batch, seq, hidden, ffn = (v.get(k) for k in ("layers", "batch", "seq", "hidden", "ffn"))
        if "no_batch_dims_policy" not in turn_cues or not all((layers, batch, seq, hidden, ffn)):
            return None
        dtype_bytes = s.dtype.bytes if s.dtype else 2
        tokens = batch * seq
        ups = 2 if "gated_mlp" in s.cues else 1  # gate and up, or up alone; down's output is [tokens, hidden]
        per_layer = tokens * (4 * hidden + ups * ffn + hidden) * dtype_bytes
        mlp = f"{'gate, up 2' if ups == 2 else 'up 1'} × {_num(tokens)} × {_num(ffn)} + down {_num(tokens)} × {_num(hidden)}"
        carry = layers * tokens * hidden * dtype_bytes
        total = layers * per_layer
        parts = [self._msg("policy_weight_dots", language, policy="dots_with_no_batch_dims_saveable", tokens=_num(tokens),
                           hidden=_num(hidden), mlp=mlp, bytes=_num(dtype_bytes), per_layer=format_bytes(per_layer),
                           layers=_num(layers), total=format_bytes(total), carry=format_bytes(carry),
                           extra=format_bytes(total - carry))]
        if "offload" in turn_cues:  # "how much host RAM then?": the same bytes, per chip, on its host
            chips = v.get("chips_per_host") or (s.devices if "single_host" in s.cues else None)
            parts.append(self._msg("policy_offload_host", language, total=format_bytes(total), chips=_num(chips),
                                   per_host=format_bytes(chips * total)) if chips
                         else self._msg("policy_offload_per_chip", language, total=format_bytes(total)))
        return FigureAnswer(kind=KIND, subject="remat_policies", text=self._join(parts, language), value_bytes=int(total),
                            sources=["computed"], cite=ACTIVATIONS_CITE)

    def _activations_estimate(self, s: Stated, language: str) -> FigureAnswer:
        """A transformer's activations from its shape alone: the published per-layer estimate for
        16-bit activations without recomputation, s·b·h·(34 + 5·a·s/h) bytes (Korthikanti et al.
        2022, "Reducing Activation Recomputation in Large Transformer Models"), and 2·s·b·h per
        layer (its input) with every layer rematerialized."""
        v = s.values
        layers, seq, hidden, heads = (v[k] for k in ("layers", "seq", "hidden", "heads"))
        batch, global_note = self._device_batch(s, language)
        per_layer = seq * batch * hidden * (34 + 5 * heads * seq / hidden)
        remat = 2 * seq * batch * hidden * layers
        parts = [self._msg("activations_estimate", language, seq=_num(seq), batch=_num(batch), hidden=_num(hidden),
                           heads=_num(heads), per_layer=format_bytes(per_layer), layers=_num(layers),
                           total=format_bytes(per_layer * layers), remat=format_bytes(remat))]
        parts += [global_note] if global_note else []
        if s.device_memory:
            parts.append(self._share(s, per_layer * layers, language))
        return FigureAnswer(kind=KIND, subject="activations", text=self._join(parts, language),
                            value_bytes=int(per_layer * layers), sources=["computed"], cite=ACTIVATIONS_CITE)

    def _tensor(self, text: str, s: Stated, language: str, turn: str | None = None,
                requested: int | None = None) -> FigureAnswer | None:
        """The bytes of the last shape the text writes out ([32, 2048, 4096], 32x2048x4096), in the
        dtype it names (else float32, said), and in each of the types the newest turn names when it
        names several ("the bool output, and one float32 / uint32 temp of the same shape"); per
        layer times the layers it names."""
        # (not an image's resolution, "SDXL at 1024x1024", "512×512 px": that is the input's size in
        # pixels, not an array the text sizes)
        said_resolution = _RESOLUTION.search((text or "").lower())
        shapes = [m for m in _SHAPE.finditer(text or "")
                  if not (len(_dims_of(m)) == 2 and m.group(0)[0].isdigit() and (
                      said_resolution or _PIXELS_AFTER.match((text or "").lower(), m.end())))]
        if not shapes:
            return None
        # the last one large enough to matter ("[75, 128, 160000] ... 400x400 = 160000 points": not the 400x400);
        # in a kernel's question, the shape said to be its block ("BlockSpec 都是 (8192, 72)"), whatever its size
        blocks = [x for x in shapes if _BLOCK_WORD.search((text or "").lower()[max(0, x.start() - 30):x.start()])]
        block = bool(blocks) and "vmem_named" in s.cues
        m = blocks[-1] if block else next(
            (x for x in reversed(shapes) if len(_dims_of(x)) >= 2 and math.prod(_dims_of(x)) >= 1 << 20), shapes[-1])
        dims = _dims_of(m)
        channels = _CHANNELS_AFTER.match(text or "", m.end())
        if channels and int(channels.group(1)) not in dims:  # "(3308x3308, 128 canales, float32)": an axis more
            dims = [*dims, int(channels.group(1))]
        elements = 1
        for d in dims:
            elements *= d
        steps = s.values.get("steps")
        # (a loop's carry kept once per step under grad: small, times many steps, "1000×1000 over 10,000 steps")
        looped = bool(steps) and steps > 1 and "loop_named" in s.cues and steps * elements >= 1 << 20
        if len(dims) < 2 or (elements < (BLOCK_ELEMENTS_MIN if block else 1 << 20) and not looped):
            return None
        dtype_bytes, dtype_name = (s.dtype.bytes, s.dtype.name) if s.dtype else (4, "float32")
        typed = _TYPED_PREFIX.search((text or "")[max(0, m.start() - 10):m.start() + 1])
        if typed:  # XLA's own spelling before the shape ("u32[32,14336,4096]"): that element type
            dtype_name, dtype_bytes = _XLA_TYPES[typed.group(1).lower()]
        added = _added_shapes(text or "", shapes)
        if len(added) >= 2:  # "a 4000 x 2000 x 10 x 10 array plus a 20000 x 20000 matrix": both, and their sum
            return self._tensors_sum(added, dtype_bytes, dtype_name, s, language, text)
        size = elements * dtype_bytes
        shape = "[" + ", ".join(str(d) for d in dims) + "]"
        parts = [self._msg("tensor", language, shape=shape, elements=_grouped(elements, language), bytes=_num(dtype_bytes),
                           dtype=dtype_name, size=format_bytes(size))]
        kinds = self._dtypes_in_order(turn or text) if not typed else []
        if len(kinds) >= 2:
            each = ", ".join(self._msg("tensor_dtype_each", language, dtype=d.name, bytes=_num(d.bytes),
                                       size=format_bytes(elements * d.bytes)) for d in kinds)
            parts = [self._msg("tensor_dtypes", language, shape=shape, elements=_grouped(elements, language), each=each)]
        if s.device_memory and "vmem_named" not in s.cues:  # against the device the text names (its HBM)
            parts.append(self._share(s, size, language))
        parts += self._tensor_sharded(dims, dtype_bytes, s, language, text)
        subject = "tensor"
        if _request_of(size, requested):
            # the failed allocation read per element of the shape ("207 GiB for bools?"): several arrays of
            # its shape alive at once (the one array itself is the log's allocation, factored)
            parts.append(self._msg("tensor_request_more", language, requested=format_bytes(requested),
                                   per=_num(round(requested / elements, 2)), times=_num(round(requested / size, 1)),
                                   dtype=dtype_name))
        if s.from_log and s.log_used and s.devices and s.devices > 1 and s.log_used >= 2 * size:
            # a TPU log's Used per device worth several whole copies of the array said to be sharded: those
            # arrays are whole on each device (the 92G per chip of a 4 GiB field said split over 32)
            parts.append(self._msg("tensor_log_copies", language, used=format_bytes(s.log_used),
                                   copies=_num(round(s.log_used / size, 1)), size=format_bytes(size),
                                   per=format_bytes(size / s.devices), devices=_num(s.devices)))
            subject = "tensor_log_copies"
        if (len(dims) >= 3 and dims[-1] == dims[-2] >= SEQUENCE_MIN  # [..., S, S]: attention scores
                and ("attention_named" in s.cues or len(dims) >= 4)  # [batch, heads, S, S] needs no name
                and not _ONE_HOT.search(text)):  # ([B, step, kv_len] said to be a one-hot: not scores)
            parts.append(self._msg("tensor_scores", language, seq=_num(dims[-1])))
            subject = "scores_tensor"
        elif (dims[-1] >= VOCAB_MIN and dims[-1] != dims[-2]  # [..., vocabulary]: logits, when a model is meant
              # a [rows, columns] matrix of a vocabulary's width is logits only where a model is named
              and (len(dims) >= 3 or {"logits", "attention_named"} & s.cues or s.values.get("vocab"))
              and not dtype_name.startswith("complex")):  # (a signal's complex samples are no model's logits)
            parts.append(self._msg("tensor_logits", language, vocab=_num(dims[-1])))
            subject = "logits_tensor"
            seq = dims[-2]
            if len(dims) >= 3 and seq >= 256:  # a chunk of the sequence whose logits take an eighth of the device
                bound = min(s.device_memory / 8 if s.device_memory else 4 << 30, 4 << 30) * 1.001
                chunk = 1 << int(math.log2(seq))
                while chunk > 128 and size * chunk / seq > bound:
                    chunk //= 2
                if chunk < seq:
                    per = size * chunk / seq
                    parts.append(self._msg("logits_chunk", language, chunk=_num(chunk), chunk_size=format_bytes(per),
                                           chunk_size_bf16=format_bytes(per * 2 / dtype_bytes)))
        padding = self._tpu_padding(dims, dtype_bytes, size, s, language)
        held = size
        if padding and "exact" in s.cues:  # the exact bytes asked for: right after the elements' bytes
            parts[1:1] = padding
        elif padding:
            parts += padding
            subject = "padded_tensor" if subject == "tensor" else subject
            held = _padded_bytes(dims, dtype_bytes, size)  # what HBM holds of each copy
        layers = s.values.get("layers")
        # (not when the shape already counts the layers: "u32[32,14336,4096]" of a 32-layer model)
        if layers and layers > 1 and subject != "logits_tensor" and not (typed and dims[0] == layers):
            if "kv_pair" in s.cues:  # "K and V one each": two per layer
                parts.append(self._msg("tensor_layers_kv", language, layers=_num(layers), size=format_bytes(held),
                                       total=format_bytes(2 * held * layers)))
            else:
                count = _tensors_per_layer(text)  # "three expert tensors of that shape in each layer (gate/up/down)"
                total = count * held * layers
                parts.append(self._msg("tensor_layers_many", language, count=count, layers=_num(layers),
                                       size=format_bytes(held), total=format_bytes(total)) if count > 1
                             else self._msg("tensor_layers", language, layers=_num(layers), total=format_bytes(total)))
                if count > 1 and s.devices and s.devices > 1 and "shard_asked" in s.cues:
                    parts.append(self._msg("tensor_layers_sharded", language, devices=s.devices,
                                           per=format_bytes(total / s.devices)))
        if "vmem_named" in s.cues and s.device and s.device.startswith("TPU"):
            parts += self._vmem_block(held, s, language, text)
        elif (steps := s.values.get("steps")) and steps > 1 and "loop_named" in s.cues and subject == "tensor":
            # a loop's carry under grad: once per step, and what two-level remat brings it to
            k = max(1, round(math.sqrt(steps)))
            copies = k + math.ceil(steps / k)
            parts.append(self._msg("tensor_steps", language, steps=_num(steps), total=format_bytes(held * steps),
                                   k=k, copies=copies, best=format_bytes(held * copies)))
        if s.dtype is None and not typed:
            parts.append(self._msg("assumed", language, what="float32"))
        # the code shards every array the conversation wrote out ("that matrix and the 4000-axis of
        # the big array"), each once, in the order written
        written: list[list[int]] = []
        for m_ in shapes:
            d_ = [int(d) for d in re.findall(r"\d+", m_.group(0))]
            if len(d_) >= 2 and math.prod(d_) >= 1 << 20 and d_ not in written:
                written.append(d_)
        return FigureAnswer(kind=KIND, subject=subject, text=self._join(parts, language),
                            value_bytes=int(size), sources=["computed"], cite=SCORES_CITE,
                            snippet=self._shard_code(written[-4:] or [dims], dtype_name, s, text))

    @staticmethod
    def backpedal(text: str, requested: int | None) -> list[float]:
        """The failed sizes (`requested`, then those `text` says in GiB, in order) that are one block
        retried at 90% each time (BACKPEDAL_MIN of them at least), else []."""
        # (a figure no device holds, from a report however absurd, is no retry of anything)
        sizes = [float(requested)] if requested and 0 < requested <= MAX_REQUEST else []
        sizes += [float(m.group(1)) * (1 << 30) for m in _GIB_SAID.finditer((text or "").lower())]
        chain: list[float] = []
        for size in sizes:
            if chain and abs(size - chain[-1]) <= BACKPEDAL_SLACK * chain[-1]:
                continue  # (the same size said twice: the log's line, then the question's)
            if not chain or abs(size - BACKPEDAL * chain[-1]) <= BACKPEDAL_SLACK * chain[-1]:
                chain.append(size)
            elif len(chain) < BACKPEDAL_MIN:
                chain = [size]
        return chain if len(chain) >= BACKPEDAL_MIN else []

    def _backpedal(self, text: str, language: str) -> FigureAnswer | None:
        """Failed allocations the text says, each 90% of the one before ("14.39GiB, then 12.95, 11.66,
        10.49"): XLA's BFC allocator asking the driver again for 90% of a block it was refused, not the
        program's need; against the card named, the first is the pool's fraction."""
        chain = self.backpedal(text, None)
        if not chain:
            return None
        steps = " → ".join(format_bytes(c) for c in chain)
        card = self.read(text).card_memory
        if card and chain[0] <= card:
            said = self._msg("backpedal_card", language, steps=steps, first=format_bytes(chain[0]),
                             card=format_bytes(card), fraction=f"{chain[0] / card:.2f}")
        else:
            said = self._msg("backpedal", language, steps=steps)
        return FigureAnswer(kind=KIND, subject="gpu_backpedal", text=said, value_bytes=int(chain[0]),
                            sources=["computed"], cite=POOL_CITE)

    def _dtypes_in_order(self, text: str) -> list[DType]:
        """The element types `text` names, each once, in the order named."""
        low = _plain_digits(text or "").lower()
        found = sorted(((m.start(), d) for d, p in self._dtypes for m in p.finditer(low)), key=lambda x: x[0])
        kinds: list[DType] = []
        for _, d in found:
            if d.name not in {k.name for k in kinds}:
                kinds.append(d)
        return kinds

    def _tensors_sum(self, shapes: list[list[int]], dtype_bytes: float, dtype_name: str, s: Stated,
                     language: str, text: str) -> FigureAnswer:
        """Arrays the text adds up ("an A array plus a B matrix"): each one's bytes and their sum,
        against the device named."""
        sizes = [math.prod(d) * dtype_bytes for d in shapes]
        each = ", ".join(self._msg("tensor_each", language, shape="[" + ", ".join(map(str, d)) + "]",
                                   elements=_grouped(math.prod(d), language), size=format_bytes(n))
                         for d, n in zip(shapes, sizes))
        total = sum(sizes)
        parts = [self._msg("tensors_sum", language, each=each, bytes=_num(dtype_bytes), dtype=dtype_name,
                           total=format_bytes(total))]
        if s.device_memory:
            parts.append(self._share(s, total, language))
        n = s.devices or 1
        if n > 1 and "shard_asked" in s.cues:  # "both sharded over the 16 devices": each device's part
            per = sum(-(-d[0] // n) * math.prod(d[1:]) * dtype_bytes for d in shapes)
            parts.append(self._msg("tensors_sum_sharded", language, devices=n, per=format_bytes(per)))
            if "random_init" in s.cues:  # an init's random bits, u32 per element, beside each shard
                bits = sum(-(-d[0] // n) * math.prod(d[1:]) * 4 for d in shapes)
                parts.append(self._msg("tensors_random_bits", language, bits=format_bytes(bits),
                                       peak=format_bytes(per + bits)))
        if s.dtype is None:
            parts.append(self._msg("assumed", language, what="float32"))
        return FigureAnswer(kind=KIND, subject="tensor", text=self._join(parts, language), value_bytes=int(total),
                            sources=["computed"], cite=SCORES_CITE, snippet=self._shard_code(shapes, dtype_name, s, text))

    def _shard_code(self, shapes: list[list[int]], dtype_name: str, s: Stated, text: str = "") -> str | None:
        """Code that makes the asker's arrays already split over their devices, when code to shard
        them is asked for: each along the axis the text names by its size ("the 4000-axis"), else
        the first axis the device count divides (none: replicated)."""
        n = s.devices
        if not (self.data.shard_snippet and n and n >= 2 and {"shard_asked", "code_asked"} <= s.cues):
            return None
        low = (text or "").lower()
        named = {int(m.group(1) or m.group(2)) for m in _AXIS_NAMED.finditer(low)}
        if "shard_map" in low and self.data.shard_map_snippet:
            return self._shard_map_code(shapes[-1], dtype_name, n, named, text)
        lines, names = [], []
        for i, dims in enumerate(shapes):
            axis = next((k for k, d in enumerate(dims) if d in named and d % n == 0), None)
            if axis is None:
                axis = next((k for k, d in enumerate(dims) if d % n == 0), None)
            spec = ", ".join('"x"' if k == axis else "None" for k in range(len(dims)))
            total = math.prod(dims) * next((d.bytes for d, _ in self._dtypes if d.name == dtype_name), 4)
            share = f"{format_bytes(total / n)} per device" if axis is not None else "replicated: all of it on each device"
            name = "abcdefgh"[i]
            names.append(name)
            lines.append(f"{name} = make(({', '.join(map(str, dims))}), jnp.{dtype_name}, P({spec}))"
                         f"  # {format_bytes(total)} in all, {share}")
        return self.data.shard_snippet.format(
            devices=n, arrays="\n".join(lines), names=", ".join(names), first=names[0],
            total=" + ".join(f"{x}.sum()" for x in names),
            x64='jax.config.update("jax_enable_x64", True)  # float64 arrays\n' if dtype_name == "float64" else "")

    def _shard_map_code(self, dims: list[int], dtype_name: str, n: int, named: set[int], text: str) -> str | None:
        """`jax.shard_map` over the asker's array on their mesh axis ("轴名 'model'"), split along the
        axis the text names by its size, else the first one the device count divides, with the
        `lax.map` batch it gives; None when no axis divides."""
        split = next((k for k, d in enumerate(dims) if d in named and d % n == 0), None)
        if split is None:
            split = next((k for k, d in enumerate(dims) if d % n == 0), None)
        if split is None:
            return None
        found = _MESH_AXIS_NAME.search(text) or _SPEC_AXIS_NAME.search(text)
        axis = found.group(1) if found else "x"
        batch = _LAX_MAP_BATCH.search(text)
        local = [d // n if k == split else d for k, d in enumerate(dims)]
        total = math.prod(dims) * next((d.bytes for d, _ in self._dtypes if d.name == dtype_name), 4)
        return self.data.shard_map_snippet.format(
            devices=n, axis=axis, spec=", ".join(f'"{axis}"' if k == split else "None" for k in range(len(dims))),
            shape=", ".join(map(str, dims)), split=split, local=", ".join(map(str, local)),
            share=f"{format_bytes(total / n)} of {format_bytes(total)}", dtype=dtype_name,
            batch=int(batch.group(1)) if batch else 1)

    def _tensor_sharded(self, dims: list[int], dtype_bytes: float, s: Stated, language: str, text: str) -> list[str]:
        """A tensor whose sharding over the devices named is asked about or set ("P('data', None)",
        "per GPU"): its share per device along the sharded axis against the whole of it replicated,
        an axis that does not divide, and that axis padded to a multiple the text asks for."""
        n = s.devices
        if not n or n < 2 or "shard_asked" not in s.cues:
            return []
        axis = _sharded_axis((text or "").lower(), len(dims))
        if axis is None:  # P(None, None): replicated by its own spec
            return []
        if dims[axis] < n:  # fewer rows than devices (32 experts on 128 chips): the first axis they divide
            axis = next((k for k, d in enumerate(dims) if d % n == 0), None)
            if axis is None:
                return []
        dims = list(dims)
        out = []
        multiple = int(s.values.get("pad_multiple") or 0)
        if multiple >= 2 and dims[axis] % multiple:
            padded = -(-dims[axis] // multiple) * multiple
            out.append(self._msg("tensor_padded_to", language, dim=_num(dims[axis]), multiple=multiple,
                                 padded=_num(padded), extra=_num(padded - dims[axis]),
                                 size=format_bytes(math.prod(dims) // dims[axis] * padded * dtype_bytes)))
            dims[axis] = padded
        rest = math.prod(dims) // dims[axis]
        rows = -(-dims[axis] // n)
        per = rows * rest * dtype_bytes
        out.append(self._msg("tensor_sharded", language, axis=axis, dim=_num(dims[axis]), devices=n,
                             per=format_bytes(per), size=format_bytes(math.prod(dims) * dtype_bytes)))
        if s.device_memory and "vmem_named" not in s.cues:  # each device's share against its memory
            memory = s.device_memory
            verdict = self._fit_verdict(per, memory, language)
            out.append(self._msg("tensor_sharded_verdict", language, memory=s.memory_label or format_bytes(memory),
                                 verdict=verdict))
        if dims[axis] % n:
            out.append(self._msg("tensor_uneven", language, dim=_num(dims[axis]), devices=n, rows=_num(rows),
                                 even=_num(rows * n), tile=_num(-(-dims[axis] // 128) * 128)))
        return out

    def _attention_blocks(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """A flash attention kernel's blocks (block_q, block_kv and the head dimension, from the text or
        the last axis of its shape): q, k, v and o, each padded to the TPU's tile and double-buffered,
        against the generation's default scoped VMEM limit."""
        bq = s.values.get("block_q")
        if not bq or not s.device or not s.device.startswith("TPU"):
            return None
        bk = s.values.get("block_kv") or bq
        shapes = [_dims_of(m) for m in _SHAPE.finditer(_plain_digits(text or ""))]
        d = s.values.get("head_dim") or next((dims[-1] for dims in reversed(shapes) if len(dims) >= 3), None)
        hw = self.figures.gens.get(s.device.removeprefix("TPU "))
        if not d or hw is None or not hw.scoped_vmem_default_bytes:
            return None
        size = s.dtype.bytes if s.dtype else 4
        sublane = 8 * max(1, int(4 // size))  # 8 rows of 32-bit, 16 of 16-bit
        dpad = -(-int(d) // 128) * 128
        rows = lambda n: -(-int(n) // sublane) * sublane  # noqa: E731
        one = (2 * rows(bq) + 2 * rows(bk)) * dpad * size
        one_raw = (2 * bq + 2 * bk) * d * size
        total, total_raw = 2 * one, 2 * one_raw
        verdict = self._fit_verdict(total, hw.scoped_vmem_default_bytes, language)
        text_ = self._msg("attention_blocks", language, bq=_num(bq), bk=_num(bk), d=_num(d), dpad=dpad,
                          dtype=s.dtype.name if s.dtype else "float32", one=format_bytes(one),
                          one_raw=format_bytes(one_raw), total=format_bytes(total), total_raw=format_bytes(total_raw),
                          pad_cost=format_bytes(total - total_raw), ratio=_num(round(dpad / d, 2)),
                          scoped=format_bytes(hw.scoped_vmem_default_bytes), gen=s.device, verdict=verdict)
        return FigureAnswer(kind=KIND, subject="attention_blocks", text=text_, value_bytes=int(total),
                            sources=["computed"], cite=BLOCKS_CITE)

    def _vmem_block(self, held: float, s: Stated, language: str, text: str) -> list[str]:
        """A tensor that is a Pallas block: twice over in VMEM, against the generation's default
        scoped limit, its physical VMEM, and a limit the text asks for."""
        hw = self.figures.gens.get(s.device.removeprefix("TPU "))
        if hw is None or not hw.vmem_bytes or not hw.scoped_vmem_default_bytes:
            return []
        count = _blocks_counted(text)  # "three (512, 2048) f32 blocks": each of them twice
        double = 2 * count * held
        if count > 1:
            out = [self._msg("tensor_vmem_many", language, count=count, one=format_bytes(held),
                             double=format_bytes(double), scoped=format_bytes(hw.scoped_vmem_default_bytes),
                             gen=s.device, physical=format_bytes(hw.vmem_bytes))]
        else:
            out = [self._msg("tensor_vmem", language, held=format_bytes(held), double=format_bytes(double),
                             scoped=format_bytes(hw.scoped_vmem_default_bytes), gen=s.device,
                             physical=format_bytes(hw.vmem_bytes))]
        limit = limit_asked(text)
        if limit:  # "and with vmem_limit_bytes at 100 MiB?"
            verdict = self._fit_verdict(double, limit, language)
            out.append(self._msg("tensor_vmem_limit", language, limit=format_bytes(limit), verdict=verdict))
            if double <= limit <= hw.vmem_bytes:  # a limit that holds them: if it still fails, why
                out.append(self._msg("tensor_vmem_still", language))
        if double > hw.vmem_bytes:
            out.append(self._msg("tensor_vmem_beyond", language, physical=format_bytes(hw.vmem_bytes)))
        return out

    def _policy_sizes(self, text: str) -> tuple[float | None, list[tuple[str, float]]]:
        """The arguments (GiB) and each remat policy's measured temporaries (GiB) that `text`
        states ("args 9.0 GiB, temp 11.5 with nothing_saveable, 27.9 with dots_saveable, 58.0 with
        no remat"), each policy once, in the order written."""
        low = (text or "").lower()
        names = "|".join(re.escape(n) for n in sorted(self.data.remat_policies, key=len, reverse=True))
        size = r"(\d+(?:\.\d+)?)\s*(?:gib|gb|g)?"
        found: dict[str, float] = {}
        before = re.compile(size + r"\s*(?:with|for|using|under|mit|avec|con|com|с|при|用|で|로|에서)?\s*"
                            r"(?:policy\s*=?\s*)?(?:jax\.checkpoint_policies\.)?(" + names + r")(?![a-z_])")
        after = re.compile(r"(?<![a-z_])(" + names + r")\s*(?:[:=→]|->|-)\s*" + size)
        for m in before.finditer(low):
            found.setdefault(m.group(2), float(m.group(1)))
        for m in after.finditer(low):
            found.setdefault(m.group(1), float(m.group(2)))
        args = None
        for pattern in self.data.arguments:
            m = re.search(pattern + r"\s*[=:]?\s*" + size, low)
            if m:
                args = float(m.group(1))
                break
        order = sorted(found, key=lambda n: low.find(n))
        return args, [(n, found[n]) for n in order]

    def _policies(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """Which of the remat policies whose temporaries the text states fit the device named,
        beside the arguments: each against what the device leaves after them."""
        args, sizes = self._policy_sizes(text)
        if len(sizes) < 2 or not s.device_memory:
            return None
        memory = s.device_memory / (1 << 30)
        budget = memory - (args or 0)
        listed = ", ".join(
            self._msg("policy_fits" if temp <= budget else "policy_over", language, policy=f"`{name}`",
                      temp=f"{_num(temp)} GiB", left=f"{_num(round(budget - temp, 2))} GiB",
                      over=f"{_num(round(temp - budget, 2))} GiB")
            for name, temp in sizes)
        fitting = [name for name, temp in sizes if temp <= budget]
        key = "policies_none" if not fitting else "policies"
        text_ = self._msg(key, language, device=s.device or "", memory=f"{_num(round(memory, 2))} GiB",
                          args=f"{_num(args or 0)} GiB", budget=f"{_num(round(budget, 2))} GiB", listed=listed,
                          best=f"`{max(((t, n) for n, t in sizes if t <= budget), default=(0, ''))[1]}`")
        return FigureAnswer(kind=KIND, subject="remat_policies", text=text_, value_bytes=int(budget * (1 << 30)),
                            sources=["computed"], cite=ACTIVATIONS_CITE)

    def _saved_names(self, text: str, turn: str, s: Stated, language: str) -> FigureAnswer | None:
        """What saving one tensor per layer of each shape the newest turn writes costs (its bytes x
        the layers), and how many fit in what the least-saving policy that fits leaves, when an
        earlier turn measured the policies."""
        layers = s.values.get("layers")
        if "saved_names" not in s.cues or not layers:
            return None
        shapes = [[int(d) for d in re.findall(r"\d+", m.group(0))] for m in _SHAPE.finditer(turn or "")]
        shapes = [d for d in shapes if len(d) >= 2 and 0 not in d]
        if not shapes:
            return None
        dtype_bytes, dtype_name = (s.dtype.bytes, s.dtype.name) if s.dtype else (2, "bfloat16")
        args, sizes = self._policy_sizes(text)
        spare, least = None, ""
        if sizes and s.device_memory:
            budget = s.device_memory / (1 << 30) - (args or 0)
            fitting = sorted((t, n) for n, t in sizes if t <= budget)
            spare, least = (budget - fitting[0][0], fitting[0][1]) if fitting else (None, "")
        parts = []
        for dims in shapes:
            one = math.prod(dims) * dtype_bytes
            cost = one * layers
            shape = "[" + ", ".join(str(d) for d in dims) + "]"
            parts.append(self._msg("saved_name", language, shape=shape, dtype=dtype_name, one=format_bytes(one),
                                   layers=_num(layers), cost=format_bytes(cost)))
            if spare is not None:
                parts.append(self._msg("saved_name_count", language, spare=f"{_num(round(spare, 2))} GiB",
                                       count=_num(int(spare * (1 << 30) // cost)), policy=f"`{least}`"))
        return FigureAnswer(kind=KIND, subject="saved_names", text=self._join(parts, language),
                            value_bytes=int(math.prod(shapes[0]) * dtype_bytes * layers), sources=["computed"],
                            cite=ACTIVATIONS_CITE)

    def _chunks(self, text: str, turn: str, s: Stated, language: str) -> FigureAnswer | None:
        """The chunk size that keeps one chunk of a written-out shape under a budget the newest
        turn states ("lax.map with batch_size so that each chunk stays under 2 GiB" of a
        [50000, 200000] f32 matrix): the rows of the first dimension that fit, and the same with
        two or three such arrays alive at once."""
        if "chunks" not in s.cues:
            return None
        shapes = [[int(d) for d in re.findall(r"\d+", m.group(0))] for m in _SHAPE.finditer(text or "")]
        shapes = [d for d in shapes if len(d) >= 2 and 0 not in d]
        low = (turn or "").lower()
        card = (s.card_memory or 0) / (1 << 30)
        budgets = [float(m.group(1)) for m in _GB.finditer(low)
                   if not (card and abs(float(m.group(1)) - card) <= 0.02 * card)]
        budgets += [float(m.group(1)) / 1024 for m in _MIB.finditer(low)]  # "at most 256 MiB"
        given = _BATCH_SIZE_GIVEN.search(low)
        if shapes and not budgets and given and s.device_memory:  # "lax.map(..., batch_size=64): how much a chunk?"
            return self._chunk_given(shapes[-1], int(given.group(1)), s, language)
        if not shapes or len(budgets) != 1:
            return None
        dims, budget = shapes[-1], budgets[0] * (1 << 30)
        item = _PER_ITEM_SHAPE.search(_plain_digits(text or "").lower())
        if item:  # "an intermediate of (1024,) per point" of the mapped (1_000_000, 3): 1_000_000 of those
            dims = [shapes[0][0], *(int(d) for d in re.findall(r"\d+", item.group(1)))]
        dtype_bytes, dtype_name = (s.dtype.bytes, s.dtype.name) if s.dtype else (4, "float32")
        row = math.prod(dims[1:]) * dtype_bytes
        rows = int(budget // row)
        if rows < 1 or rows >= dims[0]:
            return None  # one row is over the budget, or the whole array is under it: not a chunk size
        power = 1 << (rows.bit_length() - 1)
        parts = [self._msg("chunks", language, shape="[" + ", ".join(str(d) for d in dims) + "]",
                           row_shape="[" + ", ".join(["1", *(str(d) for d in dims[1:])]) + "]",
                           bytes=_num(dtype_bytes), dtype=dtype_name, row=format_bytes(row),
                           budget=format_bytes(budget), rows=_num(rows), power=_num(power),
                           chunks=_num(math.ceil(dims[0] / rows)), two=_num(int(budget // (2 * row))),
                           three=_num(int(budget // (3 * row))))]
        if s.dtype is None:
            parts.append(self._msg("assumed", language, what="float32"))
        return FigureAnswer(kind=KIND, subject="chunks", text=self._join(parts, language), value_bytes=int(rows * row),
                            sources=["computed"], cite=TRAINING_CITE)

    def _chunk_given(self, dims: list[int], rows: int, s: Stated, language: str) -> FigureAnswer | None:
        """A chunk size given for a written-out shape ("lax.map(..., batch_size=64)" over its first
        dimension): one chunk's array, against the device's memory alone and two of them alive at once."""
        if not 1 <= rows < dims[0]:
            return None
        dtype_bytes, dtype_name = (s.dtype.bytes, s.dtype.name) if s.dtype else (4, "float32")
        chunk = rows * math.prod(dims[1:]) * dtype_bytes
        memory = s.device_memory
        fit_rows = int(memory // (2 * math.prod(dims[1:]) * dtype_bytes))  # two alive at once, nothing else
        parts = [self._msg("chunk_given", language, shape="[" + ", ".join(str(d) for d in [rows, *dims[1:]]) + "]",
                           bytes=_num(dtype_bytes), dtype=dtype_name, chunk=format_bytes(chunk),
                           memory=s.memory_label or format_bytes(memory), device=s.device or "",
                           one=self._fit_verdict(chunk, memory, language), two=format_bytes(2 * chunk),
                           both=self._fit_verdict(2 * chunk, memory, language),
                           chunks=_num(math.ceil(dims[0] / rows)), fit_rows=_num(max(fit_rows, 0)))]
        if s.dtype is None:
            parts.append(self._msg("assumed", language, what="float32"))
        return FigureAnswer(kind=KIND, subject="chunks", text=self._join(parts, language), value_bytes=int(chunk),
                            sources=["computed"], cite=TRAINING_CITE)

    def _per_example(self, s: Stated, language: str) -> FigureAnswer | None:
        """Per-example gradients (`vmap(grad)`): batch × parameters in float32, and the chunk of
        examples that holds at most a quarter of the device named."""
        params, batch = s.values.get("params"), s.values.get("batch")
        if "per_example" not in s.cues or not params or not batch or params < 1e5 or batch < 2:
            return None
        one = params * 4
        budget = (s.device_memory or 0) * BIG_SHARE
        chunk = 16
        if budget:
            chunk = 1
            while chunk * 2 <= batch and chunk * 2 * one <= budget:
                chunk *= 2
        chunk = int(min(chunk, batch))
        text = self._msg("per_example_grads", language, batch=_num(batch), params=_count(params),
                         size=format_bytes(batch * one), chunk=chunk, chunk_size=format_bytes(chunk * one))
        return FigureAnswer(kind=KIND, subject="per_example_grads", text=text, value_bytes=int(batch * one),
                            sources=["computed"], cite=ACTIVATIONS_CITE)

    def _kept_per_step(self, tensor: FigureAnswer, s: Stated, language: str) -> FigureAnswer | None:
        """A shape the text appends to a Python list every step, on the device it names: its size
        and how many steps fill the device with those arrays alone."""
        if "appended" not in s.cues or not s.device_memory or not tensor.value_bytes:
            return None
        m = re.search(r"\*\*[^*]*?(\[[\d, ]+\])", tensor.text)  # the shape as the tensor line writes it
        shape = m.group(1) if m else ""
        text = self._msg("kept_per_step", language, shape=f"`{shape}`", size=format_bytes(tensor.value_bytes),
                         steps=_num(int(s.device_memory // tensor.value_bytes)), device=s.device or "",
                         memory=s.memory_label or format_bytes(s.device_memory))
        steps = s.values.get("steps")
        if steps:  # "how much is that after 200 steps?"
            total = steps * tensor.value_bytes
            text = join_sentences([text, self._msg("kept_after_steps", language, steps=_num(steps),
                                                   size=format_bytes(tensor.value_bytes), total=format_bytes(total),
                                                   share=f"{100 * total / s.device_memory:.0f}%")], language)
        return FigureAnswer(kind=KIND, subject="kept_per_step", text=text, value_bytes=tensor.value_bytes,
                            sources=["computed"], cite=KEPT_CITE)

    def _tpu_padding(self, dims: list[int], dtype_bytes: float, size: float, s: Stated, language: str) -> list[str]:
        """On a TPU named: the bytes of the shape in HBM tiles (the last dimension to a multiple of
        128, the one before it to 8 rows of 32-bit words: 8, 16 or 32 elements), where that pads
        it by a quarter or more; and a shape of the same bytes that is not padded."""
        if not (s.device and s.device.startswith("TPU")) or len(dims) < 2 or dtype_bytes not in (1, 2, 4):
            return []
        sub = int(8 * 4 // dtype_bytes)
        vmem = "vmem_named" in s.cues  # a Pallas block: tiled as written; an array in HBM: laid out by the compiler
        minor, second = dims[-1], dims[-2]
        padded = _padded_bytes(dims, dtype_bytes, size)
        if not vmem and not {"exact", "layout_given"} & s.cues and padded >= 1.25 * size:
            # the compiler puts other dimensions last where that pads less: the least it pads, not the worst
            padded, minor, minor_padded, second, second_padded = _least_padded(dims, dtype_bytes, size)
            if padded < 1.25 * size:
                return []
            return [self._msg("tpu_padding_least", language, minor=minor, minor_padded=minor_padded, second=second,
                              second_padded=second_padded, factor=_num(round(padded / size, 1)),
                              padded=format_bytes(padded))]
        minor_padded, second_padded = -(-minor // 128) * 128, -(-second // sub) * sub
        if padded < 1.25 * size:
            # the exact bytes asked for ("exactly how much, with layout T(8,128)?"): the tiles' bytes,
            # and what padding the last dimension by hand to another width would change
            if "exact" not in s.cues or padded == size:
                return []
            parts = [self._msg("tpu_padding_exact", language, tile=sub, minor=minor, minor_padded=minor_padded,
                               second=second, second_padded=second_padded, padded_bytes=_grouped(padded, language),
                               padded=format_bytes(padded), extra=format_bytes(padded - size),
                               size_bytes=_grouped(size, language))]
            target = next((n for n in s.widths if minor < n <= minor + 4096 and n not in dims), None)
            if target is not None:
                by_hand = _padded_bytes([*dims[:-1], target], dtype_bytes, size / minor * target)
                parts.append(self._msg("tpu_padding_by_hand", language, minor=minor, target=target,
                                       padded_bytes=_grouped(by_hand, language),
                                       change=format_bytes(abs(by_hand - padded))) if by_hand != padded else
                             self._msg("tpu_padding_by_hand_same", language, minor=minor, target=target,
                                       padded_bytes=_grouped(padded, language)))
            return parts
        parts = [self._msg("tpu_padding_vmem" if vmem else "tpu_padding", language, tile=sub, minor=minor,
                           minor_padded=minor_padded, second=second, second_padded=second_padded,
                           factor=_num(round(padded / size, 1)), padded=format_bytes(padded))]
        elements = int(size / dtype_bytes)
        if minor < 128 and elements % 128 == 0 and not vmem:
            parts.append(self._msg("tpu_padding_reshape", language, reshape=f"[{elements // 128}, 128]"))
        return parts

    def _dataset(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """A whole dataset put on the device at once: items × the shape of one item × bytes."""
        items = s.values.get("items")
        shapes = list(_SHAPE.finditer(text or ""))
        if not items or not shapes:
            return None
        dims = [int(d) for d in re.findall(r"\d+", shapes[-1].group(0))]
        per_item = 1
        for d in dims:
            per_item *= d
        elements = items * per_item
        dtype_bytes, dtype_name = (s.dtype.bytes, s.dtype.name) if s.dtype else (4, "float32")
        size = elements * dtype_bytes
        if len(dims) < 2 or size < 1 << 30:
            return None
        parts = [self._msg("dataset", language, items=_grouped(items, language), shape="[" + ", ".join(map(str, dims)) + "]",
                           bytes=_num(dtype_bytes), dtype=dtype_name, size=format_bytes(size),
                           size_uint8=format_bytes(elements))]
        if s.device_memory:
            parts.append(self._share(s, size, language))
        # kept on the devices and sharded over them (a replay buffer): each one's share
        sharded = self._tensor_sharded([int(items), *dims], dtype_bytes, s, language, text)
        parts += sharded
        if not sharded:
            parts.append(self._msg("dataset_advice", language))
        return FigureAnswer(kind=KIND, subject="dataset", text=self._join(parts, language), value_bytes=int(size),
                            sources=["computed"], cite=DATASET_CITE)

    def pairs_requested(self, text: str, requested: int | None) -> bool:
        """Whether a failed allocation of `requested` bytes is the matrix of pairs that the point
        counts of `text` make (within half a percent: a library may pad it)."""
        if not requested:
            return False
        pairs = self._pairwise(text, text, self.read(text), "en")
        return pairs is not None and abs(pairs.value_bytes - requested) <= PAIRS_SLACK * requested

    def allocation_shape(self, text: str, requested: int | None) -> "Factored | None":
        """The array that a failed allocation of `requested` bytes is, when the numbers `text` states
        multiply to it exactly (10,000 images of 100×100 compared pairwise: 10000 × 10000 × 100 ×
        100 × 4 B): the fewest of them, each used at most once more than it is written, in the
        dtype the text names (else the first of float32, bfloat16, int8, float64 that fits)."""
        if not requested or requested < 1 << 30:
            return None
        plain = _plain_digits(text or "").lower()
        # the shapes written out ("(32,256,256)", "100x100"): their dimensions count, and a product
        # that uses more of one shape's dimensions is the likelier reading
        shapes = [[int(d) for d in re.findall(r"\d+", m.group(0))] for m in _SHAPE.finditer(plain)]
        # a product in code ("1024*1024", "2**20") is the one number it computes; 100x100 is two
        plain = _CODE_PRODUCT.sub(lambda m: str(_product(m.group(0))), plain)
        low = re.sub(r"(?<=\d)\s*[x×*]\s*(?=\d)", " x ", plain)  # 100x100: two numbers
        low = re.sub(r"(?<=\d),(?=\d)", ", ", low)  # (32,256,256): three
        counts: dict[int, int] = {}
        for m in _WHOLE.finditer(low):
            if _UNIT_AFTER.match(low, m.end()):
                continue
            n = int(re.sub(r"\D", "", m.group(1))) * (1000 if m.group(2) else 1)
            if 2 <= n < requested:
                counts[n] = counts.get(n, 0) + 1
        numbers = sorted(counts, reverse=True)[:12]
        dtype = self._last_of(self._dtypes, low)
        tries = [(dtype.bytes, dtype.name)] if dtype else [(4, "float32"), (2, "bfloat16"), (1, "int8"), (8, "float64")]
        def from_a_shape(combo: tuple[int, ...]) -> int:  # how many of the factors one written shape gives
            return max((sum(min(combo.count(d), dims.count(d)) for d in set(dims)) for dims in shapes), default=0)

        for size, name in tries:
            if requested % size:
                continue
            target = requested // size
            for k in range(2, MAX_FACTORS + 1):
                found = [combo for combo in itertools.combinations_with_replacement(numbers, k)
                         if math.prod(combo) == target and all(combo.count(n) <= counts[n] + 1 for n in set(combo))]
                if found:  # the fewest factors; of those, the one most of whose factors are one shape's
                    combo = max(found, key=from_a_shape)
                    paired = sorted((n for n in set(combo) if combo.count(n) > counts[n]), reverse=True)
                    return Factored(dims=_shape_last(list(combo), shapes), dtype_bytes=int(size), dtype=name,
                                    paired=paired, assumed=dtype is None)
        return None

    def _allocation_line(self, f: "Factored", requested: int, language: str,
                         square_broadcast: bool = False) -> FigureAnswer:
        """The failed allocation written as the product of the user's own figures (an [N, N] of N
        items nothing pairs on purpose: said to be a broadcast, when `square_broadcast`)."""
        shape = "[" + ", ".join(map(str, f.dims)) + "]"
        parts = [self._msg("allocation_factored", language, requested=_grouped(requested, language),
                           size=format_bytes(requested), factors=" × ".join(_grouped(d, language) for d in f.dims),
                           bytes=_num(f.dtype_bytes), dtype=f.dtype, shape=shape)]
        if square_broadcast and len(f.dims) == 2 and f.dims[0] == f.dims[1] >= SQUARE_BROADCAST_MIN:
            parts.append(self._msg("allocation_square", language, count=str(f.dims[0]),  # as a shape writes it
                                   size=format_bytes(requested)))
        if f.paired:  # a count used twice though written once: every pair of them, each with its own item
            item = list(f.dims)
            for n in f.paired:
                item.remove(n)
                item.remove(n)
            pairs = math.prod(f.paired) ** 2 * f.dtype_bytes
            parts.append(self._msg("allocation_pairs", language, count=_grouped(f.paired[0], language),
                                   item="[" + ", ".join(map(str, item)) + "]", pairs=format_bytes(pairs),
                                   chunk=format_bytes(requested // f.paired[0])))
        if f.assumed:
            parts.append(self._msg("assumed", language, what=f.dtype))
        return FigureAnswer(kind=KIND, subject="allocation_factored", text=self._join(parts, language),
                            value_bytes=int(requested), sources=["computed"], cite=SCORES_CITE)

    def _input_batch(self, turn: str, s: Stated, language: str) -> FigureAnswer | None:
        """One input batch the turn describes ("a global batch of 1024 images 224x224x3"): items ×
        the shape of one item × bytes, in each dtype it names (widest first, what the narrower one
        saves), and per device when sharded along the batch axis over the devices named."""
        items = s.values.get("items")
        shapes = list(_SHAPE.finditer(turn or ""))
        named = sorted({d.name: d for d, _ in self._dtypes if d.name in s.dtypes_named}.values(), key=lambda d: -d.bytes)
        if not items or not shapes or s.values.get("batch") != items:  # the items are the batch
            return None
        dims = [int(d) for d in re.findall(r"\d+", shapes[-1].group(0))]
        if not 2 <= len(dims) <= 4:
            return None
        elements = items * math.prod(dims)
        dtypes = [(d.bytes, d.name) for d in named] or [(4, "float32")]
        sizes = [elements * b for b, _ in dtypes]
        parts = [self._msg("input_batch", language, items=_grouped(items, language),
                           shape="[" + ", ".join(map(str, dims)) + "]", elements=_grouped(elements, language),
                           bytes=_num(dtypes[0][0]), dtype=dtypes[0][1], size=format_bytes(sizes[0]))]
        if len(dtypes) > 1:
            parts.append(self._msg("input_batch_dtype", language, dtype=dtypes[-1][1], size=format_bytes(sizes[-1]),
                                   saved=format_bytes(sizes[0] - sizes[-1])))
        n = s.devices or 1
        if n > 1 and items % n == 0 and s.device_memory:
            share = 100 * sizes[0] / n / s.device_memory
            parts.append(self._msg("input_batch_devices", language, devices=_num(n), per=format_bytes(sizes[0] / n),
                                   share=f"{share:.1f}%" if share < 10 else f"{share:.0f}%",
                                   device=s.device or "", memory=s.memory_label))
            if len(dtypes) > 1:
                parts.append(self._msg("input_batch_devices_dtype", language, dtype=dtypes[-1][1],
                                       per=format_bytes(sizes[-1] / n), saved=format_bytes((sizes[0] - sizes[-1]) / n)))
        elif len(named) < 1:
            parts.append(self._msg("assumed", language, what="float32"))
        return FigureAnswer(kind=KIND, subject="input_batch", text=self._join(parts, language),
                            value_bytes=int(sizes[-1]), sources=["computed"], cite=DATASET_CITE)

    def _share(self, s: Stated, size: float, language: str) -> str:
        """The line saying which share of the device named `size` is."""
        return self._msg("tensor_vs_device", language, share=f"{100 * size / s.device_memory:.0f}%",
                         device=s.device or "", memory=s.memory_label)

    def _scores(self, s: Stated, language: str) -> FigureAnswer | None:
        """The attention score matrix asked about: batch × heads × S × S × bytes, per layer."""
        v = s.values
        heads, seq = v.get("heads"), v.get("seq")
        if "scores" not in s.cues or not (heads and seq):
            return None
        batch, dtype_bytes, dtype_name, assumed = _per_batch(s)
        size = batch * heads * seq * seq * dtype_bytes
        parts = [self._msg("scores", language, batch=_num(batch), heads=_num(heads), seq=_num(seq),
                           bytes=_num(dtype_bytes), dtype=dtype_name, scores=format_bytes(size))]
        if assumed:
            parts.append(self._msg("assumed", language, what=", ".join(assumed)))
        return FigureAnswer(kind=KIND, subject="attention_scores", text=self._join(parts, language),
                            value_bytes=int(size), sources=["computed"], cite=SCORES_CITE)

    def _logits(self, s: Stated, language: str) -> FigureAnswer | None:
        """The logits asked about: batch × S × vocabulary × bytes (float32 unless a dtype is
        named), set against the device named."""
        v = s.values
        vocab, seq = v.get("vocab"), v.get("seq")
        # asked about, or a large vocabulary named beside an OOM in training (what fills memory then)
        if not (vocab and seq) or not ("logits" in s.cues or (vocab >= LOGITS_VOCAB_MIN and {"oom", "training"} <= s.cues)):
            return None
        batch, dtype_bytes, dtype_name, assumed = _per_batch(s)
        shown = _num(batch)
        if "global_batch" in s.cues and s.devices and s.devices > 1 and batch >= s.devices:
            shown, batch = f"{_num(batch)} / {s.devices} = {_num(batch / s.devices)}", batch / s.devices  # per device
        size = batch * seq * vocab * dtype_bytes
        # (sampling keeps the logits, with no loss or gradient of the same size beside them)
        key = "logits_kept" if "inference" in s.cues and "training" not in s.cues else "logits"
        parts = [self._msg(key, language, batch=shown, seq=_num(seq), vocab=_num(vocab),
                           bytes=_num(dtype_bytes), dtype=dtype_name, logits=format_bytes(size),
                           twice=format_bytes(2 * size))]
        k = int(v.get("topk") or 0)
        if 1 <= k < vocab:  # "only the top-20 logits and their indices": k values and k int32 indices a token
            values, indices = batch * seq * k * dtype_bytes, batch * seq * k * 4
            parts.append(self._msg("logits_topk", language, k=k, batch=_num(batch), seq=_num(seq), bytes=_num(dtype_bytes),
                                   size=format_bytes(values + indices), values=format_bytes(values),
                                   indices=format_bytes(indices)))
        elif s.device_memory:
            parts.append(self._share(s, size, language))
        tensor_parallel = v.get("model_axis") or (s.devices if "shard_asked" in s.cues else None)
        if tensor_parallel and tensor_parallel > 1 and "global_batch" not in s.cues:
            # "TP=8: and per GPU?": the logits split along the vocabulary, or whole where they are gathered
            parts.append(self._msg("logits_sharded", language, devices=_num(tensor_parallel),
                                   per_device=format_bytes(size / tensor_parallel), logits=format_bytes(size)))
        chunk = v.get("logits_chunk")
        if chunk and chunk < batch * seq:  # "a chunked lm-head, 1024 tokens a chunk: how much do I save?"
            tile = chunk * vocab * dtype_bytes
            parts.append(self._msg("logits_chunked", language, chunk=_num(chunk), vocab=_num(vocab),
                                   bytes=_num(dtype_bytes), tile=format_bytes(tile), logits=format_bytes(size),
                                   saving=format_bytes(size - tile)))
            if s.device_memory and ("training" in s.cues or "inference" not in s.cues):
                # "will a 4096-token chunk fit on the chip?": the chunk and its gradient against the device
                parts.append(self._msg("logits_chunk_fit", language, twice=format_bytes(2 * tile),
                                       memory=format_bytes(s.device_memory),
                                       verdict=self._fit_verdict(2 * tile, s.device_memory, language)))
        tiles = int(v.get("vocab_tiles") or 0)
        if tiles > 1:  # MaxText's num_vocab_tiling: the loss over that many tiles of the tokens
            parts.append(self._msg("logits_tiles", language, tiles=tiles, tokens=_num(batch * seq / tiles),
                                   vocab=_num(vocab), bytes=_num(dtype_bytes), tile=format_bytes(size / tiles)))
        if assumed:
            parts.append(self._msg("assumed", language, what=", ".join(assumed)))
        return FigureAnswer(kind=KIND, subject="logits", text=self._join(parts, language),
                            value_bytes=int(size), sources=["computed"], cite=LOGITS_CITE)

    def _shared_on_card(self, text: str, shared: int | None, requested: int | None,
                        language: str) -> FigureAnswer | None:
        """A kernel's shared memory per block (the log's request), set against the shared memory a
        block may use on another card the turn names ("and on an H100?")."""
        if not (shared and requested and requested > shared):
            return None
        low = (text or "").lower()
        card = next((g for g, patterns in self._gpus if g.shared_kib and any(p.search(low) for p in patterns)), None)
        if card is None or int(card.shared_kib * 1024) == shared:
            return None
        limit = int(card.shared_kib * 1024)
        verdict = self._fit_verdict(requested, limit, language)
        return FigureAnswer(kind=KIND, subject="gpu_shared_on_card", text=self._msg(
            "gpu_shared_on_card", language, gpu=card.names[0].upper(), limit=format_bytes(limit),
            requested=format_bytes(requested), verdict=verdict), value_bytes=limit, sources=["computed"],
            cite=BLOCKS_CITE)

    def _shared_per_card(self, turn: str, language: str) -> FigureAnswer | None:
        """The shared memory one thread block may use on each card the turn names, where it asks about
        shared memory ("how much shared memory per block does this card have against the B200?")."""
        low = (turn or "").lower()
        if not any(p.search(low) for p in self._cues.get("shared_named", [])):
            return None
        cards = [g for g, patterns in self._gpus if g.shared_kib and any(p.search(low) for p in patterns)]
        if not cards or not _HOW_MUCH.search(low):
            return None
        rows = _LIST_SEPARATOR.get(language, "; ").join(
            f"{g.names[0].upper()} {_num(g.shared_kib)} KiB" for g in cards)
        return FigureAnswer(kind=KIND, subject="shared_per_card", text=self._msg("shared_per_card", language, rows=rows),
                            value_bytes=int(min(g.shared_kib for g in cards) * 1024), sources=["computed"],
                            cite=BLOCKS_CITE)

    def _shared_blocks(self, s: Stated, language: str, shared: int | None) -> FigureAnswer | None:
        """A GPU (Triton) Pallas matmul's block_k and num_stages that fit the shared memory a block
        gets (the error's "available"): each stage holds an x tile (bm × bk) and a y tile (bk × bn)."""
        bm, bn = s.values.get("block_m"), s.values.get("block_n")
        if not (shared and bm and bn):
            return None
        size = s.dtype.bytes if s.dtype else 4
        name = s.dtype.name if s.dtype else "float32"

        def need(bk: int, stages: int) -> int:
            return int(stages * (bm * bk + bk * bn) * size)

        def largest_bk(stages: int) -> int | None:
            fitting = [bk for bk in (256, 128, 64, 32, 16) if need(bk, stages) <= shared]
            return fitting[0] if fitting else None

        bk3, bk2 = largest_bk(3), largest_bk(2)
        values = dict(bm=_num(bm), bn=_num(bn), dtype=name, bytes=_num(size), available=format_bytes(shared))
        if bk2 is None:
            text = self._msg("gpu_shared_too_big", language, used=format_bytes(need(16, 2)), **values)
        else:
            bk, stages = (bk3, 3) if bk3 else (bk2, 2)
            text = self._msg("gpu_shared_blocks", language, bk=bk, stages=stages, used=format_bytes(need(bk, stages)),
                             bk2=bk2, used2=format_bytes(need(bk2, 2)), **values)
        now_bk, now_stages = s.values.get("block_k"), s.values.get("num_stages")
        if now_bk and now_stages and need(int(now_bk), int(now_stages)) > shared:  # what the asker has now
            text = join_sentences([text, self._msg("gpu_shared_now", language, bk=_num(now_bk), stages=_num(now_stages),
                                                   used=format_bytes(need(int(now_bk), int(now_stages))),
                                                   available=format_bytes(shared))], language)
        return FigureAnswer(kind=KIND, subject="gpu_shared_blocks", text=text, value_bytes=0, sources=["computed"],
                            cite=BLOCKS_CITE)

    def _host_load(self, s: Stated, language: str) -> FigureAnswer | None:
        """A model whose loading fills the host's RAM ("session crashed after using all available RAM"):
        its weights held whole in host RAM, and twice while a conversion keeps both copies, against the
        RAM said."""
        params = s.values.get("params")
        if (not {"host_ram_full", "model_loading"} <= s.cues or not params or not 1e8 <= params <= 1e13
                or {"training", "offload"} & s.cues):
            return None
        dtype_bytes, dtype_name = (s.dtype.bytes, s.dtype.name) if s.dtype else (2, "bfloat16")
        weights = params * dtype_bytes
        parts = [self._msg("host_load", language, params=_count(params), bytes=_num(dtype_bytes), dtype=dtype_name,
                           weights=format_bytes(weights), f32=format_bytes(params * 4),
                           both=format_bytes(params * (4 + dtype_bytes) if dtype_bytes < 4 else 2 * weights))]
        ram = s.values.get("host_ram")
        if ram:
            parts.append(self._msg("host_load_over" if weights > 0.8 * ram else "host_load_fits", language,
                                   ram=format_bytes(ram), weights=format_bytes(weights)))
        return FigureAnswer(kind=KIND, subject="host_load", text=self._join(parts, language), value_bytes=int(weights),
                            sources=["computed"], cite=POOL_CITE)

    def _pallas_blocks(self, s: Stated, language: str) -> FigureAnswer | None:
        """A Pallas matmul's VMEM from its block sizes (bm, bk, bn): the x, y and output blocks of
        one grid step, twice over (double buffering), plus a float32 accumulator in scratch where
        one is named; set against the scoped limit and physical VMEM of the generation named."""
        v = s.values
        bm, bk, bn = v.get("block_m"), v.get("block_k"), v.get("block_n")
        if not (bm and bk and bn) or s.gpu:  # a GPU kernel's blocks live in shared memory, not VMEM
            return None
        dtype = s.dtype
        if "accumulator" in s.cues and len(s.dtypes_named) > 1:  # "bf16 blocks, an f32 accumulator"
            dtype = next((d for d, _ in self._dtypes if d.name in s.dtypes_named and d.bytes < 4), dtype)
        dtype_bytes, dtype_name = (dtype.bytes, dtype.name) if dtype else (4, "float32")
        # each operand in its own dtype where one is named ("x bf16, w int8, out bf16"), else the blocks'
        own = {k: (d.bytes, d.name) for k, d in s.operand_dtypes.items()}
        (xb, xd), (yb, yd), (ob, od) = (own.get(k, (dtype_bytes, dtype_name)) for k in ("x", "y", "out"))
        blocks = bm * bk * xb + bk * bn * yb + bm * bn * ob
        acc = bm * bn * 4 if "accumulator" in s.cues else 0
        # each block as many times as its buffers (two unless the asker says otherwise: "RHS triple-buffered")
        xn, yn, on = (s.operand_buffers.get(k, 2) for k in ("x", "y", "out"))
        buffered = xn * bm * bk * xb + yn * bk * bn * yb + on * bm * bn * ob
        total = buffered + acc
        values = dict(bm=_num(bm), bk=_num(bk), bn=_num(bn), dtype=dtype_name, blocks=format_bytes(blocks),
                      total=format_bytes(total))
        if (xn, yn, on) != (2, 2, 2):  # buffer counts said: each block with its count
            accd = "int32" if "int_accumulator" in s.cues else "float32"
            values |= dict(xd=xd, yd=yd, od=od, xb=format_bytes(bm * bk * xb), yb=format_bytes(bk * bn * yb),
                           ob=format_bytes(bm * bn * ob), xbuf=xn, ybuf=yn, obuf=on)
            values.pop("dtype"), values.pop("blocks")
            parts = [self._msg("pallas_blocks_buffered_acc", language, buffered=format_bytes(buffered),
                               acc=format_bytes(acc), accd=accd, **values) if acc
                     else self._msg("pallas_blocks_buffered", language, **values)]
        elif len({xd, yd, od}) > 1:  # mixed: each block with its dtype and size
            # a 32-bit accumulator named as an integer one (int8 × int8 sums in int32) keeps that name
            accd = "int32" if "int_accumulator" in s.cues else "float32"
            values |= dict(xd=xd, yd=yd, od=od, xb=format_bytes(bm * bk * xb), yb=format_bytes(bk * bn * yb),
                           ob=format_bytes(bm * bn * ob))
            parts = [self._msg("pallas_blocks_mixed_acc", language, acc=format_bytes(acc), accd=accd,
                               double=format_bytes(2 * blocks), **values) if acc
                     else self._msg("pallas_blocks_mixed", language, **values)]
        else:
            parts = [self._msg("pallas_blocks_acc", language, acc=format_bytes(acc), double=format_bytes(2 * blocks),
                               **values) if acc else self._msg("pallas_blocks", language, **values)]
        hw = self.figures.gens.get(s.device.removeprefix("TPU ")) if s.device else None
        if hw is not None and hw.scoped_vmem_default_bytes and hw.vmem_bytes:
            key = ("pallas_blocks_within" if total <= hw.scoped_vmem_default_bytes
                   else "pallas_blocks_raise" if total <= hw.vmem_bytes else "pallas_blocks_beyond")
            # whole MiB with one to spare (the compiler adds a little internal scratch: a kernel counted
            # at 28.00 MiB asked for 28.25), never above the physical VMEM
            limit = min((-(-int(total) // MiB) + 1) * MiB, hw.vmem_bytes)
            extra = {"limit": f"{limit // MiB} * 1024 * 1024"} if key == "pallas_blocks_raise" else {}
            parts.append(self._msg(key, language, device=s.device, scoped=format_bytes(hw.scoped_vmem_default_bytes),
                                   physical=format_bytes(hw.vmem_bytes), **extra))
        if dtype is None:
            parts.append(self._msg("assumed", language, what="float32"))
        # over the default limit: the code that computes the kernel's limit from these blocks
        snippet = None
        code = "code_asked" in s.cues  # "give me the pallas_call for these blocks": the kernel too
        if self.data.limit_snippet and (hw is None or total > (hw.scoped_vmem_default_bytes or 0) or code):
            names = {"bfloat16": "bfloat16", "float32": "float32", "int8": "int8", "int4": "int4", "uint8": "uint8"}
            accd = "int32" if "int_accumulator" in s.cues else "float32"
            filled = dict(physical_mib=(hw.vmem_bytes // MiB) if hw is not None and hw.vmem_bytes else 128,
                          bm=int(bm), bk=int(bk), bn=int(bn), xd=names.get(xd, "float32"), yd=names.get(yd, "float32"),
                          od=names.get(od, "float32"), xbuf=xn, ybuf=yn, obuf=on,
                          scratch=f"((bm, bn), jnp.{accd})" if acc or (code and accd == "float32") else "")
            snippet = self.data.limit_snippet.format(**filled)
            if code and self.data.matmul_snippet and accd == "float32" and xd == yd:
                snippet = snippet.rstrip("\n") + self.data.matmul_snippet.format(**filled)
        return FigureAnswer(kind=KIND, subject="pallas_blocks", text=self._join(parts, language),
                            value_bytes=int(total), sources=["computed"], cite=BLOCKS_CITE, snippet=snippet)

    def _buckets(self, s: Stated, language: str) -> FigureAnswer | None:
        """Length buckets up to the longest input the question states: powers of two from 128,
        the last one the maximum rounded up to a multiple of 128 where the next power of two would
        pad far beyond it. Each bucket is one compile (per batch size), whatever the inputs."""
        longest = s.values.get("seq")
        if (not {"buckets", "variable_lengths"} & s.cues or "buckets_given" in s.cues
                or not longest or longest < 2 * BUCKET_MIN):
            return None
        top = -(-int(longest) // BUCKET_MIN) * BUCKET_MIN
        buckets, b = [], BUCKET_MIN
        while b < top:
            buckets.append(b)
            b *= 2
        buckets.append(b if b <= 1.25 * top else top)
        text = self._msg("buckets", language, longest=_num(longest), buckets=", ".join(_num(x) for x in buckets),
                         count=_num(len(buckets)))
        return FigureAnswer(kind=KIND, subject="buckets", text=text, value_bytes=0, sources=["computed"],
                            cite=BUCKETS_CITE)

    def _pool_shares(self, text: str, s: Stated, language: str, turn: str | None = None) -> FigureAnswer | None:
        """`XLA_PYTHON_CLIENT_MEM_FRACTION` for each process whose need the question states on the
        GPU it names ("training needs 45GB, eval 20GB, one 80GB A100"): its share of the card with
        a little room, rounded up to .05; and whether the shares together leave the card room."""
        # two or more JAX processes whose needs are stated; a program of another framework beside
        # JAX ("a PyTorch service takes 20GB") is what the pool leaves, which the short answer says;
        # processes that were each meant to have a GPU of their own need placing, not shares
        if (not (s.gpu and s.card_memory and "mem_fraction" in s.cues)
                or {"other_program", "placement"} & set(s.cues)):
            return None
        low_text = (text or "").lower()
        if sum(any(p.search(low_text) for p in patterns) for _, patterns in self._gpus) >= 2:
            return None  # two different cards ("a 4090 and a 2070"): each has its own share, not one card's split
        if not (_PROCESSES.search(low_text) or _process_count(text or "")):
            return None  # several sizes but no processes sharing the card (measurements, two cards' figures)
        card = s.card_memory / (1 << 30)  # in the unit the question writes ("80GB" is read as 80)
        def each(part: str) -> list[float]:
            """The needs `part` states, one stated for "3 runs, each ~5 GiB at its peak" counted 3 times."""
            found = self._needs(part, card)
            # a run added by its ordinal multiplies the need only when it is said of each ("a third run,
            # each ~22 GiB": three of 22), not of the one added ("a 4th process, peak 12.5 GiB")
            counted = _process_count(part, ordinals=bool(_EACH.search(part.lower())))
            return found * counted if len(found) == 1 and counted and 2 <= counted <= 16 else found

        needs = each(text or "")
        counted = _process_count(turn) if turn else None
        if turn and counted and 2 <= counted <= 16 and not self._needs(turn, card) and needs:
            # "the exact launch lines for the 3 runs": the runs as last stated, the newest need for each
            needs = [self._needs(text, card)[-1]] * counted
        elif turn and text.endswith(turn) and len(text) > len(turn):
            # a figure the newest turn gives replaces an earlier one within 15 % of it: the same
            # process measured again (a failed 38 GB allocation, then its 41.2 GB peak); another
            # figure is another process ("add a 4th process, peak 12.5 GiB" to three of 9.2)
            newest = each(turn)
            if len(set(newest)) == 1 and len(newest) >= 2:  # "a third run, each ~22 GiB": the new setup whole
                needs = newest
            else:
                needs = [n for n in each(text[: -len(turn)])
                         if not any(abs(n - m) <= 0.15 * m for m in newest)] + newest
        if len(needs) < 2 or (len(set(needs)) == 1 and not _process_count(text or "")):
            return None  # (one figure said twice, "allocate 5.96GiB ... why not for 5.96 GiB?", is one need)
        shares = [math.ceil((n / card + SHARE_MARGIN) * 20) / 20 for n in needs]
        if len(set(needs)) == 1 and sum(shares) > MAX_SHARES:
            # equal processes that the rounding to .05 does not fit (3 × 22 GiB on 80): the smallest
            # whole-percent share with a little room
            shares = [math.ceil((n / card + EQUAL_SHARE_MARGIN) * 100) / 100 for n in needs]
        listed = ", ".join(f"{_num(n)} GB → `XLA_PYTHON_CLIENT_MEM_FRACTION={f:.2f}`".replace("=0.", "=.")
                           + f" ({_num(round(f * card, 1))} GB)" for n, f in zip(needs, shares))
        total = sum(shares)
        values = {"card": f"{_num(round(card, 2))} GB", "shares": listed, "total": f"{total:.2f}".lstrip("0")}
        if total <= MAX_SHARES:
            text_ = self._msg("pool_shares", language, left=f"{_num(round((1 - total) * card, 1))} GB", **values)
        else:
            text_ = self._msg("pool_shares_too_much", language, **values)
        if total > MAX_SHARES and len(set(needs)) == 1:  # equal processes: the most each may have, and how many fit
            most = math.floor(MAX_SHARES / len(needs) * 100) / 100
            text_ = join_sentences([text_, self._msg(
                "pool_shares_most_each", language, count=len(needs), most=_fraction(most),
                pool=f"{_num(round(most * card, 1))} GB", need=f"{_num(needs[0])} GB",
                fit=int(MAX_SHARES // shares[0]))], language)
        proposed = (_SHARE_EACH.search((turn or text or "").lower())
                    or _SHARE_ALL.search(_plain_digits(turn or text or "").lower()))
        if proposed and len(set(needs)) == 1:  # "is .33 each fine?"
            share = float(proposed.group(1))
            together = share * len(needs)
            said = dict(proposed=_fraction(share), count=len(needs), total=f"{together:.2f}".lstrip("0"),
                        left=f"{_num(round((1 - together) * card, 1))} GB")
            fits = share * card >= needs[0] and together <= MAX_SHARES
            key = ("pool_share_proposed_ok" if fits else "pool_share_proposed_over" if together > 1
                   else "pool_share_proposed_not")
            text_ = join_sentences([text_, self._msg(key, language, **said)], language)
        return FigureAnswer(kind=KIND, subject="pool_shares", text=text_, value_bytes=int(total * s.card_memory),
                            sources=["computed"], cite=POOL_CITE, snippet=_launch_lines(shares, text))

    def _pool_per_process(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """One XLA_PYTHON_CLIENT_MEM_FRACTION set for each of several processes on one card (pytest-xdist
        workers with 0.1 each): each pool, and for each count of processes said, whether their pools and
        CUDA contexts fit the card; the most that fit."""
        counts = _process_counts(text or "")
        # (a share proposed for each of them counts too: "if I set 0.08 for each worker, do the 12 fit?")
        low = (text or "").lower()
        proposed = (_fractions_named(text, self._cues.get("mem_fraction", []))
                    if _EACH.search(low) and _WORKERS.search(low) else [])
        share = s.pool_share or (proposed[-1] if proposed else None)
        if not (s.gpu and s.card_memory and share and counts) or len(counts) > 4:
            return None
        card = s.card_memory
        per = share * card
        rows = []
        for n in counts:
            need = n * (per + CUDA_CONTEXT)
            rest = card - n * per  # what the pools leave for the contexts
            if need <= card:
                verdict = self._msg("vmem_fits", language, left=format_bytes(card - need))
            elif rest / n >= CUDA_CONTEXT / 2:  # a context's size varies: within it, tight rather than over
                verdict = self._msg("pool_contexts_tight", language, rest=format_bytes(rest), n=n,
                                    each=format_bytes(rest / n))
            else:
                verdict = self._msg("vmem_over", language, over=format_bytes(need - card))
            rows.append(self._msg("pool_processes_row", language, n=n, pools=format_bytes(n * per),
                                  contexts=format_bytes(n * CUDA_CONTEXT), need=format_bytes(need), verdict=verdict))
        most = int(card // (per + CUDA_CONTEXT / 2))  # (the most that fit, tight ones included)
        text_ = self._msg("pool_per_process", language, fraction=_fraction(share).rstrip("0"), card=format_bytes(card),
                          per=format_bytes(per), context=format_bytes(CUDA_CONTEXT), rows="; ".join(rows),
                          most=most)
        return FigureAnswer(kind=KIND, subject="pool_shares", text=text_, value_bytes=int(per),
                            sources=["computed"], cite=POOL_CITE)

    def _pool_even_split(self, text: str, s: Stated, language: str, conversation: str = "") -> FigureAnswer | None:
        """The one XLA_PYTHON_CLIENT_MEM_FRACTION for each of N processes sharing the GPU named, asked
        without a share set ("2 policy servers on this one GPU, exactly what fraction each?"): the
        card less N CUDA contexts and a margin, split N ways, rounded down to .05; against the need
        each one has where the text states it."""
        low = _plain_digits(text or "").lower()
        # (the processes counted in an earlier turn, "pytest -n 12", where this one only asks the fraction again)
        counts = _process_counts(low) or _process_counts(_plain_digits(conversation or "").lower())
        per_card = {int(next(g for g in m.groups() if g)) for m in _PER_CARD_COUNT.finditer(low)}
        if len(counts) > 1 and len(per_card) == 1:  # "4 workers per GPU, so 32 workers on the 8 cards": 4 share one
            counts = sorted(per_card)
        # (or, in a conversation about the pool's settings, "4 seeds in parallel on the same card: what do I set?")
        pool_talk = "mem_fraction" in s.cues or _POOL_SETTING_SAID.search(_plain_digits(conversation or "").lower())
        asked = _FRACTION_ASKED.search(low) or (_SETTING_ASKED.search(low) and _SAME_CARD.search(low))
        if not (s.gpu and s.card_memory and pool_talk and not s.pool_share and len(counts) == 1 and asked):
            return None
        n, card = counts[0], s.card_memory
        # a few processes: two contexts' room each, shares of .05; many (pytest -n 12): one context each, shares
        # of .01, or nothing would be left to split
        many = n >= MANY_PROCESSES
        steps = 100 if many else 20
        fraction = math.floor((card - n * (1 if many else 2) * CUDA_CONTEXT) / n / card * steps) / steps
        if fraction <= 0:
            return None
        per = fraction * card
        needs = [float(m.group(1)) * (1 << 30) for m in _GB.finditer(low)
                 if _NEED_NEAR.search(low[max(0, m.start() - 40): m.start()] + " " + low[m.end(): m.end() + 20])
                 and float(m.group(1)) * (1 << 30) < card and not _a_pool_seen(float(m.group(1)), low, card / (1 << 30))]
        values = dict(n=n, card=format_bytes(card), fraction=_fraction(fraction), per=format_bytes(per),
                      pools=format_bytes(n * per), left=format_bytes(card - n * per), context=format_bytes(CUDA_CONTEXT))
        parts = [self._msg("pool_even_split", language, **values)]
        if needs:
            need = min(needs)
            parts.append(self._msg("pool_even_need_fits", language, need=format_bytes(need), per=format_bytes(per))
                         if need <= per else
                         self._msg("pool_even_need_short", language, need=format_bytes(need),
                                   most=int(card // (need + 2 * CUDA_CONTEXT))))
        return FigureAnswer(kind=KIND, subject="pool_even_split", text=self._join(parts, language),
                            value_bytes=int(per), sources=["computed"], cite=POOL_CITE)

    def _pool_split(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """Several JAX processes on one card that something else already holds part of (a desktop's
        1250 MiB "before the start"): the rest split between them, less each process's CUDA context."""
        if not (s.gpu and s.card_memory and "mem_fraction" in s.cues):
            return None
        kept = _BEFORE_MIB.search((text or "").lower())
        n = _process_count(text or "") or 0
        if kept is None or not 2 <= n <= 16:
            return None
        card, held = s.card_memory, int(kept.group(1)) << 20
        each = (card - held) / n
        share = math.floor((each - CUDA_CONTEXT) / card * 100) / 100
        if share <= 0:
            return None
        text_ = self._msg("pool_split", language, kept=format_bytes(held), n=n, card=format_bytes(card),
                          each=format_bytes(each), share=_fraction(share), pool=format_bytes(share * card),
                          usual=format_bytes(0.45 * card * n), left=format_bytes(card - held))
        proposed = [f for f in _fractions_named(text, self._cues.get("mem_fraction", [])) if abs(f - share) > 0.005]
        if proposed:  # "is 0.33 enough?": that share against what the other holder leaves
            f = proposed[-1]
            together = n * f
            rest = card - held - n * f * card  # what is left for the n contexts
            said = dict(proposed=_fraction(f).rstrip("0"), count=n, total=f"{together:.2f}".lstrip("0"),
                        left=format_bytes(max(rest, 0)))
            ok = rest >= n * CUDA_CONTEXT
            text_ = self._join([text_, self._msg("pool_share_proposed_ok" if ok else "pool_share_proposed_not",
                                                 language, **said)], language)
        return FigureAnswer(kind=KIND, subject="pool_shares", text=text_, value_bytes=int(share * card * n),
                            sources=["computed"], cite=POOL_CITE, snippet=_launch_lines([share] * n))

    def _capped(self, text: str) -> list[float]:
        """The memory figures right after the words of a cap ("at most 8GB", "لا يأخذ أكثر من 8GB")."""
        low = (text or "").lower()
        out = []
        for pattern in self._cues["cap"]:
            for m in pattern.finditer(low):
                if _PROGRAM_FIGURE.search(low, max(0, m.start() - PROGRAM_FIGURE_REACH), m.start()):
                    continue  # "the matrix needs only 8 GB": a need, not a cap
                figure = _GB.search(low[m.end(): m.end() + CAP_REACH])
                if figure is not None:
                    out.append(float(figure.group(1)))
        return out

    def _needs(self, text: str, card: float) -> list[float]:
        """The memory figures `text` states as needs on a `card`-sized GPU: not what is said to be
        free, nor the card itself, nor JAX's default pool on it (the 60 of 80 GB seen taken)."""
        low = (text or "").lower()
        needs = [float(m.group(1)) for m in _GB.finditer(low) if not _FREE_AFTER.match(low, m.end())
                 # nor a used/total pair ("22G/24G"), nor a card's size after its model ("2070(8G)")
                 and not low[m.end():].lstrip().startswith("/") and not low[:m.start()].rstrip().endswith("/")
                 and not _MODEL_SIZE.search(low[:m.start()])]
        return [n for n in needs if 0 < n < card * 0.98 and not _pool_seen(n, card)]

    def _pool_share_short(self, turn: str, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """One process's need (the newest turn's, else the conversation's) above the
        `XLA_PYTHON_CLIENT_MEM_FRACTION` share it was given ("set .45 on both; the trainer now
        OOMs allocating 38GiB"): the share it needs, and what that leaves the others."""
        limit = _LIMIT.search((turn or "").lower())
        if limit and s.card_memory:  # memory_stats()' bytes_limit is the share in effect (over a share read)
            s = replace(s, pool_share=round(int(limit.group(1)) / s.card_memory, 2))
        if not (s.gpu and s.card_memory and s.pool_share and "mem_fraction" in s.cues):
            return None
        card = s.card_memory / (1 << 30)
        needs = _in_use_and_request(turn) or self._needs(turn, card) or self._needs(text, card)
        if len(needs) != 1 or needs[0] <= s.pool_share * card:
            return None
        need = needs[0]
        share = math.ceil((need / card + SHARE_MARGIN) * 20) / 20
        if share > MAX_SHARES:
            return None  # the one process needs the card: not a question of shares
        left = round(MAX_SHARES - share, 2)
        if left < MIN_OTHER_SHARE or _UNIFIED_SAID.search((text or "").lower()):
            return None  # nothing left for other processes (one process), or unified memory: not a split of the card

        text_ = self._msg("pool_share_short", language, card=f"{_num(round(card, 2))} GB", fraction=_fraction(s.pool_share),
                          pool=f"{_num(round(s.pool_share * card, 1))} GB", need=f"{_num(need)} GB",
                          share=_fraction(share), share_gb=f"{_num(round(share * card, 1))} GB", left=_fraction(left),
                          left_gb=f"{_num(round(left * card, 1))} GB")
        return FigureAnswer(kind=KIND, subject="pool_shares", text=text_, value_bytes=int(share * s.card_memory),
                            sources=["computed"], cite=POOL_CITE)

    def _pool_ceiling(self, text: str, s: Stated, language: str, turn: str | None = None) -> FigureAnswer | None:
        """A memory figure the question gives that is JAX's default pool on the GPU it names (60 of
        80 GB): the pool is what filled up, not the card."""
        if not (s.gpu and s.card_memory):
            return None
        card = s.card_memory
        pool = GPU_POOL_SHARE * card
        low = _DECIMAL_COMMA.sub(r"\1.\2", text or "").lower()  # ("~11,3 Gio occupés")
        # a program's own figure ("only reduced to 146.66GiB", "the step needs 61 GB", "I measured: b96
        # 125.8 GiB") is what it needs, not what nvidia-smi shows the pool holding (a profiler's peak at
        # the pool's size is the pool filling up, and stays one)
        figures = [(float(m.group(1)) * (1 << 30), f"{m.group(1)} GB") for m in _GB.finditer(low)
                   if not _PROGRAM_FIGURE.search(low, max(0, m.start() - PROGRAM_FIGURE_REACH), m.start())]
        figures += [(int(m.group(1)) << 20, f"{m.group(1)} MiB") for m in _CARD_MIB.finditer(low)]  # nvidia-smi's
        # a decimal without its unit where the card is named in GB ("only ~7.8 available, the card has 10")
        figures += [(float(m.group(1)) * (1 << 30), m.group(1)) for m in _BARE_DECIMAL.finditer(low)
                    if not _PROGRAM_FIGURE.search(low, max(0, m.start() - PROGRAM_FIGURE_REACH), m.start())
                    # (a version, "Ubuntu 20.04", "CUDA 12.3", is no figure of memory)
                    and not _VERSION_BEFORE.search(low, max(0, m.start() - 24), m.start())]
        used = [seen for seen, _ in figures if abs(seen - card) > 0.02 * card]
        # a use above the default pool ("b128 148.2 GiB" of 164): this process's pool is not 75% of the
        # card, so a figure near 75% is one of its uses, not the pool
        above = any(pool + 0.09 * card < seen < 0.98 * card for seen in used) and "leak_asked" not in s.cues
        # what the card held before the program started (a desktop, another process): not JAX's
        before = [(int(m.group(1)) << 20) for m in _BEFORE_MIB.finditer(low)]
        if before:
            figures = [(seen - before[0], f"{int(seen - before[0]) >> 20} MiB") for seen, said in figures
                       if seen > before[0]]
        for seen, said in figures:
            # the pool, or the pool and the process's CUDA context above it (a few hundred MB)
            if not above and abs(seen - card) > 0.02 * card and _pool_seen(seen, card):
                if "preallocate_off" in s.cues and "oom" not in s.cues:
                    # no preallocation: the pool grew to its ceiling, the default share whatever
                    # other share the text proposes (growth, not a setting that came too late)
                    ceiling = int((s.pool_share if s.pool_share else 0.99) * card)
                    return FigureAnswer(kind=KIND, subject="pool_grows_to_cap", text=self._msg(
                        "pool_grows_to_cap", language, seen=said, memory=format_bytes(card), pool=format_bytes(pool),
                        ceiling=format_bytes(ceiling)), value_bytes=int(pool), sources=["computed"], cite=POOL_CITE)
                later = turn is not None and turn != text and said.split()[0] not in turn.lower()
                if s.pool_share and abs(s.pool_share - GPU_POOL_SHARE) * card > 0.05 * card and not later:
                    # (a share a later turn asks about, "and with 0.88?", is a question, not a setting that failed)
                    # the default pool although the text sets another share: the setting came too
                    # late (a notebook's os.environ after JAX started), not a pool too small
                    expected = int(s.pool_share * card)
                    return FigureAnswer(kind=KIND, subject="pool_setting_ignored", text=self._msg(
                        "pool_setting_ignored", language, seen=said, memory=format_bytes(card),
                        pool=format_bytes(pool), fraction=_fraction(s.pool_share),
                        expected=format_bytes(expected)), value_bytes=expected, sources=["computed"],
                        cite=POOL_CITE)
                if "oom" not in s.cues and ("other_program" not in s.cues or "compared" in s.cues):
                    # seen, not failing ("nnx shows 61GB, pytorch 38GB"): the pool, not the use
                    return FigureAnswer(kind=KIND, subject="gpu_pool_seen", text=self._msg(
                        "pool_seen", language, seen=said, memory=format_bytes(card), pool=format_bytes(pool)),
                        value_bytes=int(pool), sources=["computed"], cite=POOL_CITE)
                if "other_program" in s.cues:
                    # held while another framework on the card needs it ("torch OOMs"): the pool is
                    # kept for the process's life, not leaked, and it is too big, not too small
                    return FigureAnswer(kind=KIND, subject="pool_held", text=self._msg(
                        "pool_held", language, seen=said, memory=format_bytes(card), pool=format_bytes(pool)),
                        value_bytes=int(pool), sources=["computed"], cite=POOL_CITE)
                return FigureAnswer(kind=KIND, subject="gpu_pool", text=self._msg(
                    "pool_ceiling", language, seen=said, memory=format_bytes(card),
                    pool=format_bytes(pool)), value_bytes=int(pool), sources=["computed"], cite=POOL_CITE)
        if "leak_asked" in s.cues:  # "22G of 24G held, is it leaking?": another share of the card, preallocated
            for seen, said in figures:
                share = seen / card
                if 0.5 <= share <= 0.98 and abs(share - GPU_POOL_SHARE) > 0.03:
                    return FigureAnswer(kind=KIND, subject="pool_other_share", text=self._msg(
                        "pool_other_share", language, seen=said, memory=format_bytes(card),
                        percent=f"{100 * share:.0f}%", fraction=_fraction(math.floor(share * 20) / 20)),
                        value_bytes=int(seen), sources=["computed"], cite=POOL_CITE)
        return None

    def _kv(self, s: Stated, language: str) -> FigureAnswer | None:
        v = s.values
        # a KV cache named, or implied: serving a model whose attention shape the text gives
        if not ("kv_cache" in s.cues or ("inference" in s.cues and (v.get("kv_heads") or v.get("heads")))):
            return None
        layers, batch, seq = v.get("layers"), v.get("batch"), v.get("max_len") or v.get("seq")
        if not v.get("max_len") and v.get("prompt") and v.get("new_tokens"):
            seq = v["prompt"] + v["new_tokens"]  # "700 tokens of prompt + 1024 generated": the cache holds both
        heads = v.get("kv_heads") or v.get("heads")
        head_dim = v.get("head_dim")
        assumed = []
        if not head_dim and v.get("hidden") and v.get("heads"):
            head_dim = v["hidden"] / v["heads"]
            assumed.append(f"head dim = {_num(v['hidden'])} / {_num(v['heads'])} = {_num(head_dim)}")
        elif not heads and not head_dim and v.get("hidden") and "kv_cache" in s.cues:
            # only d_model given: without GQA the K (and the V) of a token is d_model wide, however it
            # is split into heads (128 wide, the usual, for the line's sake)
            head_dim = 128 if v["hidden"] % 128 == 0 else 64 if v["hidden"] % 64 == 0 else v["hidden"]
            heads = v["hidden"] / head_dim
            assumed.append(f"no GQA: KV heads × head dim = d_model {_num(v['hidden'])}")
        if not all((layers, heads, head_dim)) or not (seq or "per_token" in s.cues or v.get("kv_budget")
                                                      or "tokens_fit" in s.cues):
            return None
        if s.from_model and {"layers", "kv_heads", "head_dim"} & set(s.from_model):
            assumed.insert(0, f"{s.model}: " + ", ".join(
                f"{k.replace('_', ' ')} {_num(v[k])}" for k in ("layers", "kv_heads", "head_dim") if k in s.from_model))
        if not v.get("kv_heads") and v.get("heads"):
            assumed.append(f"KV heads = {_num(heads)}")
        dtype = s.kv_dtype or s.dtype  # "weights int8, KV cache bf16": the cache's own dtype
        dtype_bytes, dtype_name = (dtype.bytes, dtype.name) if dtype else (2, "bfloat16")
        if dtype is None:
            assumed.append("bfloat16")
        per_token, held = self._kv_per_token(s, language, layers, heads, head_dim, dtype_bytes, dtype_name, seq)
        if not seq:  # "how much KV per token?" (or a budget without a sequence's length): that line alone
            parts = [*per_token, *self._kv_tokens_left(s, language, layers, heads, head_dim, dtype_bytes),
                     *([self._msg("assumed", language, what=", ".join(assumed))] if assumed else [])]
            return FigureAnswer(kind=KIND, subject="kv_cache", text=self._join(parts, language),
                                value_bytes=int(2 * layers * heads * head_dim * dtype_bytes), sources=["computed"],
                                cite=KV_CITE)
        shape = dict(layers=_num(layers), seq=_num(seq), kv_heads=_num(heads), head_dim=_num(head_dim),
                     bytes=_num(dtype_bytes), dtype=dtype_name)
        per_seq = 2 * layers * seq * heads * head_dim * dtype_bytes
        # (what the weights alone leave for the cache is not what a training conversation has left:
        # the state beside it says that)
        afford = [] if "training" in s.cues and s.optimizer is not None else self._max_batch(s, language, per_seq, seq)
        if held:  # the cache's own budget per device decides how many fit, not the weights
            afford = held
        if not batch:  # what each sequence of the batch costs: the batch the asker can afford follows
            kv = per_seq
            parts = [*per_token, self._msg("kv_per_sequence", language, **shape, kv=format_bytes(kv)), *afford]
            if assumed:
                parts.append(self._msg("assumed", language, what=", ".join(assumed)))
            return FigureAnswer(kind=KIND, subject="kv_cache", text=self._join(parts, language),
                                value_bytes=int(kv), sources=["computed"], cite=KV_CITE)
        global_note = None
        if "per_device_batch" in s.cues and s.devices and s.devices > 1:
            # MaxText's per_device_batch_size: the cache holds that batch once per device
            global_note = self._msg("kv_global_batch", language, per=_num(batch), devices=s.devices,
                                    batch=_num(batch * s.devices))
            batch = batch * s.devices
        elements = 2 * layers * batch * seq * heads * head_dim
        kv = elements * dtype_bytes
        parts = [*per_token, self._msg("kv", language, **shape, batch=_num(batch), kv=format_bytes(kv))]
        parts += [global_note] if global_note else []
        if dtype_bytes > 1:
            parts.append(self._msg("kv_int8", language, kv_int8=format_bytes(elements)))
        prompt, new = v.get("prompt"), v.get("new_tokens")
        if v.get("max_len") and prompt and new and prompt + new < v["max_len"]:  # a cache longer than used
            needed = int(prompt + new)
            parts.append(self._msg("kv_max_len", language, max_len=_num(v["max_len"]), prompt=_num(prompt),
                                   new=_num(new), needed=_num(needed), kv_needed=format_bytes(kv * needed / v["max_len"])))
        if s.devices and s.devices > 1:
            parts.append(self._msg("kv_sharded", language, devices=s.devices,
                                   per_device=format_bytes(kv / s.devices)))
        parts += afford
        if assumed:
            parts.append(self._msg("assumed", language, what=", ".join(assumed)))
        return FigureAnswer(kind=KIND, subject="kv_cache", text=self._join(parts, language), value_bytes=int(kv),
                            sources=["computed"], cite=KV_CITE)

    def _kv_per_token(self, s: Stated, language: str, layers: float, heads: float, head_dim: float,
                      dtype_bytes: float, dtype_name: str, seq: float | None) -> tuple[list[str], list[str]]:
        """The cache per token, when asked ("¿cuánto ocupa por token?") or when a budget for the
        cache is given; per device with the KV heads split over the devices named; with a budget,
        the tokens, pages and sequences it holds: (the per-token lines, the budget's line)."""
        v = s.values
        budget, page = v.get("kv_budget"), v.get("page_size")
        if "per_token" not in s.cues and not budget and "tokens_fit" not in s.cues:
            return [], []
        per_token = 2 * layers * heads * head_dim * dtype_bytes
        devices = _kv_split(s, heads)
        lines = [self._msg("kv_per_token", language, layers=_num(layers), kv_heads=_num(heads),
                           head_dim=_num(head_dim), bytes=_num(dtype_bytes), dtype=dtype_name,
                           per_token=format_bytes(per_token))]
        per_device = per_token / devices
        if devices > 1:
            lines.append(self._msg("kv_per_token_sharded", language, devices=devices,
                                   heads_per=_num(heads / devices), per_device=format_bytes(per_device)))
        held: list[str] = []
        if budget:
            tokens = int(budget // per_device)
            if page and seq:
                pages = int(tokens // page)
                pages_per_seq = math.ceil(seq / page)
                held.append(self._msg("kv_budget_pages", language, budget=format_bytes(budget),
                                       per_device=format_bytes(per_device), tokens=_num(tokens),
                                       pages=_num(pages), page=_num(page), seq=_num(seq),
                                       pages_per_seq=_num(pages_per_seq), seqs=_num(pages // pages_per_seq)))
            elif seq:
                held.append(self._msg("kv_budget", language, budget=format_bytes(budget),
                                      per_device=format_bytes(per_device), tokens=_num(tokens), seq=_num(seq),
                                      seqs=_num(tokens // seq)))
        return lines, held

    def _hosts_batch(self, text: str, s: Stated, language: str) -> FigureAnswer | None:
        """A per-device batch on a slice of several hosts where the batch's loading is in question
        (`per_device * jax.device_count()` loaded on every host, "--worker=all"): the hosts and the
        devices on each, what each device gets when every host loads the global batch and splits it
        over its own devices, and what each host should load."""
        per_device = s.values.get("batch")
        if not (per_device and "hosts_batch" in s.cues and "per_device_batch" in s.cues):
            return None
        slices = self._slices_in(text)
        if not slices:
            return None
        name, gen, n = slices[-1]
        f, shape = self.figures.data.generations.get(gen), self._slice_shape(gen, n)
        if shape is None or f is None or f.chips_per_host is None or f.single_host_chips is None:
            return None
        chips, per_chip = shape[0], shape[1]
        if chips <= int(f.single_host_chips.value):
            return None  # one host: every device is local, the global batch is what it loads
        hosts = chips // int(f.chips_per_host.value)
        devices, local = chips * per_chip, int(f.chips_per_host.value) * per_chip
        per_device = int(per_device)
        loaded = per_device * devices
        parts = [self._msg("hosts_batch", language, slice=name, chips=chips, hosts=hosts, local=local,
                           per_device=per_device, devices=devices, loaded=_num(loaded), actual=_num(loaded // local),
                           times=hosts, per_host=_num(per_device * local))]
        seq = s.values.get("seq") or s.values.get("max_len")
        if seq:
            parts.append(self._msg("hosts_batch_tokens", language, seq=_num(seq),
                                   actual_tokens=_num(loaded // local * int(seq)), meant_tokens=_num(per_device * int(seq)),
                                   times=hosts))
        return FigureAnswer(kind=KIND, subject="hosts_batch", text=self._join(parts, language),
                            value_bytes=0, sources=["computed"], cite=TRAINING_CITE)

    def _kv_tokens_left(self, s: Stated, language: str, layers: float, heads: float, head_dim: float,
                        dtype_bytes: float) -> list[str]:
        """"How many tokens of KV cache fit per chip?" without a budget: what each device has left
        after its share of the weights (the share said, else the weights over the devices), over the
        cache's bytes per token there."""
        v = s.values
        if "tokens_fit" not in s.cues or v.get("kv_budget") or not s.device_memory:
            return []
        devices = s.devices if s.devices and s.devices > 1 else 1
        weights = v.get("state_per_chip") or (v["params"] * (s.dtype.bytes if s.dtype else 2) / devices
                                              if v.get("params") else None)
        if not weights or weights >= s.device_memory:
            return []
        per_device = 2 * layers * heads * head_dim * dtype_bytes / _kv_split(s, heads)
        free = s.device_memory - weights
        return [self._msg("kv_tokens_left", language, memory=format_bytes(s.device_memory), weights=format_bytes(weights),
                          free=format_bytes(free), per_device=format_bytes(per_device), tokens=_num(int(free // per_device)))]

    @staticmethod
    def _join(parts: list[str], language: str) -> str:
        return join_sentences(parts, language)

    def _max_batch(self, s: Stated, language: str, per_seq: float, seq: float) -> list[str]:
        """How many sequences fit beside the weights on one device, where both are known."""
        params = s.values.get("params")
        if not (params and s.device_memory and per_seq > 0):
            return []
        weights = params * (s.dtype.bytes if s.dtype else 2)
        devices = s.devices or 1
        reserve = s.values.get("reserve") or 0  # what the asker keeps free on each device
        free = (s.device_memory - reserve) * devices - weights
        if free <= 0 or reserve >= s.device_memory:
            return []
        kept = [self._msg("kv_reserve_kept", language, reserve=format_bytes(reserve))] if reserve else []
        if devices > 1:  # weights and cache both sharded over the devices named
            return [self._msg("kv_max_batch_sharded", language, devices=devices, memory=s.memory_label,
                              weights=format_bytes(weights), weights_per=format_bytes(weights / devices),
                              free_per=format_bytes(free / devices), per_seq_per=format_bytes(per_seq / devices),
                              max_batch=int(free // per_seq), seq=_num(seq)), *kept]
        return [self._msg("kv_max_batch", language, memory=s.memory_label, weights=format_bytes(weights),
                          free=format_bytes(free), per_seq=format_bytes(per_seq),
                          max_batch=int(free // per_seq), seq=_num(seq)), *kept]

    def _fit_verdict(self, need: float, room: float, language: str) -> str:
        """"it fits, X to spare" or "X over", of `need` bytes against `room` bytes."""
        return (self._msg("vmem_fits", language, left=format_bytes(room - need)) if need <= room
                else self._msg("vmem_over", language, over=format_bytes(need - room)))

    def _msg(self, key: str, language: str, **values: object) -> str:
        texts = self.data.messages[key].text
        template = texts.get(language) or texts["en"]
        return re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]), template)


#: memory_stats()' bytes in use and the failed request's bytes, as a log or a message states them
_IN_USE = re.compile(r"bytes_in_use\W{0,4}(\d{6,})")
_REQUEST = re.compile(r"allocate\s+(\d{6,})\s*bytes")
_LIMIT = re.compile(r"bytes_limit\W{0,4}(\d{6,})")


_FIELD_IN_UNITS = re.compile(r"(?<![a-z_])(argument|output|alias|temp)(?:s|_size(?:_in_bytes)?)?\s*[=:]?\s*"
                             r"(\d+(?:\.\d+)?)\s*(gib|gb|g|mib|mb|m)(?![a-z])")
_UNIT = {"gib": 1 << 30, "gb": 1 << 30, "g": 1 << 30, "mib": 1 << 20, "mb": 1 << 20, "m": 1 << 20}


def _analysis_in_units(text: str) -> dict[str, float]:
    """memory_analysis() fields the text writes in GiB or MiB ("argument 4.1 GiB, temp 9.8 GiB"),
    read only where the text names memory_analysis (a TPU log's "arguments 4.71G" is the log's)."""
    low = (text or "").lower()
    if "memory_analysis" not in low:
        return {}
    out: dict[str, float] = {}
    for m in _FIELD_IN_UNITS.finditer(low):
        out[f"analysis_{m.group(1)}"] = float(m.group(2)) * _UNIT[m.group(3)]  # the last one said wins
    return out


_MODEL_SIZE = re.compile(r"\d{3,4}\s*\(\s*$")  # "4090(" just before a size: the card's own
#: a bare number of KiB beside the flag that counts them ("=98304", "monter à 131072"): four to seven digits
_KIB_VALUE = re.compile(r"(?<![\w.])(\d{4,7})(?![\d.]|\s*(?:mib|mb|gib|gb|kib|kb|b\b|bytes|%))")
#: XLA's element types as its shapes write them ("u32[...]", "bf16[...]"), and their bytes
_XLA_TYPES = {"f32": ("float32", 4), "s32": ("int32", 4), "u32": ("uint32", 4), "bf16": ("bfloat16", 2),
              "f16": ("float16", 2), "s16": ("int16", 2), "u16": ("uint16", 2), "s8": ("int8", 1), "u8": ("uint8", 1),
              "pred": ("bool", 1), "f64": ("float64", 8), "s64": ("int64", 8), "u64": ("uint64", 8),
              "c64": ("complex64", 8), "f8e4m3fn": ("float8_e4m3fn", 1), "f8e5m2": ("float8_e5m2", 1)}
_XLA_TYPE_NAMES = "|".join(sorted(_XLA_TYPES, key=len, reverse=True))
_TYPED_PREFIX = re.compile(rf"(?<![a-z0-9_])({_XLA_TYPE_NAMES})\[$", re.IGNORECASE)
#: a shape in XLA's spelling, element type first ("u32[32,14336,4096]"): a buffer the asker copied from a dump
_TYPED_SHAPE = re.compile(rf"(?<![a-z0-9_])(?:{_XLA_TYPE_NAMES})\[\d+(?:\s*,\s*\d+)+\]", re.IGNORECASE)
#: a count of elements ("300,000 要素", "300000 entries", "1.2M elements")
_ELEMENT_COUNT = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:elements?|entries|entradas|elementos|éléments|elemente|einträge|"
                            r"элемент\w*|записей|要素|个元素|元素|요소|개 원소|원소|तत्व|عنصر|عناصر)")
#: the most of a card JAX's pool can usefully take (`XLA_PYTHON_CLIENT_MEM_FRACTION=.95`, the CUDA context beside it)
MAX_POOL_SHARE = 0.95
#: words that say several programs share a card (processes, workers, runs, a trainer and an eval ...)
_PROCESSES = re.compile(r"(?<![a-z])(?:process(?:es)?|workers?|runs|jobs|instances|services|trainers?|training|eval\w*|"
                        r"inference server|sampler|learner|actors?|server|notebooks?|sessions?|xdist|pytest|"
                        r"procesos?|processos?|processus|prozess\w*|instanz\w*|trainings?|entrenamiento\w*|treino\w*|"
                        r"entraînement\w*|процесс\w*|воркер\w*|обучени\w*)(?![a-z])|进程|训练|推理服务|プロセス|学習|"
                        r"ワーカー|프로세스|학습|워커|प्रोसेस|ट्रेनिंग|عملي(?:ة|ات)|تدريب")
#: the least share left for other processes that makes a split of the card worth proposing
MIN_OTHER_SHARE = 0.05
#: the rows of a batch moved to the device at a time, in the example a dataset too large for the card gets
DATA_BATCH_ROWS = 4096
#: a vocabulary this large named beside an OOM in training: its logits are sized unasked
LOGITS_VOCAB_MIN = 32000
#: SMEM per TensorCore, about (v4 and later; the compile error states the exact figure), and the share of
#: it a scalar-prefetched table should keep to, beside the kernel's other scalars
SMEM_BYTES = 1 << 20
SMEM_TABLE_SHARE = 0.75
#: what a kernel's other scalars take of SMEM beside a table (a table within this of the whole does not fit)
SMEM_SCALARS = 16 << 10
#: CUDA unified memory named, by its setting or in words ("unified memory try karta hu")
_UNIFIED_SAID = re.compile(r"tf_force_unified_memory|colabfold|run_docker\.py|unified[ -]memory|memoria unificada|mem[oó]ria unificada|mémoire unifiée|"
                           r"unified-speicher|einheitliche[nr]? speicher|унифицированн\w* памят\w*|统一内存|ユニファイドメモリ|"
                           r"통합 메모리|الذاكرة الموحدة|यूनिफाइड मेमोरी")
#: a GPU pool setting written out (XLA_PYTHON_CLIENT_MEM_FRACTION=4.0, TF_FORCE_UNIFIED_MEMORY=1)
#: an HLO dump's buffer worth naming (256 MiB), how many instructions of its shape to name, the
#: elementwise opcodes that a fusion folds into the reduction they feed, and how much smaller than
#: them (at most) that reduction's output is
HLO_BIG = 256 << 20
HLO_NAMES = 4
HLO_ELEMENTWISE = {"add", "subtract", "multiply", "divide", "broadcast", "exponential", "log", "maximum", "minimum",
                   "negate", "abs", "power", "sqrt", "rsqrt", "tanh", "convert", "select", "compare", "logistic"}
HLO_REDUCE_MAX = 1 << 16
#: a GPU's memory as a framework's device list reports it in a log (TensorFlow's "deviceMemorySize:
#: 4.63GiB", "Created TensorFlow device (... with 14678 MB memory)")
_LOG_CARD_MEMORY = re.compile(r"devicememorysize:\s*(\d+(?:\.\d+)?)\s*(gib|mib|mb|gb)\b"
                              r"|created tensorflow device[^\n]{0,120}?with\s+(\d+)\s*(mb)\s+memory", re.IGNORECASE)
_POOL_SETTING = re.compile(r"(?:XLA_(?:PYTHON_)?CLIENT_[A-Z_]+|TF_FORCE_UNIFIED_MEMORY)\s*[=:]\s*[\"']?[\w.]+",
                           re.IGNORECASE)
_FRACTION_SET = re.compile(r"xla_(?:python_)?client_mem_fraction\s*(?:[=:]\s*[\"']?|\s(?:de|from|von|от|с|de)\s+\d+(?:\.\d+)?\s+"
                           r"(?:a|to|auf|à|до|на|para|para o)\s+)(\d+(?:\.\d+)?|\.\d+)")  # (".80" too; "de 4 a 10": the new value)
_SWITCH = re.compile(r"switch|move to|moving to|upgrad|instead|rather than|wechsel|umsteig|passer (?:à|a|sur)|pasar a|"
                     r"cambiar a|mudar para|trocar para|перейти|переход|перейду|换成|换到|改用|换 |切り替え|乗り換え|"
                     r"바꾸|바꿔|옮기|स्विच|बदल|الانتقال|انتقل|أنتقل|التحويل")
_WISH = re.compile(r"want|should|only|just|limit|cap(?![a-z])|reserve|allot|wollen|will |soll|nur|veux|voudrais|devrait|"
                   r"seulement|quiero|querr|debería|solo|sólo|quero|deveria|só|хочу|должен|только|想|只|应该|だけ|ほしい|"
                   r"만 |만\)|원해|चाहता|चाहिए|सिर्फ़|أريد|فقط|يحجز")
#: between the items of a list in one sentence
_LIST_SEPARATOR = {"zh": "；", "ja": "、", "ar": "؛ ", "fr": " ; "}
_NAME_SEPARATOR = {"zh": "、", "ja": "、", "ar": "، "}
#: counts of tokens that are a part of a sequence, not its length: read first, then masked
_TOKEN_PARTS = ("page_size", "logits_chunk")
_MIB = re.compile(r"(?<![a-z0-9_.])(\d{1,6}(?:\.\d+)?)\s*(?:mib|mb|мб|миб)(?![a-z0-9_])")
#: what a mapped function makes for each element ("an intermediate of (1024,) float32 per point")
_PER_ITEM_SHAPE = re.compile(
    r"\(\s*(\d[\d,\s]*?)\s*,?\s*\)[^.\n()]{0,30}?(?:per|por|pro|par|по|每|ごと|마다|प्रति|لكل)\s*(?:each\s+)?"
    r"(?:point|ponto|punto|punkt|точк|点|ポイント|점|पॉइंट|نقطة|example|exemplo|ejemplo|beispiel|exemple|пример|样本|"
    r"サンプル|샘플|sample|amostra|muestra|item|row|linha|fila|zeile|ligne|строк)")
#: a size the text wants JAX to reach ("500 GB tak use karna hai", "want to use ~200GB")
_USE_WORDS = (r"(?:tak|use|usar|utiliser|utilisi|nutzen|verwenden|использ|用|使|사용|इस्तेमाल|استخدام|"
              r"need|braucht?|besoin|necesit|precis|нужн|需要|必要|필요|ज़रूरत|يحتاج)")
_SIZE_TO_USE = re.compile(rf"(?<![\d.])(\d{{1,5}}(?:\.\d+)?)\s*(gb|gib|tb|go|гб)(?![a-z0-9])(?!\s*(?:of\s+)?(?:ram|swap|host|cpu))"
                          rf"[^.\n?]{{0,20}}?{_USE_WORDS}"
                          rf"|{_USE_WORDS}[^.\n?\d]{{0,20}}?(?<![\d.])(\d{{1,5}}(?:\.\d+)?)\s*(gb|gib|tb|go|гб)(?![a-z0-9])")
#: a size said to be needed, used or asked for ("the docs say ~60GB", "tries to reserve 86.9 GB")
_NEED_NEAR = re.compile(
    r"need|require|requirement|documentation|\bdocs?\b|\bsays?\b|consum|\bused?\b|\buses\b|\btook\b|peak|reserv|"
    r"\ballocat|\basks? for|\bwants?\b|chahiye|zaroorat|zarurat|jarurat|يحتاج|تحتاج|محتاج|بتقول|تقول|استهلك|يستهلك|بيستهلك|يحجز|بيحجز|"
    r"нужн|требу|потребл|занима|занял|съел|использ|резерв|выдел|需要|消耗|占用|用了|申请|分配|必要|消費|使用|確保|要求|"
    r"필요|사용|소모|먹|할당|예약|चाहिए|ज़रूरत|जरूरत|लेता|लिया|लगता|इस्तेमाल|precis|consom|consum|\busa\b|\busou\b|"
    r"aloca|exige|requer|necesit|\busó\b|asignar|requier|\bpide\b|braucht|benötig|verbrauch|belegt|reserviert|"
    r"anforder|besoin|utilise|allouer|demande")
#: which fraction to set is asked ("what MEM_FRACTION would I need", "qual fração", "比例设多少")
_FRACTION_WORDS = r"(?:mem_fraction|fraction|fração|fracción|fraktion|anteil|доля|долю|比例|割合|비율|फ़्रैक्शन|النسبة)"
_FRACTION_ASKED = re.compile(
    r"(?:what|which|how much|welche\w*|wie ?viel|quel\w*|qual|cuál|cual|какую|какой|сколько|多少|どの|いくつ|얼마|몇|कितना|कितनी|كم|كام|ايه)"
    rf"[^.?!\n]{{0,40}}{_FRACTION_WORDS}|{_FRACTION_WORDS}[^.?!\n]{{0,40}}(?:\?|多少|いくつ|얼마|몇|कितना|كم|كام)")
#: a value asked for ("welchen Wert setz ich", "what value", "qual valor"): in a conversation about one setting, its value
_VALUE_ASKED = re.compile(r"(?:what|which|welche\w*|quel\w*|qual|cuál|cual|qué|que|какое|какую|多少|どの|얼마|어떤|कौन|कितना|أي|ما)"
                          r"[^.?!\n]{0,20}(?:value|wert|valeur|valor|значени\w*|值|値|값|मान|वैल्यू|قيمة)")
#: a fraction alone ("wenn ich 3.2 nehme"), not a size or a percent
#: a software's name or "version" just before a number: a version ("cuda 11.7", "colabfold 1.5.2"), not a value
_VERSION_BEFORE = re.compile(r"(?:cuda|cudnn|nvcc|driver|toolkit|python|jaxlib|jax|libtpu|torch|pytorch|tensorflow|tf|"
                             r"ubuntu|debian|centos|rhel|rocky|fedora|macos|windows|wsl|nccl|驱动|ドライバ|드라이버|"
                             r"numpy|colabfold|alphafold|flax|optax|rocm|version|versión|versão|verze|версия|версии|"
                             r"版本|バージョン|버전|संस्करण|إصدار|v)\s*(?:는|은|이|가|は|が|是|为|का|की|के)?\s*[=:]?\s*$")  # ("nvcc는 11.8")
_BARE_FRACTION = re.compile(r"(?<![\w.])(\d{1,2}\.\d{1,2})(?![\d.]|\s*(?:gb|gib|g\b|mb|mib|tb|%|x\b|×))")
#: one card asked to behave like another ("igual à de 40GB", "like the 40GB one", "wie die 40-GB-Karte")
_SAME_AS = re.compile(r"\b(?:same as|like the|as the|igual|como a|como la|como el|wie die|wie bei|comme la|comme sur|"
                      r"так же|как на|как у)\b|一样|相同|同じ|같[게이은]|जैसा|जैसी|مثل")
#: bytes said as such (memory_stats' keys, "bytes", "バイト"), a conversion to GiB asked, and a bare count of them
_BYTES_SAID = re.compile(r"bytes_in_use|bytes_limit|peak_bytes|memory_stats|\bbytes\b|バイト|字节|байт|octets|बाइट|بايت|바이트")
_GIB_ASKED = re.compile(r"gib|\bgb\b|giga|гб|гиб|ギガ|기가|जीबी|جيجا")
_BARE_BYTES = re.compile(r"(?<![\d.,\w])(\d{9,13})(?![\d.\w])(?!\s*(?:kib|mib|gib|kb|mb|gb|params?|parameters?|tokens?))")
#: a count other than the batch named with its value ("n_steps=25", "25 steps", "seq_len 512"), the peaks
#: measured at its values after it ("25 でピーク 19.6 GiB、50 で 38.4 GiB"), and the values a later turn asks about
_COUNT_NAMES = (r"(?:n_steps|num_steps|rollout_steps|steps|n_layers|num_layers|layers|seq_len|seq|length|iterations|iters|"
                r"unroll|ステップ数|步数|스텝 수|шаг\w*)")
_COUNT_NAMED = re.compile(rf"(?<![a-z])({_COUNT_NAMES})\s*[=:]?\s*\d")
#: a count said with a word before it and the memory measured there ("mit 1000 Synapsen ... 7.8 GB",
#: "with 2000 already 16 GB"): (that word, the count, the thing counted if named, the GB)
#: one value for each of several ("0.08 pour chaque worker", "0.1 each", "je 0,1")
_EACH = re.compile(r"(?<![a-z])(?:each|every|per (?:worker|process)|chaque|cada|jede[nrs]?|je |каждо\w*|на (?:воркер|процесс)|每个|每|各|각|हर|لكل|كل )")
_WORKERS = re.compile(r"(?:worker|xdist|pytest|воркер|ワーカー|워커)")
#: lax.map's chunk ("batch_size=64"), not a training batch's setting ("train_batch_size=4096")
_BATCH_SIZE_GIVEN = re.compile(r"(?<![a-z_])batch_size\s*=\s*(\d{1,6})(?!\d)")
_NO_ROWS = "\x00"  # (a placeholder for rows that are not there)
_NOUN_PEAK = re.compile(r"(?<![\w.])([^\W\d_]{2,8})\s+(\d{2,7})(?![\d.])(?:\s+([^\W\d_]{4,20}))?[^\d\n]{0,40}?"
                        r"(\d+(?:\.\d+)?)\s*(?:gib|gb|go|гб)(?![a-z])")
_COUNT_PEAK = re.compile(r"(?<![\w.])(\d{1,6})(?!\d|\.\d)\s*(?:steps?|ステップ|步|스텝)?\s*(?:で|では|に|에서|时|時|at|:|->|→|=>|,|、)?\s*"
                         r"(?:の|的)?\s*(?:peak\w*|ピーク|峰值|피크|пик)?\s*(?:は|が|=|:|of|is|at|de|von|à|a|в)?\s*(\d+(?:\.\d+)?)\s*(?:gib|gb|g)(?![a-z])")
_COUNT_ASKED = re.compile(rf"{_COUNT_NAMES}\s*[=:]?\s*(\d{{1,6}})(?!\d|\.\d)|(?<![\w.])(\d{{1,6}})\s*(?:steps|ステップ|步|스텝|шаг\w*)")
#: a field's grid written out ("721×1440的网格", "a 721 x 1440 grid")
#: a loop's carry, or a loop differentiated through: what it keeps is its residuals, not its outputs
_CARRY_OR_GRAD = re.compile(r"(?<![a-z])(?:carry|grad\w*|value_and_grad|backward|backprop\w*|vjp|градиент\w*|梯度|反向|勾配|逆伝播|"
                            r"그래디언트|역전파|gradiente\w*|rétropropag\w*|rückwärts\w*|ग्रेडिएंट|التدرج)")
#: the most that fits, asked ("what is the max I can fit", "el máximo que me cabe", "最多能放多少")
_MOST_ASKED = re.compile(r"(?<![a-z])(?:max|maximum|most|at most|höchstens|maximal\w*|máximo|máxima|maximum|au plus|"
                         r"максимум|максимальн\w*|最多|最大|최대|अधिकतम|ज़्यादा से ज़्यादा|أقصى|الحد الأقصى)(?![a-z])")
#: a state that is a tuple of named arrays, each of one shape ("y0 es una tupla (u, v), cada uno (256,256,256)")
_TUPLE_EACH = re.compile(r"\(\s*([a-z_]\w{0,12}(?:\s*,\s*[a-z_]\w{0,12}){1,5})\s*\)[^.\n(\[]{0,30}?"
                         r"(?:each|cada uno|cada una|cada|jeweils|je|chacun\w*|каждый|каждая|каждое|各|それぞれ|각각|हर एक|كل منها|كل واحد)",
                         re.IGNORECASE)


#: how many tensors of the shape written each layer holds ("три тензора экспертов", "three expert tensors",
#: "(gate/up/down)")
_TENSORS_COUNTED = re.compile(r"(?<![\w.])(\d|two|three|four|zwei|drei|vier|deux|trois|quatre|dos|tres|cuatro|dois|"
                              r"duas|três|quatro|два|две|три|четыре)\s+(?:[^\W\d_]+\s+){0,2}?"
                              r"(?:tensors?|тензор\w*|matri\w*|arrays?|tenseurs?|tensores|张量|テンソル|텐서|टेंसर|موترات)"
                              r"|(?<![a-z])(gate\s*/\s*up\s*/\s*down|w1\s*/\s*w2\s*/\s*w3)(?![a-z])", re.IGNORECASE)


def _request_of(size: float, requested: int | None) -> bool:
    """Whether a failed allocation of `requested` bytes is several arrays of `size` bytes (of one shape)."""
    return bool(requested and size and 0 < requested <= MAX_REQUEST
                and size * REQUEST_SLACK < requested <= REQUEST_PER_ELEMENT_MAX * size)


def _tensors_per_layer(text: str) -> int:
    """The tensors of the shape written that each layer holds, where the text counts them; else 1."""
    m = _TENSORS_COUNTED.search(text or "")
    if not m:
        return 1
    if m.group(2):
        return 3
    word = m.group(1).lower()
    count = int(word) if word.isdigit() else _BLOCK_COUNT_WORDS.get(word, 1)
    return count if 1 <= count <= 8 else 1


def _arrays_each(text: str) -> int:
    """How many arrays one state is, where the text names a tuple of them "each" of the shape; else 1."""
    m = _TUPLE_EACH.search(text or "")
    return len(m.group(1).split(",")) if m else 1


#: one step kept in k ("every 10th step", "каждый 10-й шаг", "每 10 步", "10 ステップごと", "10스텝마다")
_EVERY_KTH = re.compile(r"(?:every|each|каждый|каждые|каждого|chaque|cada|jeden|jede|alle|每隔?|한)\s*(\d{1,5})"
                        r"(?:-?(?:th|st|nd|rd|й|ый|ий|ème|e|º|°|te|ten|n))?(?![\d.])|(\d{1,5})\s*(?:ステップ|步|스텝)?\s*(?:ごと|마다|一次)")
#: an entropic transport's epsilon as the asker sets it ("epsilon=1e-2", "eps: 0.05")
_EPSILON = re.compile(r"(?<![a-z0-9_])(?:epsilon|eps)\s*[=:]\s*(\d+(?:\.\d+)?(?:e-?\d+)?)")
#: the side of a pair matrix a label right before a point count names ("x 65536点", "y も", "n=")
_POINT_LABEL = re.compile(r"(?<![a-z0-9_])([xynm])(?![a-z0-9_])")
#: the words that may stand between a side's label and its count ("x has 240000", "x and y: 65536")
_LABEL_JOINERS = frozenset({"has", "hat", "tem", "tiene", "and", "und", "et", "also", "auch", "both", "beide", "de", "of", "von",
                            "du", "do", "da", "com", "con", "with", "mit", "avec"})
#: words before a count that make it a limit met before, not the set's size ("my PyTorch version fit at most
#: ~100 examples")
_POINT_LIMIT = re.compile(r"(?:at most|up to|maximum|max\.?|(?<![a-z])fit(?:s|ted)?(?![a-z])|влезал\w*|помещал\w*|"
                          r"максимум|не больше|не более|до ~?$|höchstens|maximal|"
                          r"au plus|au maximum|como máximo|no máximo|a lo sumo|最多|最大|최대|अधिकतम|بحد أقصى)")
_GRID = re.compile(r"(?<![\d.])(\d{2,5})\s*[×x*]\s*(\d{2,5})(?![\d.]|\s*[×x*]\s*\d)")
#: a pool fraction above 1 set (unified memory: "XLA_PYTHON_CLIENT_MEM_FRACTION=\"4.0\"")
_FRACTION_ABOVE_ONE = re.compile(r"mem_fraction\W{0,4}([1-9]\d?(?:\.\d+)?)(?![\d])")
#: an image's resolution said ("resolution 1024", "分辨率", "解像度"), and pixels after a size ("512x512 px")
_RESOLUTION = re.compile(r"resolution|resoluci[oó]n|resolu[cç][aã]o|résolution|auflösung|разрешени|分辨率|解像度|해상도|"
                         r"रिज़ॉल्यूशन|ريزوليوشن|دقة الصورة")
_PIXELS_AFTER = re.compile(r"\s*(?:px|pixels?|пикс\w*|像素|ピクセル|픽셀|पिक्सेल|بكسل|images?|imágenes|imagens|bilder)(?![a-z])")
#: a card's own size just before a figure ("H100 80GB", "a100-40gb"), and host memory beside one
_CARD_BEFORE = re.compile(r"[a-z]\d{2,4}\s*-?\s*$|(?:rtx|gpu|card|karte|carte|placa|tarjeta|карт\w*|显卡|卡)\s*$")
#: right after a size, "past the card": how far beyond its memory a GPU's unified pool may go
_PAST_CARD = re.compile(r"\s*(?:of\s+)?(?:past|beyond|over|more than|above|über|au-delà|en plus|más allá|además|além|a mais|сверх|больше|超出|超过|以外|を超え|넘게|넘어|से आगे|से ज़्यादा|فوق|زيادة)"
                        r"[^.?!\n]{0,16}?(?:memory|hbm|vram|card|gpu|speicher|karte|mémoire|carte|memoria|tarjeta|memória|placa|памят|карт|显存|内存|卡|メモリ|カード|메모리|카드|मेमोरी|कार्ड|الذاكرة|البطاقة)")
#: the channels said right after a shape ("3308x3308, 128 canales"): its last axis
_CHANNELS_AFTER = re.compile(r"[^.?!\n\d]{0,12}?(\d{1,5})\s*(?:channels?|canales|canais|canaux|kanäle|kanälen|каналов|канала|"
                             r"通道|个通道|チャネル|チャンネル|채널|चैनल|قنوات|قناة)", re.IGNORECASE)
#: a sliding window's size and stride ("patch_size_in=96, patch_stride=4", "96x96 patches with stride 4"),
#: and the output window's size where the text gives one ("patch_size_out=64")
_PATCH_SIZE = re.compile(r"patch(?:_size)?(?:_in)?\s*[=:]\s*(\d{1,4})(?!\d)|(\d{1,4})\s*[x×]\s*\d{1,4}\s*(?:patches|patch\b)"
                         r"|(?:patches|patch|window|fenêtres?|ventanas?|janelas?|fenster|окн\w*|патч\w*|窗口|パッチ|패치)"
                         r"\s*(?:of|de|von|размером|大小为?)?\s*(\d{1,4})\s*[x×]\s*\d{1,4}")
_PATCH_STRIDE = re.compile(r"(?:patch_)?stride\w*\s*[=:]?\s*(\d{1,4})(?!\d)|(?:шаг\w*|步长|ストライド|스트라이드|passo|paso|pas|schrittweite)"
                           r"\s*[=:]?\s*(\d{1,4})(?!\d)")
_PATCH_OUT = re.compile(r"patch(?:_size)?_out\s*[=:]\s*(\d{1,4})(?!\d)")
#: a size set aside for the process itself ("~3 GB für den Python-Prozess selbst", "3 GB for the OS")
_FOR_PROCESS = re.compile(r"\s*(?:\w+\s+){0,2}?(?:for|für|pour|para|на|给|に|को|لـ?)\s*(?:the\s+|den\s+|die\s+|das\s+|le\s+|la\s+|el\s+|o\s+|a\s+)?"
                          r"(?:python|process|prozess|processus|proceso|processo|процесс|进程|プロセス|프로세스|प्रोसेस|العملية|"
                          r"system|os\b|betriebssystem|système|sistema|систем|系统|システム|시스템|सिस्टम|النظام|rest|resto|reste)")
_HOST_NEAR = re.compile(r"\bram\b|swap|host|cpu|memória do host|mémoire hôte|内存|ホスト|호스트|होस्ट|المضيف|хост")
_NEEDS_WORD = re.compile(r"need|braucht|besoin|necesit|precis|нужн|需要|必要|필요|ज़रूरत|يحتاج")
_ANY_GPU = re.compile(r"(?<![a-z0-9])(?:geforce|gtx|quadro|tesla|rtx|mx\d{3}|nvidia|cuda|gpu|nvidia-smi)(?![a-z])")
def _kv_split(s: Stated, heads: float) -> int:
    """The devices a KV cache's heads are split over (tensor parallelism): those named, where they
    divide the heads; else one."""
    return s.devices if s.devices and s.devices > 1 and heads % s.devices == 0 else 1


#: a MIG instance's profile ("1g.10gb", "3g.40gb"): its compute slices and its memory in GB
_MIG_PROFILE = re.compile(r"(?<![a-z0-9])([1-7])g\.(\d{1,3})gb(?![a-z0-9])")
#: a GPU split into MIG instances (one process sees one instance)
_MIG = re.compile(r"(?<![a-z0-9])mig(?![a-z])")
#: the card's total as nvidia-smi ("46068MiB") or JAX ("79.15 GiB total") reports it
_CARD_MIB = re.compile(r"(?<![\d.])(\d{4,6})\s*mib(?![a-z])")
#: a card's use before the program started ("Vor dem Start sind 1250 MiB belegt", "1250 MiB used before")
_BEFORE_MIB = re.compile(r"(?:before (?:the )?(?:start|launch|running|it starts)|vor dem start|avant (?:le )?(?:lancement|démarrage)|"
                         r"antes de (?:empezar|arrancar|começar|iniciar)|до запуска|перед запуском|启动前|运行前|起動前|実行前|"
                         r"시작 전|실행 전|शुरू करने से पहले|قبل التشغيل|قبل البدء|"
                         # a desktop holding its share ("der Desktop (Xorg usw.) belegt schon 1100 MiB")
                         r"desktop|xorg|gnome-shell|escritorio|área de trabalho|bureau|рабочий стол|桌面|デスクトップ|"
                         r"데스크톱|डेस्कटॉप|سطح المكتب)[^\n\d]{0,40}?(\d{3,6})\s*mib(?![a-z])")
_CARD_TOTAL = re.compile(r"(?<![\d.])(\d{2,3}(?:\.\d+)?)\s*gib\s*(?:de\s+|of\s+|in\s+)?(?:total|всего|insgesamt|au total|en total|合計|总共|전체)")


#: a card said to be the asker's own ("my 4090", "mein L40", "на моей 3090", "我的4090")
_MY_CARD = re.compile(r"(?:\bmy|\bour|\bmein\w*|\bunser\w*|\bma|\bmon|\bmes|\bmi|\bmis|\bmeu|\bminha|\bмо[яейю]\w*|\bнаш\w*|我的|我们的|私の|自分の|내|우리|मेरा|मेरी|मेरे|عندي|لدي)\s+(?:\w+\s+)?$")


def _a_pool_seen(size: float, low: str, card: float) -> bool:
    """Whether `size` (GiB) is a card's default pool as nvidia-smi shows it with the CUDA context:
    this card's (`card` GiB) or another's whose size the text names ("on the 40GB one, 30GB")."""
    cards = [card, *(float(m.group(1)) for m in _GB.finditer(low)
                     if _CARD_BEFORE.search(low[max(0, m.start() - 12): m.start()]))]
    return any((GPU_POOL_SHARE - 0.02) * c <= size <= GPU_POOL_SHARE * c + POOL_SEEN_EXTRA for c in cards)


#: a GPU model named with its memory ("A100 80GB", "V100 32G"), as the asker's own figure for it
_SIZED_CARD = re.compile(r"(?:a100|h100|h200|v100|p100|a6000|a40|l40s?|rtx\s*(?:pro\s+)?\w*|titan\s*\w*|tesla\s*[a-z]?\d*)"
                         r"[^.\n\d]{0,12}\d{1,4}\s*(?:gb|gib|go|гб|g)(?![a-z0-9])")


def _first_named(low: str, card: Gpu, gpus) -> int:
    """Where `low` first names `card` (of the table `gpus`)."""
    return min((m.start() for gpu, patterns in gpus if gpu is card for p in patterns for m in p.finditer(low)),
               default=len(low))


def _own_card(low: str, gpus) -> Gpu | None:
    """The card the text runs on, of those it names: the one it calls its own ("on my 4090"),
    else the first named ("on an L40 48GB ... someone ran it on an H100 at 62 GB")."""
    named = []
    for gpu, patterns in gpus:
        hits = [m.start() for p in patterns for m in p.finditer(low)]
        if hits:
            mine = any(_MY_CARD.search(low[max(0, h - 24): h]) for h in hits)
            named.append((not mine, min(hits), gpu))
    return min(named, key=lambda n: n[:2])[2] if named else None


def _card_total(low: str, nominal: float) -> int | None:
    """A GPU's total memory as the text quotes a tool reporting it ("18934MiB / 24564MiB": the one
    within 15% of the card's `nominal` size), in bytes; else None."""
    quoted = [int(m.group(1)) << 20 for m in _CARD_MIB.finditer(low)]
    quoted += [int(float(m.group(1)) * (1 << 30)) for m in _CARD_TOTAL.finditer(low)]
    near = [q for q in quoted if abs(q - nominal) <= 0.15 * nominal]
    return min(near, key=lambda q: abs(q - nominal)) if near else None


def _padded_bytes(dims: list[int], dtype_bytes: float, size: float) -> float:
    """A shape's bytes in TPU HBM tiles: the last dimension to a multiple of 128, the one before it
    to 8 rows of 32-bit words (8, 16 or 32 elements)."""
    sub = int(8 * 4 // dtype_bytes)
    minor, second = dims[-1], dims[-2]
    return size / (minor * second) * (-(-minor // 128) * 128) * (-(-second // sub) * sub)


def _least_padded(dims: list[int], dtype_bytes: float, size: float) -> tuple[float, int, int, int, int]:
    """A shape's bytes in TPU HBM tiles where the compiler picks which two dimensions go last, as
    XLA:TPU's layout assignment does for an array it lays out itself, the least padded choice: its
    bytes, its minor dimension and that padded (to 128 lanes), its second-minor and that padded (to 8
    rows; one below 8 to the next power of two, at least the rows one 32-bit word packs: 1 for f32, 2
    for bf16, 4 for int8). Measured on deviceless v5e compiles (tests/diagnostics/test_tpu_layouts.py):
    f32[1024,1024,957,2] unpadded with 1024 last; f32[4096,3] as (3, 4096) in (4, 128) tiles."""
    least_rows = max(1, int(4 // dtype_bytes))
    best = None
    for i, minor in enumerate(dims):
        for j, second in enumerate(dims):
            if i == j:
                continue
            rows = max(least_rows, 1 << (second - 1).bit_length()) if second < 8 else -(-second // 8) * 8
            lanes = -(-minor // 128) * 128
            padded = size / (minor * second) * lanes * rows
            if best is None or padded < best[0]:
                best = (padded, minor, lanes, second, rows)
    return best


def _in_use_and_request(text: str) -> list[float]:
    """What the pool had to hold when the allocation failed: the bytes in use plus the bytes asked
    for (in GiB), where the text states both; else nothing."""
    low = (text or "").lower()
    used, asked = _IN_USE.search(low), _REQUEST.search(low)
    if not (used and asked):
        return []
    return [round((int(used.group(1)) + int(asked.group(1))) / (1 << 30), 2)]


#: the script the asker runs ("train.py", "scripts/rl.py"), and an argument given a value per run
#: ("--seed 0/1/2", "--seed=0,1,2")
_SCRIPT = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.py)(?![\w])")
_PER_RUN = re.compile(r"(--?[a-z][\w-]*)[ =](\w+(?:\s*[/,]\s*\w+)+)", re.IGNORECASE)


def _launch_lines(shares: list[float], text: str = "") -> str:
    """Python that starts one process per share, each with its own XLA_PYTHON_CLIENT_MEM_FRACTION
    set before it imports jax (the shell's equivalent in a comment): the asker's script and its
    per-run argument where the text gives them ("train.py --seed 0/1/2"), else placeholders."""
    scripts = _SCRIPT.findall(text or "")
    per_run = _PER_RUN.search(text or "")
    values = [v.strip() for v in re.split(r"[/,]", per_run.group(2))] if per_run else []
    if scripts and len(values) == len(shares):
        commands = [[scripts[-1], per_run.group(1), v] for v in values]
    elif scripts and len(set(scripts)) == len(shares):
        commands = [[name] for name in dict.fromkeys(scripts)]
    elif scripts:
        commands = [[scripts[-1]]] * len(shares)
    else:
        commands = [[f"train_{chr(ord('a') + i)}.py"] for i in range(len(shares))]
    shell = "\n".join(f"#   XLA_PYTHON_CLIENT_MEM_FRACTION={_fraction(f)} python {' '.join(c)} &"
                      for c, f in zip(commands, shares))
    pairs = ", ".join(f"({c!r}, \"{_fraction(f)}\")".replace("'", '"') for c, f in zip(commands, shares))
    return (f"# the same from a shell script:\n{shell}\n#   wait\nimport os\nimport subprocess\n\n"
            f"runs = [{pairs}]  # each run's command and its share\n"
            "procs = [subprocess.Popen([\"python\", *command], env={**os.environ, \"XLA_PYTHON_CLIENT_MEM_FRACTION\": share})\n"
            "         for command, share in runs]\n"
            "for p in procs:\n    p.wait()\n")


def _params_from_dims(s: Stated) -> dict[str, float] | None:
    """A transformer's parameter count from the dims the text itself gives (hidden, MLP width,
    layers, vocab; heads and head dim where given): attention's Q, K, V and O, the MLP's two or three
    matrices, the embedding and the output layer unless tied. None unless all four are the text's."""
    v = s.values
    if not {"hidden", "ffn", "layers", "vocab"} <= v.keys() or {"hidden", "ffn", "layers", "vocab"} & set(s.from_model):
        return None
    if v.get("experts"):
        return None  # a mixture of experts counts its MLPs per expert: not this sum
    d, ff, layers, vocab = v["hidden"], v["ffn"], v["layers"], v["vocab"]
    heads = v.get("heads")
    head_dim = v.get("head_dim") or (d / heads if heads else None)
    heads = heads or (d / head_dim if head_dim else None)
    if not heads or not head_dim:
        heads, head_dim = 1, d  # no heads given: Q, K, V and O each d x d
    kv = v.get("kv_heads") or heads
    attention = d * head_dim * (2 * heads + 2 * kv)
    gated = "gated_mlp" in s.cues and "ungated_mlp" not in s.cues
    mlp = (3 if gated else 2) * d * ff
    embeddings = (1 if "tied_embeddings" in s.cues else 2) * vocab * d
    params = layers * (attention + mlp) + embeddings
    return {"params": params, "attention": attention, "mlp": mlp, "embeddings": embeddings, "layers": layers,
            "d": d, "ff": ff, "heads": heads, "kv": kv, "head_dim": head_dim, "vocab": vocab,
            "gated": float(gated), "tied": float("tied_embeddings" in s.cues)}


#: the mesh axis a question names ("轴名 'model'", "axis name \"data\"", "mesh axis 'tp'") or puts in a spec
_MESH_AXIS_NAME = re.compile(r"(?:axis|axes|轴名?|軸名?|축 ?이름|축|ось|eje|eixo|axe|achse|mesh)[^'\"\n]{0,24}['\"]([A-Za-z_]\w{0,15})['\"]",
                             re.IGNORECASE)
_SPEC_AXIS_NAME = re.compile(r"\bP(?:artitionSpec)?\(\s*(?:None\s*,\s*)*['\"]([A-Za-z_]\w{0,15})['\"]")
_LAX_MAP_BATCH = re.compile(r"batch_size\s*=\s*(\d{1,6})")
_AXIS_NAMED = re.compile(r"(\d{2,7})[- ]?(?:axis|dim\w*|achse|axe|eje|eixo|ось|轴|軸|축|अक्ष)|(?:axis|achse|axe|eje|eixo|ось)\s+(?:of\s+)?(\d{2,7})")
_ACTIVE_PARAMS = re.compile(r"(?<![a-z0-9_.])\d+(?:\.\d+)?\s*(?:b|bn|billion|mrd|млрд|m)\s*(?:params?\s*|parameters?\s*|parâmetros\s*|parámetros\s*|paramètres\s*|параметров\s*|参数\s*)?"
                            r"(?:active|activated|ativos?|activos?|actifs?|aktiv\w*|активн\w*|激活|アクティブ|활성|सक्रिय|نشط\w*)")
_PLUS = re.compile(r"^[^.\n?!;:]{0,30}?(?:\bplus\b|\+|\band\b|\bund\b|\bet\b|\by\b|\be\b|\bи\b|\bmais\b|"
                   r"和|加上|以及|と|に加えて|그리고|및|और|तथा|\bو)", re.I)


def _added_shapes(text: str, shapes: list[re.Match]) -> list[list[int]]:
    """The last run of written-out shapes joined by "plus"/"and" words (each 1M elements or more,
    a few words apart, in one sentence): arrays the text adds up. [] for one shape."""
    run: list[re.Match] = [shapes[-1]] if shapes else []
    for m in reversed(shapes[:-1]):
        between = text[m.end():run[0].start()]
        if len(between) > 40 or not _PLUS.search(between):
            break
        run.insert(0, m)
    dims = [[int(d) for d in re.findall(r"\d+", m.group(0))] for m in run]
    dims = [d for d in dims if len(d) >= 2 and math.prod(d) >= 1 << 20]
    return dims if len(dims) >= 2 else []


#: how close a failed request must be to an array's size to be that array (the allocator rounds up and
#: may add a small buffer beside it: 28804500256 bytes for a 28800000000-byte array)
WHOLE_ARRAY_SLACK = 0.002


def _pool_seen(figure: float, card: float) -> bool:
    """Whether a memory figure said of a card is JAX's default pool on it as nvidia-smi shows it: the
    pool and the CUDA context above it, read loosely ("~20GB" of a 24 GB card's 18 GiB pool)."""
    return -0.03 * card <= figure - GPU_POOL_SHARE * card <= 0.09 * card


def _in_mib(n: float) -> str:
    """A size in GiB with its MiB beside it, where the question asks in MiB ("11.06 GiB (11,325 MiB)")."""
    return f"{format_bytes(int(n))} ({int(n) >> 20:,} MiB)"


def _fractions_named(text: str, keywords: list[re.Pattern]) -> list[float]:
    """The XLA_PYTHON_CLIENT_MEM_FRACTION values a text compares ("=0.87 works, 0.9 dies"): the
    decimals within a few words after the setting is named, in the order said, each once."""
    low = (text or "").lower()
    found: list[float] = []
    for pattern in keywords:
        for m in pattern.finditer(low):
            for d in _DECIMAL_SHARE.finditer(low[m.end():m.end() + 80]):
                value = float(f"0.{d.group(1)}")
                if 0.05 <= value < 1 and value not in found:
                    found.append(value)
    return found


def _share_3(share: float, up: bool) -> str:
    """A share to three decimals, rounded up (a floor that must be met) or down (a ceiling): '.781'."""
    value = (math.ceil if up else math.floor)(round(share * 1000, 6)) / 1000
    return f"{value:.3f}".lstrip("0")


def _fraction(share: float) -> str:
    """A share as XLA_PYTHON_CLIENT_MEM_FRACTION is written: 0.55 -> '.55'."""
    return f"{share:.2f}".lstrip("0")


def _shape_last(dims: list[int], shapes: list[list[int]]) -> list[int]:
    """`dims` with the written shape that most of them come from last, in its written order (1000
    snapshots of a (32, 256, 256) state: [1000, 32, 256, 256])."""
    def overlap(shape: list[int]) -> int:
        return sum(min(dims.count(d), shape.count(d)) for d in set(shape))
    best = max(shapes, key=overlap, default=None)
    if not best or overlap(best) < 2:
        return dims
    rest = list(dims)
    tail = []
    for d in best:
        if d in rest:
            rest.remove(d)
            tail.append(d)
    return rest + tail


@dataclass
class Factored:
    """A failed allocation as the product of the numbers a text states."""

    dims: list[int]
    dtype_bytes: int
    dtype: str
    paired: list[int]   # numbers used twice though written once (every pair of them)
    assumed: bool       # the dtype was not named


#: a tensor said to stay replicated while the rest is sharded ("l'embedding 256000x2048 que j'ai laissé répliqué")
_REPLICATED = re.compile(r"replicat\w*|repliz\w*|répliqu\w*|replic\w*|реплиц\w*|не шардир\w*|复制|不分片|没分片|複製|"
                         r"シャードしていない|복제|샤딩 안|प्रतिकृति|रेप्लिकेट\w*|مكرر\w*|منسوخ\w*|not sharded|nicht geshardet|"
                         r"pas shardé|sin shardear|sem shard\w*")


#: a count of slices (multislice): "4 slices", "4x v6e-128", "2 个 slice", "スライス 4 つ" is not read
_SLICES_COUNT = re.compile(r"(?<![\d.\-])(\d{1,3})\s*(?:[x×]\s*(?=v\d)|(?:x\s*)?(?:slices?|срез\w*|слайс\w*|个\s*slice|個の\s*slice|개의?\s*slice|tranches?|fatias?|rebanadas?)(?![a-z]))")

#: chips counted outright ("512 chips", "256 个芯片")
_CHIPS_COUNT = re.compile(r"(?<![\d.\-])(\d{1,5})\s*(?:chips?|puces?|个?芯片|チップ|칩|чип\w*|चिप्स?|شرائح)")

#: a PartitionSpec written out: P('data', None), PartitionSpec("fsdp")
_SPEC = re.compile(r"(?<![a-z0-9_])(?:p|partitionspec)\(([^()]*)\)")


def _sharded_axis(low: str, ndims: int) -> int | None:
    """The axis the last PartitionSpec written shards (the first entry that names a mesh axis);
    None where it names none (replicated); 0 where none is written ("sharded over 8 GPUs")."""
    specs = _SPEC.findall(low)
    if not specs:
        return 0
    entries = [e.strip().strip("'\"") for e in specs[-1].split(",")][:ndims]
    return next((i for i, e in enumerate(entries) if e and e != "none"), None)


def _replicated_shape(low: str) -> tuple[str, int] | None:
    """A shape written within a few words of a word saying it stays replicated: the shape as the
    answer writes it, and its elements."""
    shapes = [(m, [int(d) for d in re.findall(r"\d+", m.group(0))]) for m in _SHAPE.finditer(low)]
    shapes = [(m, dims) for m, dims in shapes if len(dims) >= 2 and math.prod(dims) >= 1 << 20]  # a weight, not "4x24"
    for word in _REPLICATED.finditer(low):
        near = [(m, dims) for m, dims in shapes
                if -80 <= word.start() - m.end() <= 80 or -80 <= m.start() - word.end() <= 80]
        if near:
            _, dims = min(near, key=lambda n: min(abs(word.start() - n[0].end()), abs(n[0].start() - word.end())))
            return "[" + ", ".join(map(str, dims)) + "]", math.prod(dims)
    return None


#: where a kernel's block shapes are given ("BlockSpec は x が (1024, 2048)、y が (2048, 1024)")
_BLOCK_WORD = re.compile(r"blockspec|block_shape|block shape|blocks?(?![a-z])|ブロック|블록|块|блок\w*|bloques?|blocos?|blocs?")
_PAIR = re.compile(r"\(\s*(\d+)\s*,\s*(\d+)\s*\)")


def _block_shapes(low: str) -> dict[str, float]:
    """A matmul kernel's blocks written as shapes after a word for blocks: the first two of them
    that chain, (bm, bk) then (bk, bn), give bm, bk and bn."""
    at = _BLOCK_WORD.search(low)
    if at is None:
        return {}
    shapes = [(int(a), int(b)) for a, b in _PAIR.findall(low[at.start():])]
    for (m, k), (k2, n) in zip(shapes, shapes[1:]):
        if k == k2:
            return {"block_m": m, "block_k": k, "block_n": n}
    # one square block for every operand of a matmul ("in_specs and out_specs all (1024, 1024)")
    if len(set(shapes)) == 1 and shapes[0][0] == shapes[0][1] and _MATMUL_WORD.search(low):
        return {"block_m": shapes[0][0], "block_k": shapes[0][0], "block_n": shapes[0][0]}
    return {}


#: a matmul kernel's three block sizes together: after their names ("(tm,tk,tn)=(512,2048,2048)"), as a
#: tiling ("tiling=(512, 2048, 2048)", in the order (bm, bk, bn)), or, once the blocks are named, as
#: "2048/1024/2048" in that order
_TILE_NAMED = re.compile(r"\(\s*([a-z_]*[mkn])\s*,\s*([a-z_]*[mkn])\s*,\s*([a-z_]*[mkn])\s*\)\s*[=:]\s*"
                         r"\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")
_TILING_TUPLE = re.compile(r"(?:tiling|tile_sizes?|block_sizes)\s*[=:]\s*\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")
_BLOCKS_BY = re.compile(r"(?:blocks?|block sizes?|tiles?|блок\w*|тайл\w*|bloques?|blocos?|blocs?|kacheln|ブロック|블록|块|分块)"
                        r"\s*(?:of\s*|de\s*|von\s*)?(\d{2,4})\s*[x×*]\s*(\d{2,4})\s*[x×*]\s*(\d{2,4})(?![\d.x×])")
_SLASH_TRIPLE = re.compile(r"(?<![\d/.])(\d{2,5})\s*/\s*(\d{2,5})\s*/\s*(\d{2,5})(?![\d/])")


def _block_triple(low: str, named: bool) -> tuple[int, dict[str, float]] | None:
    """The last place `low` gives a matmul's three block sizes at once, and bm, bk, bn from it.
    `named`: the blocks were named one by one before (then a bare "a/b/c" is them)."""
    found: list[tuple[int, dict[str, float]]] = []
    for m in _TILE_NAMED.finditer(low):
        axes = [name[-1] for name in m.group(1, 2, 3)]
        if sorted(axes) == ["k", "m", "n"]:
            found.append((m.start(), {f"block_{a}": float(v) for a, v in zip(axes, m.group(4, 5, 6))}))
    for m in _BLOCKS_BY.finditer(low):  # "blocks 128x128x64": BLOCK_M × BLOCK_N × BLOCK_K, as Triton's configs say
        found.append((m.start(), dict(zip(("block_m", "block_n", "block_k"), map(float, m.group(1, 2, 3))))))
    patterns = [_TILING_TUPLE, _SLASH_TRIPLE] if named else [_TILING_TUPLE]
    for pattern in patterns:
        for m in pattern.finditer(low):
            sizes = [int(v) for v in m.group(1, 2, 3)]
            if all(v >= 8 and v % 8 == 0 for v in sizes) and not any(f[0] <= m.start() < f[0] + 60 for f in found):
                found.append((m.start(), dict(zip(("block_m", "block_k", "block_n"), map(float, sizes)))))
    return max(found, key=lambda f: f[0]) if found else None


_MATMUL_WORD = re.compile(r"matmul|mat_mul|gemm|矩阵乘|行列積|행렬 곱|умножени\w* матриц|multiplica\w* de matri")


#: a product or a power written in code: "1024*1024", "2**20", "4 * 1024 * 1024"
_CODE_PRODUCT = re.compile(r"(?<![\w.])\d{1,7}(?:\s*(?:\*\*|\*)\s*\d{1,7})+(?![\w.])")


def _product(expr: str) -> int:
    """The value of a product or power of whole numbers as written in code."""
    value = 1
    for term in re.split(r"(?<!\*)\*(?!\*)", re.sub(r"\s+", "", expr)):
        base, _, power = term.partition("**")
        value *= int(base) ** (int(power) if power else 1)
    return value


# pytest-xdist's worker count ("-n 8", "-n=10"), where pytest or xdist is named
_XDIST_COUNT = re.compile(r"(?<![\w-])-n\s*=?\s*(\d{1,2})(?!\d)")


def _process_counts(text: str) -> list[int]:
    """Every count of processes or workers the text says, in order, each once ("-n 8 ... -n 10")."""
    low = text.lower()
    found = [(m.start(), int(m.group(1))) for m in _PROCESS_COUNT.finditer(low)]
    if "xdist" in low or "pytest" in low:
        found += [(m.start(), int(m.group(1))) for m in _XDIST_COUNT.finditer(low)]
    found += [(m.start(), _CJK_COUNTS.get(m.group(1)) or int(m.group(1))) for m in _COUNTED_AFTER.finditer(low)
              if (_CJK_COUNTS.get(m.group(1)) or m.group(1).isdigit())]
    out: list[int] = []
    for _, n in sorted(found):
        if n >= 2 and n not in out:
            out.append(n)
    return out


def _process_count(text: str, ordinals: bool = True) -> int | None:
    """How many processes or runs the text says, the last count said ("3 runs", "zwei JAX-Prozesse");
    with `ordinals`, a run added by its ordinal too ("3 runs ... a fourth": 4)."""
    low = text.lower()
    found = [(m.start(), int(m.group(1))) for m in _PROCESS_COUNT.finditer(low)]
    found += [(m.start(), _COUNT_WORDS[m.group(1)]) for m in _WORD_COUNT.finditer(low)]
    found += [(m.start(), _CJK_COUNTS.get(m.group(1)) or int(m.group(1))) for m in _COUNTED_AFTER.finditer(low)
              if (_CJK_COUNTS.get(m.group(1)) or m.group(1).isdigit())]
    found += [(m.start(), _NATIVE_COUNTS[next(g for g in m.groups() if g)]) for m in _NATIVE_COUNT.finditer(low)]
    if "xdist" in low or "pytest" in low:  # "pytest -n 12": twelve worker processes
        found += [(m.start(), int(m.group(1))) for m in _XDIST_COUNT.finditer(low) if int(m.group(1)) >= 2]
    # a process by its ordinal counts when it is beyond the count said before it ("3 runs ... a fourth
    # run": 4), not when it names one of them ("3 runs ... the second one crashes")
    for m in _ORDINAL_COUNT.finditer(low) if ordinals else ():
        n = _ORDINALS[m.group(1) or m.group(2)]
        before = [c for at, c in found if at < m.start()]
        if n > max(before, default=1):
            found.append((m.start(), n))
    return max(found)[1] if found else None


#: a shape written with its axes' names ("[transmits, channels, points]", "[batch, heads, seq]")
_NAMED_AXES = re.compile(r"\[\s*([^\W\d][\w]{0,24}(?:\s*,\s*[^\W\d][\w]{0,24}){1,5})\s*\]")
#: a size and the word it counts ("75 transmits", "160000 puntos"), and how far after the names they are looked for
_SIZE_AND_WORD = re.compile(r"(?<![\w.x×])(\d{1,9})\s+([^\W\d]{2,24})")
AXES_WINDOW = 240
_NOT_AXIS_WORDS = frozenset({"gb", "gib", "mb", "mib", "kb", "kib", "tb", "bytes", "byte", "b", "x", "go", "mo", "de", "of",
                             "and", "y", "e", "und", "et", "и", "steps", "epochs", "gpus", "gpu", "chips", "cores", "devices"})
#: a power of 2 or 10 written out ("2^24", "2**20", "10^6")
_POWER = re.compile(r"(?<![\w.])(2|10)\s*(?:\^|\*\*)\s*(\d{1,2})(?!\d|\.\d)")
#: a grid's side to the power of its dimensions ("1024^3", "512³", "4096^2"): a shape, N x N x N (not `**`,
#: which code writes for a unit, "/ 1024**3", nor after a division)
_CUBE = re.compile(r"(?<![\w./*])(\d{2,5})\s*(?:\^\s*([23])|([²³]))(?![\d.])")
#: a table's rows by its width, with the word for rows between ("2^24 صف × 1024", "1M rows x 512")
_ROWS_BY = re.compile(r"(\d{1,10}(?:\.\d+)?)\s*(k|m|mio|mi|million|millions|millones|milhões)?\s*(?:rows?|linhas|صفوف|صف|строк\w*|行|행|zeilen|lignes|filas|linhas|पंक्तियाँ|पंक्ति|entries|entradas|einträge)"
                      r"\s*[x×*]\s*(\d{1,10})", re.IGNORECASE)


#: counted fields on a grid ("37 niveaux × 6 variables sur la grille 721×1440", "13 levels x 6 variables on a
#: 181x360 grid"): one array, [levels, variables, H, W]
_FIELD_WORD = (r"(?:pressure\s+)?(?:levels?|variables?|channels?|fields?|bands?|features?|members?|niveaux|niveau|canaux|"
               r"niveles|canales|níveis|variáveis|canais|ebenen|variablen|kanäle|уровн\w*|переменн\w*|канал\w*|"
               r"个?层|个?变量|个?通道|レベル|変数|チャンネル|레벨|변수|채널|स्तर|चर|चैनल|مستوى|مستويات|متغير\w*|قنوات)")
_FIELDS_ON_GRID = re.compile(rf"(?<![\d.])(\d{{1,4}})\s*{_FIELD_WORD}\s*[×x*]\s*(\d{{1,4}})\s*{_FIELD_WORD}"
                             rf"((?:\s+[^\W\d_]+){{0,4}}\s+)(\d{{2,6}})\s*[×x*]\s*(\d{{2,6}})(?!\d|\.\d|\s*[×x*]\s*\d)",
                             re.IGNORECASE)


def _fields_on_grid(m: re.Match[str]) -> str:
    """"37 niveaux × 6 variables sur la grille 721×1440" with the one array it is written after it."""
    return f"{m.group(0)} = {m.group(1)}x{m.group(2)}x{m.group(4)}x{m.group(5)}"


def _axes_sized(m: re.Match[str], text: str) -> str:
    """A shape written with its axes' names ("[transmits, channels, points]") as the sizes the text
    gives them after it ("75 transmits, 128 canales, 400x400 = 160000 puntos"), in that order; as
    written where it gives fewer."""
    names = [n.strip() for n in m.group(1).split(",")]
    after = text[m.end():m.end() + AXES_WINDOW]
    sizes = [int(p.group(1)) for p in _SIZE_AND_WORD.finditer(after)
             if p.group(2).lower() not in _NOT_AXIS_WORDS][:len(names)]
    return f"[{', '.join(map(str, sizes))}]" if len(sizes) == len(names) else m.group(0)


def _dims_of(m: re.Match[str]) -> list[int]:
    """The dimensions of a shape `_SHAPE` matched."""
    return [int(d) for d in re.findall(r"\d+", m.group(0))]


def _big_shapes(low: str) -> list[tuple[re.Match[str], list[int]]]:
    """The shapes `low` writes out with at least a million elements, in order, with their dimensions."""
    return [(m, dims) for m in _SHAPE.finditer(low) if len(dims := _dims_of(m)) >= 2 and math.prod(dims) >= 1 << 20]


def _tpu_label(gen: str) -> str:
    """The device's label for a generation: "TPU v5e", and "TPU7x" as it is (not "TPU TPU7x")."""
    return gen if gen.upper().startswith("TPU") else f"TPU {gen}"


def _rows_by(m: re.Match[str]) -> str:
    """"100M linhas × 64" as the shape it is, "100000000 x 64"."""
    scale = {"k": 1e3}.get((m.group(2) or "").lower(), 1e6 if m.group(2) else 1)
    return f"{int(float(m.group(1)) * scale)} x {m.group(3)}"


#: how many such blocks a kernel uses, said beside the shape ("three (512, 2048) f32 blocks",
#: "(512, 2048) の f32 を 3 つ", "3 блока (512, 2048)")
_BLOCK_COUNT_WORDS = {**_COUNT_WORDS, **_CJK_COUNTS, "five": 5, "six": 6}
_BLOCKS_COUNTED = re.compile(
    r"(?<![\w.])(\d|two|three|four|five|six|deux|trois|quatre|zwei|drei|vier|dos|tres|cuatro|dois|duas|três|quatro|"
    r"два|две|три|четыре)\s+(?:such\s+)?[(\[]\s*\d+\s*,\s*\d+|"
    # two operands said to share it ("x 和 out 的 BlockSpec 都是 (8192, 72)", "both (8192, 72)")
    r"(both|都是|两个都是|beide|beides|ambos|ambas|les deux|оба|обе|둘 다|दोनों|كلاهما)[^(\[\n]{0,12}[(\[]\s*\d+\s*,\s*\d+|"
    r"[)\]][^.\n。]{0,20}?(\d|两|二|三|四)\s*(?:つ|個|个|개|blocks?|blocos?|bloques?|blocs?|blöcke|блок\w*)",
    re.IGNORECASE)


def _blocks_counted(text: str) -> int:
    """The number of blocks of the shape written that `text` says the kernel uses; 1 when none."""
    m = _BLOCKS_COUNTED.search(text or "")
    if not m:
        return 1
    if m.group(2):  # "both"
        return 2
    word = (m.group(1) or m.group(3)).lower()
    count = int(word) if word.isdigit() else _BLOCK_COUNT_WORDS.get(word, 1)
    return count if 1 <= count <= 16 else 1


def _plain_digits(text: str) -> str:
    """Numbers as Python writes them for reading ("50_000_000", "10,000", "10.000", "10 000" with a
    narrow space -> "50000000", "10000"); a shape's or a tuple's commas stay ("(32,128,128)")."""
    text = _DECIMAL_COMMA.sub(r"\1.\2", text)  # "32,5 milliards" -> "32.5 milliards"
    text = _POWER.sub(lambda m: str(int(m.group(1)) ** int(m.group(2))), text)  # "2^24 rows" -> "16777216 rows"
    text = _CUBE.sub(lambda m: "x".join([m.group(1)] * (3 if (m.group(2) or m.group(3)) in ("3", "³") else 2)), text)  # "1024^3" grid
    text = _NAMED_AXES.sub(lambda m: _axes_sized(m, text), text)  # "[transmits, channels] ... 75 transmits, 128 canales"
    text = _ROWS_BY.sub(_rows_by, text)  # "16777216 rows × 1024 dims": the shape [16777216, 1024]
    text = _FIELDS_ON_GRID.sub(_fields_on_grid, text)  # "37 levels × 6 variables on the 721×1440 grid"
    text = _THOUSANDS.sub(lambda m: re.sub(r"\D", "", m.group(0)), _DIGIT_GROUP.sub("", text))
    text = _SCIENTIFIC.sub(lambda m: str(int(float(m.group(0)))), text)  # "int(1e9) points" -> "1000000000 points"
    text = _AXIS_PRODUCT.sub(lambda m: m.group(1) + str(math.prod(int(d) for d in re.findall(r"\d+", m.group(2)))), text)
    return _bind_symbols(text)


#: a size given a name ("n=10000000", "N = 4096", "batch=32"), and a shape written with names ("(n, 2)")
_ONE_HOT = re.compile(r"one[_ -]?hot", re.IGNORECASE)
#: the batch said in words ("batch 8", "batch size of 8", "batch_size: 8"), the value of a shape's "B"
_BATCH_SAID = re.compile(r"(?<![\w.])batch(?:[ _]size)?\s*(?:=|:|of|is)?\s*(\d{1,6})(?![\d.])", re.IGNORECASE)
_SYMBOL_SET = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_]{0,15})\s*=\s*(\d{1,12})(?![\d.])")
_SHAPE_WITH_NAMES = re.compile(r"[(\[]\s*[A-Za-z_0-9][\w\s,]{0,80}?,[\w\s,]{0,80}?[)\]]")


def _bind_symbols(text: str, setting: str = "") -> str:
    """Shapes written with the names of sizes the text (or `setting`, a later turn: "(T, 10, 5)", then
    "with T = 10000?") sets ("n=10000000 ... indices (n, 2) int32"): the names replaced by their values
    inside the shape, so that it is sized like one written out."""
    values = {m.group(1): m.group(2) for m in _SYMBOL_SET.finditer(f"{text}\n{setting}")}
    batch = _BATCH_SAID.search(f"{text}\n{setting}")
    if batch is not None:  # ("[B, step, kv_len]" ... "it's batch 8": B is the batch)
        for name in ("B", "b"):
            values.setdefault(name, batch.group(1))
    if not values:
        return text
    names = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sorted(values, key=len, reverse=True))) + r")(?![\w.])")

    def bound(m: re.Match) -> str:
        inner = m.group(0)
        parts = [p.strip() for p in inner[1:-1].split(",") if p.strip()]
        # only a shape: every part a number or a name set to one
        if not parts or not all(p.isdigit() or p in values for p in parts):
            return inner
        return names.sub(lambda n: values[n.group(1)], inner)

    return _SHAPE_WITH_NAMES.sub(bound, text)


def _grouped(n: float, language: str) -> str:
    """A whole number with the reader's digit grouping (200 000 in French, 2,00,000 in Hindi)."""
    try:
        return format_decimal(int(n), locale=language)
    except (ArithmeticError, ValueError):  # (beyond babel's decimal precision: the digits as they are)
        return str(int(n))


def _decimals(*written: str) -> int:
    """The decimals the asker wrote their figures with (at most 3)."""
    return min(3, max(0, *(len(re.split(r"[.,]", w, maxsplit=1)[1]) if re.search(r"[.,]", w) else 0 for w in written)))


def _unit_of(written: str | None) -> str | None:
    """A unit as `_AMOUNT` read it, with the words for bytes in every language as "bytes"."""
    if written is None:
        return None
    return "bytes" if written.startswith(_BYTE_WORDS) else written


def _count_said(m: re.Match) -> int:
    """A count `_INPUT_COUNT` read, with its scale word ("10 million" -> 10000000)."""
    number, scale = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    return int(float(number) * _SCALE_WORDS.get(scale or "", 1))


def _float(written: str) -> float:
    """A figure as written, with a decimal point or a decimal comma ("11,99")."""
    return float(written.replace(",", "."))


def _places(x: float, places: int) -> str:
    """`x` to the decimals the asker used, without trailing zeros ("16.160" -> "16.16", "30.0" -> "30")."""
    return f"{x:.{places}f}".rstrip("0").rstrip(".") if places else f"{x:.0f}"


#: units as the answer writes them
#: bytes per unit as written (decimal units decimal, binary units binary)
_UNIT_FACTOR = {"kib": 1024.0, "mib": float(1 << 20), "gib": float(1 << 30), "tib": float(1 << 40), "kb": 1e3, "mb": 1e6,
                "gb": 1e9, "tb": 1e12, "mio": float(1 << 20), "gio": float(1 << 30), "mo": 1e6, "go": 1e9, "мб": 1e6,
                "гб": 1e9, "bytes": 1.0}
#: bytes per unit for a size said beside a card's (GB read as GiB, as a card's size is)
_BINARY_FACTOR = {"kib": 1024.0, "kb": 1024.0, "mib": float(1 << 20), "mb": float(1 << 20), "mio": float(1 << 20),
                  "mo": float(1 << 20), "мб": float(1 << 20), "gib": float(1 << 30), "gb": float(1 << 30), "g": float(1 << 30),
                  "gio": float(1 << 30), "go": float(1 << 30), "гб": float(1 << 30), "tib": float(1 << 40), "tb": float(1 << 40)}
#: the next larger unit of the same kind
_UNIT_NEXT = {"kb": "mb", "mb": "gb", "gb": "tb", "kib": "mib", "mib": "gib", "gib": "tib", "mo": "go", "mio": "gio",
              "мб": "гб"}
_UNIT_WRITTEN = {"gib": "GiB", "gb": "GB", "mib": "MiB", "mb": "MB", "tib": "TiB", "tb": "TB", "gio": "Gio", "go": "Go",
                 "mio": "Mio", "mo": "Mo", "гб": "ГБ", "мб": "МБ", "g": "G", "kib": "KiB", "kb": "KB", "bytes": "B"}


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _per_batch(s: Stated) -> tuple[float, float, str, list[str]]:
    """(batch, bytes per element, dtype name, what was assumed) of a per-batch tensor: batch 1 and
    float32 where the text does not say."""
    batch = s.values.get("batch") or 1
    assumed = [] if s.values.get("batch") else ["batch 1"]
    if s.dtype is None:
        return batch, 4, "float32", [*assumed, "float32"]
    return batch, s.dtype.bytes, s.dtype.name, assumed


def _count(params: float) -> str:
    """7e9 -> '7B', 1.5e9 -> '1.5B', 350e6 -> '350M', 6053381344 -> '6.05B' (three significant
    digits at most, as a count of parameters is read)."""
    if params >= 1e9:
        return f"{float(f'{params / 1e9:.3g}'):g}B"
    return f"{float(f'{params / 1e6:.3g}'):g}M"


def _validate(data: SizingFile, path: Path) -> None:
    for name in data.quantities:
        if name not in _QUANTITIES:
            raise CatalogueError(f"{path}: quantities.{name}: not one of {', '.join(_QUANTITIES)}")
    for model in data.models:
        if not set(model.values) <= set(_QUANTITIES):
            raise CatalogueError(f"{path}: models.{model.name}: values not among {', '.join(_QUANTITIES)}")
    for group in (data.quantities.values(), [data.dtypes], [data.optimizers], [data.models]):
        for items in group:
            for item in items:
                try:
                    compiled = re.compile(item.pattern)
                except re.error as exc:
                    raise CatalogueError(f"{path}: pattern {item.pattern!r}: {exc}") from exc
                if isinstance(item, Pattern) and compiled.groups < 1:
                    raise CatalogueError(f"{path}: pattern {item.pattern!r}: needs a group for the number")
    for key, patterns in data.cues.items():
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise CatalogueError(f"{path}: cues.{key} {pattern!r}: {exc}") from exc
    for key, message in data.messages.items():
        check_texts(path, f"messages.{key}", message.text, set(message.params))
        for lang, text in message.text.items():
            if set(placeholders(text)) != set(message.params):
                raise CatalogueError(f"{path}: messages.{key}.{lang}: placeholders differ from params")


@lru_cache(maxsize=4)
def _data(folder: str) -> SizingFile:
    path = Path(folder) / FILE
    data = read_model(path, SizingFile)
    _validate(data, path)
    return data


def load_sizing(figures: Figures | None = None, count_facts=None, folder: Path | None = None) -> Sizing:
    """The sizing file of `folder` (default: this floor's catalogue), checked. `figures`: the
    generations' HBM and slice naming; `count_facts`: EvidenceRules.read_count_facts, for the
    devices and GPU memory a question names."""
    data = _data(str(folder or Path(__file__).parent / "catalogue"))
    if count_facts is None:
        from oomkb.kb.evidence_rules import load_rules
        count_facts = load_rules().read_count_facts
    figures = figures or load_figures()
    known = {a.id for a in figures.data.answers} | {s.name for s in figures.data.settings}
    for subject, names in data.replaces.items():
        if not set(names) <= known:
            raise CatalogueError(f"{FILE}: replaces {subject!r}: unknown short answers or settings "
                                 f"{sorted(set(names) - known)}")
    return Sizing(data, figures, count_facts)
