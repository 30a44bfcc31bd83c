"""How a measured disaggregated run was configured, from InferenceX's own configuration history.

The rows of measured-disagg.csv (InferenceX runs collected by aiconfigurator) do not reliably say
how many prefill/decode workers ran, how each was split, or whether MTP speculative decoding was
on. facts/data/inferencex-disagg-recipes.csv (written by ``tools/perf/inferencex_disagg.py``)
holds every disaggregated search-space entry of InferenceX's NVIDIA configs with the window of
commits where it was present; ``recipe_for`` finds the entry a measured row ran.

A row matches an entry on model (``model``/``hf_model`` vs ``model_prefix``), precision, GPU
(vs ``runner``), backend (vs ``framework``), ISL, OSL and concurrency (``concurrency`` or the
notes' ``silicon_concurrency``); where both name one, on the image; and on the ``measured=``
date, which must fall in the entry's window (first commit to last commit + ``GRACE_DAYS``).
Entries left that agree on the layout are one answer. Between different layouts the entry with
the row's exact image is preferred (entries from the launch script name none), then the layout
whose GPUs per worker (tp x attention DP, prefill and decode) equal the notes'; the notes'
split of those GPUs, and of the source_file rows' workers, is not used.
"""

from __future__ import annotations

import csv
import datetime as dt
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from servewise.engine.domain.perf.data import DATA_DIR

RECIPES_FILE = DATA_DIR / "inferencex-disagg-recipes.csv"

# A run may be measured after its entry left the config: InferenceX keeps (re)running and
# publishing sweeps of a submission for a while after it is edited or retired, and the measured
# date of a db-dump row is the day of its workflow run. 45 days covers that lag without
# reaching across more than one or two submission rounds (they come every one to two months).
GRACE_DAYS = 45

MODEL_ALIASES = {"dsr1": "deepseekr1", "dsv3": "deepseekv3", "dsv4": "deepseekv4"}
_DROP_TOKENS = re.compile(r"^(?:fp4|fp8|nvfp4|mxfp4|bf16|fp16|int4|int8|\d{4}|v\d+)$")
_POOL_RE = r"{}: workers=(\d+) tp=(\d+) pp=(\d+) attn_dp=(\d+) moe_tp=(\d+) moe_ep=(\d+)"
_IMAGE_RE = re.compile(r"^(?:image=)?([\w.\-]+(?:[/#][\w.\-]+)+:[\w.\-]+)$")


@dataclass(frozen=True)
class Worker:
    """One worker of a pool (``workers`` of them): attention tensor parallel ``tp``, attention data
    parallel ``attention_dp``, expert parallel ``ep``; it has ``tp x attention_dp`` GPUs."""

    workers: int
    tp: int
    attention_dp: int
    ep: int

    @property
    def gpus(self) -> int:
        return self.tp * self.attention_dp

    def __str__(self) -> str:
        split = f"dp{self.attention_dp}" if self.attention_dp > 1 else f"tp{self.tp}"
        return f"{self.workers}x{split}" + (f"/ep{self.ep}" if self.ep > 1 else "")


@dataclass(frozen=True)
class Recipe:
    """A disaggregated run's pools and MTP draft length (None: no MTP, or not stated), with the
    InferenceX config key and the commit (12 hex) where that entry first appeared."""

    prefill: Worker
    decode: Worker
    draft_tokens: int | None
    key: str
    commit: str
    spec_decoding: str = "none"  # the entry's spec-decoding ("none", "mtp", ...)
    decode_batch: int | None = None  # the decode worker's max_batch_size per rank, where stated


@dataclass(frozen=True)
class Entry:
    """One row of inferencex-disagg-recipes.csv, parsed."""

    key: str
    image: str
    model: str  # canonical model name of model_prefix
    precision: str
    gpu: str
    backend: str
    isl: int
    osl: int
    concurrency: int
    spec_decoding: str
    prefill: Worker
    decode: Worker
    draft_tokens: int | None
    first_commit: str
    first_date: dt.date
    last_date: dt.date
    config_file: str = ""

    @property
    def layout(self) -> tuple[Worker, Worker, str, int | None]:
        return self.prefill, self.decode, self.spec_decoding, self.draft_tokens

    def recipe(self) -> Recipe:
        return Recipe(self.prefill, self.decode, self.draft_tokens, self.key, self.first_commit,
                      self.spec_decoding, decode_batch(self.config_file))


# ---------------------------------------------------------------- names


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def canonical_model(name: str) -> str:
    """A model name without organisation, precision or date tokens, lower-case alphanumerics;
    InferenceX prefixes mapped to the model (``dsr1`` -> ``deepseekr1``)."""
    tokens = [t for t in re.split(r"[-_\s]+", name.rsplit("/", 1)[-1].lower()) if t]
    kept = [t for i, t in enumerate(tokens) if i == 0 or not _DROP_TOKENS.match(t)]
    n = _norm("".join(kept))
    return MODEL_ALIASES.get(n, n)


def backend_of(framework: str) -> str:
    """The serving backend of an InferenceX framework (``dynamo-trt`` -> ``trtllm``)."""
    fw = framework.lower()
    return "trtllm" if "trt" in fw else "sglang" if "sglang" in fw else "vllm" if "vllm" in fw else fw


def gpu_of(runner: str) -> str:
    return _norm(runner.split("-")[0])


def normalize_image(image: str) -> str:
    return image.strip().removeprefix("docker://").replace("#", "/")


def worker(workers: int, tp: int, ep: int, dp_attn: bool) -> Worker:
    """InferenceX's pool (``tp`` N GPUs, attention DP over them when ``dp-attn``) as a Worker."""
    return Worker(workers, 1, tp, ep) if dp_attn else Worker(workers, tp, 1, ep)


# ---------------------------------------------------------------- the recipes file

# srt-slurm's TensorRT-LLM disaggregated recipes are named ``ctx{P}[dep|tep]{N}_gen{D}[dep|tep]{N}_batch{B}
# _eplb{E}_mtp{K}``, where B is the generation (decode) workers' ``max_batch_size``: e.g.
# InferenceX benchmarks/multi_node/srt-slurm-recipes/trtllm/glm5/disagg/trtllm_dynamo/gb200_nvfp4/
# ISL1K_OSL1K/MTP/ctx1dep4_gen1dep32_batch8_eplb0_mtp3.yaml sets the gen worker's
# ``max_batch_size: 8`` (the ctx worker's is 16). With ``enable_attention_dp`` each attention rank
# schedules its own batch of up to ``max_batch_size`` sequences.
_BATCH_RE = re.compile(r"_gen\d*(?:[a-z]+\d+)?_?(?:[a-z]+\d+_)?batch(\d+)(?:_|\.|$)")


def decode_batch(config_file: str) -> int | None:
    """The decode workers' ``max_batch_size`` (sequences per attention rank) a TensorRT-LLM recipe
    file name states (``..._gen4_tep8_batch8_...`` or ``..._gen1dep32_batch8_...``), else None."""
    m = _BATCH_RE.search(config_file.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None



def _entry(r: dict[str, str]) -> Entry:
    def pool(side: str) -> Worker:
        return worker(int(r[f"{side}_workers"]), int(r[f"{side}_tp"]), int(r[f"{side}_ep"]),
                      r[f"{side}_dp_attn"] == "true")

    return Entry(r["key"], normalize_image(r["image"]), canonical_model(r["model_prefix"]), r["precision"],
                 gpu_of(r["runner"]), backend_of(r["framework"]), int(r["isl"]), int(r["osl"]),
                 int(r["concurrency"]), r["spec_decoding"], pool("prefill"), pool("decode"),
                 int(r["draft_tokens"]) if r["draft_tokens"] else None, r["first_commit"],
                 dt.date.fromisoformat(r["first_date"]), dt.date.fromisoformat(r["last_date"]),
                 r.get("config_file") or "")


@functools.cache
def load_entries(path: Path = RECIPES_FILE) -> tuple[Entry, ...]:
    """The entries of the recipes file (cached)."""
    with Path(path).open(encoding="utf-8", newline="") as fh:
        return tuple(_entry(r) for r in csv.DictReader(fh))


# ---------------------------------------------------------------- a measured row


def _note(notes: str, name: str) -> str | None:
    m = re.search(rf"(?:^|; ){re.escape(name)}=([^;]*)", notes)
    return m.group(1).strip() if m else None


def notes_workers(row: dict[str, str]) -> tuple[Worker, Worker] | None:
    """The prefill and decode workers a row's notes state (``prefill: workers=... tp=...``)."""
    notes = row.get("notes", "")
    pools = [re.search(_POOL_RE.format(side), notes) for side in ("prefill", "decode")]
    if not all(pools):
        return None
    out = []
    for m in pools:
        workers, tp, _pp, adp, _moe_tp, moe_ep = (int(g) for g in m.groups())
        out.append(Worker(workers, tp, adp, moe_ep))
    return out[0], out[1]


def row_image(row: dict[str, str]) -> str | None:
    """The image a row's notes name: ``image=...`` (source_file rows) or the bare image of a
    db-dump row (``nvcr.io/nvidia/ai-dynamo/...:tag``)."""
    for part in row.get("notes", "").split(";"):
        m = _IMAGE_RE.match(part.strip())
        if m:
            return normalize_image(m.group(1))
    return None


def row_date(row: dict[str, str]) -> dt.date | None:
    measured = _note(row.get("notes", ""), "measured")
    try:
        return dt.date.fromisoformat(measured[:10]) if measured else None
    except ValueError:
        return None


def _concurrencies(row: dict[str, str]) -> set[int]:
    values = {row.get("concurrency", ""), _note(row.get("notes", ""), "silicon_concurrency") or ""}
    return {int(float(v)) for v in values if re.fullmatch(r"\d+(?:\.0*)?", v)}


def _int(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


# ---------------------------------------------------------------- matching


def recipe_for(row: dict[str, str], entries: Sequence[Entry] | None = None) -> tuple[Recipe | None, str]:
    """The recipe of a raw measured-disagg.csv row, or None with the reason (no entry: which
    criterion left none; ambiguous: the layouts left)."""
    entries = load_entries() if entries is None else entries
    models = {canonical_model(row.get("model", "")), canonical_model(row.get("hf_model", ""))} - {""}
    gpu, backend, precision = _norm(row.get("gpu", "")), row.get("backend", "").lower(), row.get("precision", "")
    what = f"{row.get('model')} {precision} {row.get('gpu')} {backend}"
    left = [e for e in entries if e.model in models and e.precision == precision and e.gpu == gpu
            and e.backend == backend]
    if not left:
        return None, f"no entry for {what}"
    isl, osl = _int(row.get("isl")), _int(row.get("osl"))
    left = [e for e in left if e.isl == isl and e.osl == osl]
    if not left:
        return None, f"no entry for {what} at {isl}/{osl}"
    concs = _concurrencies(row)
    near = sorted({e.concurrency for e in left})
    left = [e for e in left if e.concurrency in concs]
    if not left:
        return None, f"no entry at concurrency {'/'.join(map(str, sorted(concs)))} ({isl}/{osl}; entries: {_few(near)})"
    image = row_image(row)
    if image:
        images = sorted({e.image for e in left})
        left = [e for e in left if not e.image or e.image == image]
        if not left:
            return None, f"no entry with image {image} (at this point: {_few(images)})"
    day = row_date(row)
    if day:
        windows = sorted({(e.first_date, e.last_date) for e in left})
        grace = dt.timedelta(days=GRACE_DAYS)
        left = [e for e in left if e.first_date <= day <= e.last_date + grace]
        if not left:
            return None, f"no entry active on {day} (windows: {_few([f'{a}..{b}' for a, b in windows])})"
    return _pick(left, row, image)


def _pick(left: list[Entry], row: dict[str, str], image: str | None) -> tuple[Recipe | None, str]:
    """One layout among the matching entries, with the tie-breakers; the reason says how."""
    stated = notes_workers(row)
    gpus = (stated[0].gpus, stated[1].gpus) if stated else None
    how = []
    for name, keep in (("image", lambda e: e.image == image),
                       ("GPUs per worker", lambda e: gpus == (e.prefill.gpus, e.decode.gpus))):
        kept = [e for e in left if keep(e)]
        if len({e.layout for e in left}) > 1 and kept:
            left = kept
            how.append(name)
    layouts = sorted({e.layout for e in left}, key=str)
    if len(layouts) > 1:
        return None, f"ambiguous: {len(layouts)} layouts: " + "; ".join(_describe(lay, left) for lay in layouts)
    best = max(left, key=lambda e: (e.image == image, e.first_date, e.first_commit))
    why = f"matched {best.key}@{best.first_commit}" + (f" (tie-broken by {', '.join(how)})" if how else "")
    if best.spec_decoding != "none" and best.draft_tokens is None:
        why += f"; {best.spec_decoding}, draft length not stated"
    if gpus and gpus != (best.prefill.gpus, best.decode.gpus):
        why += f"; notes' GPUs per worker {gpus[0]}/{gpus[1]} differ from {best.prefill.gpus}/{best.decode.gpus}"
    return best.recipe(), why


def _describe(layout: tuple[Worker, Worker, str, int | None], left: list[Entry]) -> str:
    prefill, decode, spec, draft = layout
    keys = sorted({e.key for e in left if e.layout == layout})
    spec = "" if spec == "none" else f" {spec}{draft or '?'}"
    return f"prefill {prefill} decode {decode}{spec} [{', '.join(keys)}]"


def _few(values: Sequence[object], n: int = 8) -> str:
    shown = ", ".join(str(v) for v in values[:n])
    return shown + (f", ... ({len(values)})" if len(values) > n else "")
