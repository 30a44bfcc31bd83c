"""Disaggregated serving recipes from InferenceX's NVIDIA configuration history.

    python -m tools.perf.inferencex_disagg [--repo PATH] [--write] [--match CSV]

Walks the first-parent history of InferenceX (SemiAnalysisAI/InferenceX, formerly InferenceMAX)
oldest first: every commit touching ``.github/configs/nvidia-master.yaml``,
``configs/nvidia-master.yaml`` or ``{.github/,}configs/deprecated/nvidia-*.yaml``, and, before
the first commit whose configs hold a disaggregated entry, the ``submit_disagg.sh`` calls of
``runners/launch_gb200-nv.sh`` (how the GB200 runs were configured until 2025-12-05). Every
disaggregated search-space entry at a fixed ISL/OSL becomes one row per concurrency; identical
rows across commits are merged into one with the first and last commit where they were present.
Without ``--write`` the rows are only counted; ``--write`` writes
``facts/data/inferencex-disagg-recipes.csv`` (columns in facts/data/README.md). ``--match CSV``
matches the rows of a measured-disagg.csv against the written recipes
(``engine.domain.perf.disagg_recipes.recipe_for``) and prints a summary.

Shapes read: ``seq-len-configs`` lists and ``scenarios: fixed-seq-len`` lists of
``search-space`` entries with ``prefill``/``decode`` pools; the placeholder ``tp: 1`` of early
Dynamo-SGLang pools (GPUs from their ``PREFILL_NODES``/``DECODE_NODES``: their comments say
tp/ep/dp-attn "do nothing"); dp-attn pools written ``tp: 1, ep: N`` (vLLM/llm-d, 2026-06 on: N
GPUs, DEP N); concurrencies per decode worker of the Dynamo ``benchmark_disagg.slurm`` TensorRT-LLM
entries (``per_decode_worker``); draft lengths from ``CONFIG_FILE=...mtpK...``,
``DECODE_MTP_SIZE=K``, a ``-mtpK`` key suffix, or the recipe file where the repository holds it.
What is skipped or adjusted is counted per distinct entry version and printed.
"""

from __future__ import annotations

import argparse
import collections
import csv
import datetime as _dt
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import astuple, dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from servewise.engine.domain.perf.data import DATA_DIR

DEFAULT_REPO = Path("/work/.mirror/SemiAnalysisAI+InferenceX/repo")
OUT = DATA_DIR / "inferencex-disagg-recipes.csv"
CONFIG_DIRS = (".github/configs", "configs")
CONFIG_PATHS = (".github/configs/nvidia-master.yaml", "configs/nvidia-master.yaml",
                ":(glob).github/configs/deprecated/nvidia-*.yaml", ":(glob)configs/deprecated/nvidia-*.yaml")
CONFIG_RE = re.compile(r"^(?:\.github/)?configs/(?:nvidia-master\.yaml|deprecated/nvidia-[^/]*\.yaml)$")
LAUNCH_SCRIPT = "runners/launch_gb200-nv.sh"
RACK_RUNNERS = ("gb200", "gb300")  # NVL72 racks: 4 GPUs per node (tray); other runners 8
COLUMNS = ("key", "image", "model_prefix", "precision", "runner", "framework", "isl", "osl",
           "concurrency", "spec_decoding", "draft_tokens", "prefill_workers", "prefill_tp",
           "prefill_ep", "prefill_dp_attn", "decode_workers", "decode_tp", "decode_ep",
           "decode_dp_attn", "config_file", "first_commit", "first_date", "last_commit",
           "last_date")

Pool = tuple[int, int, int, bool]  # (workers, tp, ep, dp_attn) as InferenceX states them


@dataclass(frozen=True)
class Item:
    """One disaggregated search-space entry at one concurrency (a CSV row without its commits)."""

    key: str
    isl: int
    osl: int
    concurrency: int
    image: str
    model_prefix: str
    precision: str
    runner: str
    framework: str
    spec_decoding: str
    draft_tokens: int | None
    prefill: Pool
    decode: Pool
    config_file: str


@dataclass(frozen=True)
class Commit:
    sha: str
    date: str  # committer date, UTC, yyyy-mm-dd


# ---------------------------------------------------------------- git


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


def commits(repo: Path, paths: Iterable[str]) -> list[Commit]:
    """First-parent commits touching ``paths``, oldest first."""
    out = git(repo, "log", "--first-parent", "--reverse", "--format=%H %ct", "HEAD", "--", *paths)
    rows = (line.split() for line in out.splitlines() if line)
    return [Commit(sha, _dt.datetime.fromtimestamp(int(t), _dt.timezone.utc).date().isoformat())
            for sha, t in rows]


class Blobs:
    """Blob contents through one ``git cat-file --batch`` process."""

    def __init__(self, repo: Path) -> None:
        self.proc = subprocess.Popen(["git", "-C", str(repo), "cat-file", "--batch"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def read(self, obj: str) -> str:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(obj.encode() + b"\n")
        self.proc.stdin.flush()
        header = self.proc.stdout.readline().split()
        if len(header) < 3:
            raise KeyError(obj)
        data = self.proc.stdout.read(int(header[2]) + 1)
        return data[:-1].decode("utf-8", "replace")

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait()


def config_blobs(repo: Path, sha: str) -> list[tuple[str, str]]:
    """(blob id, path) of the NVIDIA config files in a commit."""
    out = git(repo, "ls-tree", "-r", sha, "--", *CONFIG_DIRS)
    rows = (line.split("\t", 1) for line in out.splitlines() if "\t" in line)
    return [(meta.split()[2], path) for meta, path in rows if CONFIG_RE.match(path)]


# ---------------------------------------------------------------- config entries


def settings_of(*pools: dict[str, Any]) -> dict[str, str]:
    """``NAME=value`` additional-settings of the pools, merged."""
    out: dict[str, str] = {}
    for pool in pools:
        for s in pool.get("additional-settings") or []:
            name, sep, value = str(s).partition("=")
            if sep:
                out[name.strip()] = value.strip()
    return out


def gpus_per_node(runner: str, settings: dict[str, str]) -> int:
    if settings.get("GPUS_PER_NODE", "").isdigit():
        return int(settings["GPUS_PER_NODE"])
    return 4 if runner.split("-")[0] in RACK_RUNNERS else 8


def pool_of(side: dict[str, Any], nodes: str | None, node_gpus: int, unread: collections.Counter) -> Pool:
    """A pool as stated, except the placeholder ``tp: 1`` of Dynamo-SGLang pools with ``*_NODES``
    (``nodes`` is given only for those): their launch scripts ignored tp/ep/dp-attn ("they do
    nothing", the entries say) and the worker spans its nodes' GPUs, attention-DP and EP over
    them where dp-attn is set ("DEP8", "DEP32" in their comments)."""
    workers, tp = int(side["num-worker"]), int(side["tp"])
    ep, dp = int(side.get("ep") or 1), bool(side.get("dp-attn"))
    for extra in ("pp", "dcp-size", "pcp-size"):
        if int(side.get(extra) or 1) > 1:
            unread[f"pool field {extra} > 1 (ignored)"] += 1
    if nodes and nodes.isdigit() and tp == 1 and workers and int(nodes) * node_gpus % workers == 0:
        per = int(nodes) * node_gpus // workers
        if per > 1:
            unread["Dynamo-SGLang tp placeholder replaced from *_NODES"] += 1
            return workers, per, per if dp else ep, dp
    if dp and tp == 1 and ep > 1:  # vLLM/llm-d entries from 2026-06: recipes named "dep8" for these
        unread["dp-attn pool with tp 1 and ep N read as N GPUs (DEP N)"] += 1
        return workers, ep, ep, dp
    if ep > tp:
        unread["pool with ep > tp (read as stated)"] += 1
    return workers, tp, ep, dp


MTP_RE = re.compile(r"mtp(\d+)", re.I)


def draft_of(spec: str, key: str, config_file: str, settings: dict[str, str],
             unread: collections.Counter) -> int | None:
    """Draft tokens of an MTP entry: the CONFIG_FILE's ``mtpK``, else DECODE_MTP_SIZE, else a
    ``-mtpK`` key suffix; None for a non-speculative entry or when nothing says."""
    said = [int(m.group(1)) for m in [MTP_RE.search(Path(config_file).name)] if m]
    if settings.get("DECODE_MTP_SIZE", "").isdigit():
        said.append(int(settings["DECODE_MTP_SIZE"]))
    said += [int(m.group(1)) for m in [re.search(r"-mtp(\d+)$", key)] if m]
    if spec == "none":
        if any(said):
            unread["spec-decoding none but a draft length > 0 stated (draft left empty)"] += 1
        return None
    if not said:
        return None
    if len(set(said)) > 1:
        unread["draft lengths disagree (CONFIG_FILE name used)"] += 1
    return said[0] or None


def per_decode_worker(framework: str, config_file: str, settings: dict[str, str]) -> bool:
    """Whether an entry's concurrencies are per decode worker: TensorRT-LLM entries run by Dynamo's
    performance_sweeps ``benchmark_disagg.slurm`` (DECODE_MAX_BATCH_SIZE settings, no srt-slurm
    CONFIG_FILE; until 2026-01-30). Their runs had list value x decode workers in flight: the
    measured c564 of "1 4 8 ... 141" has batch 141 on each of 4 decode workers, and the list
    "1 2 4 8 16 34" of 3 workers was measured at c3 ... c102."""
    return "trt" in framework and not config_file and "DECODE_MAX_BATCH_SIZE" in settings


def scenario_lists(entry: dict[str, Any], unread: collections.Counter) -> Iterator[dict[str, Any]]:
    """The fixed-length scenarios (isl, osl, search-space) of an entry, old or new shape."""
    yield from entry.get("seq-len-configs") or []
    scenarios = entry.get("scenarios") or {}
    for kind, lst in scenarios.items():
        if kind == "fixed-seq-len":
            yield from lst or []
        else:
            unread[f"scenario {kind} (no isl/osl; skipped)"] += len(lst or [])
    if not entry.get("seq-len-configs") and not scenarios:
        unread["disagg entry without seq-len-configs/scenarios"] += 1


def entry_items(key: str, entry: dict[str, Any], unread: collections.Counter) -> Iterator[Item]:
    runner = str(entry.get("runner", ""))
    for scen in scenario_lists(entry, unread):
        isl, osl = int(scen["isl"]), int(scen["osl"])
        for ss in scen.get("search-space") or []:
            if "conc-list" not in ss or "prefill" not in ss or "decode" not in ss:
                unread["search-space entry without conc-list/prefill/decode"] += 1
                continue
            pre, dec = ss["prefill"] or {}, ss["decode"] or {}
            st = settings_of(pre, dec)
            node_gpus = gpus_per_node(runner, st)
            sgl = "sglang" in str(entry.get("framework", ""))
            try:
                prefill = pool_of(pre, st.get("PREFILL_NODES") if sgl else None, node_gpus, unread)
                decode = pool_of(dec, st.get("DECODE_NODES") if sgl else None, node_gpus, unread)
            except (KeyError, TypeError, ValueError):
                unread["pool without num-worker/tp"] += 1
                continue
            spec = str(ss.get("spec-decoding") or "none")
            config_file = st.get("CONFIG_FILE", "")
            draft = draft_of(spec, key, config_file, st, unread)
            per_worker = per_decode_worker(str(entry.get("framework", "")), config_file, st)
            unread["Dynamo-TRT concurrency per decode worker (x decode workers)"] += per_worker
            for conc in ss["conc-list"]:
                conc = int(conc) * (decode[0] if per_worker else 1)
                yield Item(key, isl, osl, conc, str(entry.get("image", "")),
                           str(entry.get("model-prefix", "")), str(entry.get("precision", "")), runner,
                           str(entry.get("framework", "")), spec, draft, prefill, decode, config_file)


def top_level_chunks(text: str) -> Iterator[str]:
    """The text of each top-level entry of a config file (they use no anchors, so each parses alone)."""
    chunk: list[str] = []
    for line in text.splitlines(keepends=True):
        if line[:1] not in ("", " ", "\t", "#", "\n", "-") and chunk:
            yield "".join(chunk)
            chunk = []
        chunk.append(line)
    if chunk:
        yield "".join(chunk)


def chunk_items(text: str, unread: collections.Counter) -> set[Item]:
    """The disaggregated items of one top-level entry."""
    try:
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        unread["config entry that is not YAML"] += 1
        return set()
    out: set[Item] = set()
    for key, entry in (doc or {}).items() if isinstance(doc, dict) else ():
        if not isinstance(entry, dict):
            continue
        if not entry.get("disagg"):
            if entry.get("multinode"):
                unread["multinode entry without disagg (aggregated; skipped)"] += 1
            continue
        out.update(entry_items(str(key), entry, unread))
    return out


# ---------------------------------------------------------------- launch script (before 2025-12-05)

ISL_RE = re.compile(r'\$(?:ISL|isl)" = "(\d+)" \] && \[ "\$(?:OSL|osl)" = "(\d+)"')
TRT_RE = re.compile(r'submit_disagg\.sh "mtp=(on|off)" "(tep|dep)" (\d+) (\d+) (\d+) \d+ \d+ "[\d.]+" (\d+) \d+ '
                    r'"([\d ]+)"')
SGL_RE = re.compile(r"submit_disagg\.sh (\d+) (\d+) (\d+) (\d+) \d+ \$ISL \$OSL \$(\w+)")
ASSIGN_RE = re.compile(r'^\s*(\w+)="([\dx]+)"')
TRT_KEY, SGL_KEY = "dsr1-fp4-gb200-dynamo-trt", "dsr1-fp8-gb200-dynamo-sglang"


def launch_items(text: str, unread: collections.Counter) -> set[Item]:
    """The ``submit_disagg.sh`` calls of runners/launch_gb200-nv.sh as items, under the keys the
    2025-12-05 configs gave them. TensorRT-LLM: ``ctx_num gen_num gen_tp ... gen_mtp_size eplb
    "concurrencies"`` (the usage comment puts eplb before mtp; the values, and their transcription
    into the configs, put mtp first); context workers TP4/EP4 (hardcoded), attention DP in both
    pools in ``dep`` mode; concurrencies per generation worker (``per_decode_worker``). SGLang:
    ``prefill_nodes prefill_workers decode_nodes decode_workers frontends``, every worker
    attention-DP and EP over its nodes' 4 GPUs. The script names no image: left empty."""
    out: set[Item] = set()
    isl = osl = 0
    lists: dict[str, list[int]] = {}
    for line in text.splitlines():
        if m := ISL_RE.search(line):
            isl, osl = int(m.group(1)), int(m.group(2))
        if m := ASSIGN_RE.match(line):
            lists[m.group(1)] = [int(c) for c in m.group(2).split("x") if c]
        if "submit_disagg.sh" not in line or line.lstrip().startswith("#"):
            continue
        if m := TRT_RE.search(line):
            mtp, mode, ctx, gen, tp, size, concs = m.groups()
            dp, draft = mode == "dep", (int(size) or None) if mtp == "on" else None
            spec = "mtp" if mtp == "on" else "none"
            items = [Item(TRT_KEY, isl, osl, int(c) * int(gen), "", "dsr1", "fp4", "gb200", "dynamo-trt", spec, draft,
                          (int(ctx), 4, 4, dp), (int(gen), int(tp), int(tp), dp), "") for c in concs.split()]
        elif m := SGL_RE.search(line):
            pn, pw, dn, dw, var = m.groups()
            per_p, per_d = int(pn) * 4 // int(pw), int(dn) * 4 // int(dw)
            items = [Item(SGL_KEY, isl, osl, c, "", "dsr1", "fp8", "gb200", "dynamo-sglang", "none", None,
                          (int(pw), per_p, per_p, True), (int(dw), per_d, per_d, True), "")
                     for c in lists.get(var, [])]
        else:
            unread["launch-script submit_disagg.sh call not parsed"] += 1
            continue
        if not isl or not items:
            unread["launch-script call without isl/osl or concurrencies"] += 1
        out.update(i for i in items if i.isl)
    return out


# ---------------------------------------------------------------- the walk


@dataclass
class Walk:
    commits: list[Commit]
    seen: dict[Item, tuple[int, int]]  # item -> (first, last) index into commits
    unread: collections.Counter


def walk(repo: Path) -> Walk:
    """Every disaggregated item of the history with the commits where it was first/last present."""
    cfg = commits(repo, CONFIG_PATHS)
    unread: collections.Counter = collections.Counter()
    cache: dict[str, set[Item]] = {}
    chunks: dict[str, set[Item]] = {}
    blobs = Blobs(repo)
    states: list[tuple[Commit, set[Item]]] = []
    try:
        for c in cfg:
            present: set[Item] = set()
            for blob, _path in config_blobs(repo, c.sha):
                if blob not in cache:
                    cache[blob] = set()
                    for chunk in top_level_chunks(blobs.read(blob)):
                        if "disagg" in chunk and chunk not in chunks:
                            chunks[chunk] = chunk_items(chunk, unread)
                        cache[blob] |= chunks.get(chunk, set())
                present |= cache[blob]
            if present or states:
                states.append((c, present))
        first = states[0][0].sha if states else "HEAD"
        early = [c for c in commits(repo, [LAUNCH_SCRIPT]) if c.sha != first and _is_ancestor(repo, c.sha, first)]
        states = [(c, launch_items(blobs.read(f"{c.sha}:{LAUNCH_SCRIPT}"), unread)) for c in early] + states
    finally:
        blobs.close()
    seen: dict[Item, tuple[int, int]] = {}
    for i, (_c, present) in enumerate(states):
        for item in present:
            seen[item] = (seen[item][0], i) if item in seen else (i, i)
    return Walk([c for c, _ in states], recipe_drafts(repo, seen, [c for c, _ in states], unread), unread)


RECIPES_DIR = "benchmarks/multi_node/srt-slurm-recipes"  # in-repo copies of srt-slurm recipes (2026-04-24 on)
DRAFT_KEYS = re.compile(r"(?:speculative[-_]num[-_]steps|num[-_]speculative[-_]tokens|num[-_]nextn[-_]predict[-_]layers"
                        r'|max[-_]draft[-_]len)"?\s*[:=]\s*(\d+)')


def recipe_drafts(repo: Path, seen: dict[Item, tuple[int, int]], order: list[Commit],
                  unread: collections.Counter) -> dict[Item, tuple[int, int]]:
    """Fill the draft length of speculative items whose CONFIG_FILE names none from the recipe
    file itself, where the repository holds it (``speculative-num-steps`` of SGLang,
    ``num_speculative_tokens`` of vLLM, ``num_nextn_predict_layers``/``max_draft_len`` of
    TensorRT-LLM) and it states one value; items that merge keep the widest window."""
    out: dict[Item, tuple[int, int]] = {}
    blobs = Blobs(repo)
    texts: dict[tuple[str, str], str | None] = {}
    try:
        for item, (a, b) in seen.items():
            if item.spec_decoding != "none" and item.draft_tokens is None and item.config_file:
                rel = item.config_file.split(":")[0].removeprefix("recipes/")
                for c in (order[b].sha, order[a].sha):
                    if (c, rel) not in texts:
                        try:
                            texts[(c, rel)] = blobs.read(f"{c}:{RECIPES_DIR}/{rel}")
                        except KeyError:
                            texts[(c, rel)] = None
                    values = set(DRAFT_KEYS.findall(texts[(c, rel)] or ""))
                    if len(values) == 1:
                        unread["rows: draft length read from the recipe file"] += 1
                        item = replace(item, draft_tokens=int(values.pop()) or None)
                        break
                    if len(values) > 1:
                        unread["rows: recipe file states several draft lengths (left empty)"] += 1
                        break
            if item.spec_decoding != "none" and item.draft_tokens is None:
                unread[f"rows: spec-decoding {item.spec_decoding} without a draft length"] += 1
            if item in out:
                a, b = min(a, out[item][0]), max(b, out[item][1])
            out[item] = (a, b)
    finally:
        blobs.close()
    return out


def _is_ancestor(repo: Path, sha: str, ref: str) -> bool:
    return subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", sha, ref],
                          capture_output=True).returncode == 0


def csv_rows(w: Walk) -> list[dict[str, str]]:
    """The CSV rows, sorted by key, isl, osl, concurrency (numerically), then the other columns."""
    rows = []
    for item, (a, b) in sorted(w.seen.items(), key=lambda kv: _order(kv[0], w.commits[kv[1][0]].sha)):
        p, d = item.prefill, item.decode
        rows.append(dict(zip(COLUMNS, (
            item.key, item.image, item.model_prefix, item.precision, item.runner, item.framework,
            str(item.isl), str(item.osl), str(item.concurrency), item.spec_decoding,
            "" if item.draft_tokens is None else str(item.draft_tokens),
            str(p[0]), str(p[1]), str(p[2]), str(p[3]).lower(), str(d[0]), str(d[1]), str(d[2]),
            str(d[3]).lower(), item.config_file, w.commits[a].sha[:12], w.commits[a].date,
            w.commits[b].sha[:12], w.commits[b].date), strict=True)))
    return rows


def _order(item: Item, first: str) -> tuple:
    return tuple(-1 if v is None else v for v in astuple(item)) + (first,)


def write(rows: list[dict[str, str]], path: Path = OUT) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        out.writeheader()
        out.writerows(rows)


# ---------------------------------------------------------------- --match


def provenance(row: dict[str, str]) -> str:
    m = re.search(r"provenance: (db-dump|source_file=[^;]*)", row.get("notes", ""))
    return "other" if not m else "db-dump" if m.group(1) == "db-dump" else "source_file"


def match_report(path: Path) -> str:
    """Summary of ``recipe_for`` over the rows of a measured-disagg.csv."""
    from servewise.engine.domain.perf.disagg_recipes import recipe_for

    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    results = [recipe_for(r) for r in rows]
    groups: dict[tuple[str, ...], collections.Counter] = collections.defaultdict(collections.Counter)
    reasons: collections.Counter = collections.Counter()
    drafts: collections.Counter = collections.Counter()
    for r, (recipe, why) in zip(rows, results, strict=True):
        status = "matched" if recipe else "ambiguous" if why.startswith("ambiguous") else "none"
        groups[(r["model"], r["gpu"], r["backend"], provenance(r))][status] += 1
        if recipe is None:
            reasons[f"{r['model']}/{r['gpu']}/{r['backend']}: {_reason_class(why)}"] += 1
        else:
            drafts["MTP, draft not stated" if "draft length not stated" in why else recipe.draft_tokens] += 1
    total: collections.Counter = collections.Counter()
    for c in groups.values():
        total.update(c)
    lines = [f"rows {len(rows)}: matched {total['matched']}, ambiguous {total['ambiguous']}, none {total['none']}",
             "", "model/gpu/backend/provenance: matched ambiguous none"]
    lines += [f"  {'/'.join(k)}: {c['matched']} {c['ambiguous']} {c['none']}" for k, c in sorted(groups.items())]
    lines += ["", "not matched:"] + [f"  {n} x {k}" for k, n in sorted(reasons.items())]
    lines += ["", *_agreement(rows, results), ""]
    mtp = {k: v for k, v in drafts.items() if k}
    lines.append(f"matched rows with MTP: {sum(mtp.values())} (draft tokens: "
                 f"{', '.join(f'{k}: {v}' for k, v in sorted(mtp.items(), key=str))}); without: {drafts[None]}")
    lines.append(_twins(rows, results))
    return "\n".join(lines)


def _agreement(rows: list[dict[str, str]], results: list[tuple[Any, str]]) -> list[str]:
    """Matched db-dump rows against the workers their notes state, by which fields differ."""
    from servewise.engine.domain.perf.disagg_recipes import notes_workers

    kinds: dict[str, list[str]] = collections.defaultdict(list)
    for r, (recipe, _why) in zip(rows, results, strict=True):
        stated = notes_workers(r)
        if recipe is None or stated is None or provenance(r) != "db-dump":
            continue
        got = (recipe.prefill, recipe.decode)
        diff = [f"{pool} {field}" for pool, a, b in zip(("prefill", "decode"), stated, got, strict=True)
                for field in ("workers", "gpus", "tp", "ep") if getattr(a, field) != getattr(b, field)]
        row_id = r["source"].split("id=")[-1]
        kinds[", ".join(diff) or "agree"].append(
            f"{row_id}: notes {_fmt(*stated)}; recipe {_fmt(*got)} ({recipe.key}@{recipe.commit})")
    n = sum(len(v) for k, v in kinds.items() if k != "agree")
    out = [f"matched db-dump rows vs their notes' workers/layout: agree {len(kinds['agree'])}, disagree {n}"]
    for kind, examples in sorted(kinds.items()):
        if kind != "agree":
            out += [f"  {len(examples)} x differ in {kind}, e.g."] + [f"    {e}" for e in examples[:2]]
    return out


def _twins(rows: list[dict[str, str]], results: list[tuple[Any, str]]) -> str:
    """Whether source_file rows get the recipe of their db-dump twin (same numbers)."""
    def twin_key(r: dict[str, str]) -> tuple[str, ...]:
        return tuple(r[c] for c in ("model", "gpu", "backend", "precision", "isl", "osl", "concurrency",
                                    "ttft_ms", "tpot_ms"))

    db = {twin_key(r): res[0] for r, res in zip(rows, results, strict=True) if provenance(r) == "db-dump"}
    c: collections.Counter = collections.Counter()
    for r, (recipe, _why) in zip(rows, results, strict=True):
        if provenance(r) == "source_file" and twin_key(r) in db:
            twin = db[twin_key(r)]
            same = twin and recipe and (twin.prefill, twin.decode, twin.draft_tokens) == (
                recipe.prefill, recipe.decode, recipe.draft_tokens)
            c["same recipe" if same else "neither matched" if not twin and not recipe else "different"] += 1
    return "source_file rows with a db-dump twin: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))


def _reason_class(why: str) -> str:
    """A reason, ambiguities grouped by whether only the speculative decoding differs."""
    if not why.startswith("ambiguous"):
        return why
    pools = set(re.findall(r"prefill (\S+) decode ([^\s\[]+)", why))
    return "ambiguous: same pools, with and without MTP" if len(pools) == 1 else "ambiguous: different pools"


def _fmt(prefill: Any, decode: Any) -> str:
    return f"prefill {prefill} decode {decode}"


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.perf.inferencex_disagg", description=__doc__.split("\n")[0])
    ap.add_argument("--repo", type=Path, default=DEFAULT_REPO, help="InferenceX git directory (bare is fine)")
    ap.add_argument("--write", action="store_true", help=f"write {OUT.relative_to(DATA_DIR.parents[1])}")
    ap.add_argument("--match", type=Path, metavar="CSV", help="match a measured-disagg.csv against the recipes")
    args = ap.parse_args(argv)
    if args.write or not args.match:
        w = walk(args.repo)
        rows = csv_rows(w)
        head = w.commits[-1]
        print(f"{len(rows)} rows from {len(w.commits)} commits ({w.commits[0].sha[:12]} {w.commits[0].date} "
              f"... {head.sha[:12]} {head.date})")
        for what, n in sorted(w.unread.items()):
            print(f"  unread/adjusted: {n} x {what}")
        if args.write:
            write(rows)
            print(f"wrote {OUT}")
    if args.match:
        print(match_report(args.match))
    return 0


if __name__ == "__main__":
    sys.exit(main())
