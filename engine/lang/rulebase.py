"""Load rule files: validate against rules/rule.schema.json, compile expressions once, and report
every problem as ``file:line: rule-id: message``."""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from servewise.engine.common.paths import PACKAGE_ROOT
from servewise.engine.common.schema_check import Check, compiled, jsonschema_validator, valid
from servewise.engine.common.yamlio import Lines, YamlError, line_of, load_file, read_text
from servewise.engine.domain.functions import FUNCTIONS
from servewise.engine.lang.expr import Expr, ExprError, compile_expr
from servewise.engine.lang.template import TEMPLATE_FIELD, Template, make_template  # noqa: F401 - re-exported

RULES_DIR = PACKAGE_ROOT / "rules"
FACTS_DIR = PACKAGE_ROOT / "facts"
SCHEMA_FILE = RULES_DIR / "rule.schema.json"
STAGES = ("inputs", "derivations", "candidates", "filters", "selection", "bom", "facilities",
          "cost", "checks")


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.rule}: {self.message}"


class RuleLoadError(ValueError):
    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(map(str, problems)))


# action kinds that carry the rule's rendered ``because`` (run after it is rendered)
REPORTING_ACTIONS = ("reject", "warn", "ask")


@dataclass
class Action:
    kind: str                      # derive | choose | propose | reject | warn | ask | select | least
    spec: dict[str, Any]
    exprs: dict[str, Expr] = field(default_factory=dict)
    locals: tuple[str, ...] = ()   # names bound by the action itself (propose `over`, select kind)


def _texts(value: Any) -> dict[str, str] | None:
    """A rule text as {en, zh}: an English-only string becomes {en}."""
    if value is None:
        return None
    return {"en": value} if isinstance(value, str) else dict(value)


@dataclass
class RuleSpec:
    id: str
    title: dict[str, str]
    sources: list[dict[str, Any]]
    stage: str
    salience: int
    for_each: str | None
    when: list[Expr]
    actions: list[Action]
    because: dict[str, Template]
    file: str
    line: int
    load_order: int
    tests: list[dict[str, Any]]
    corrects: dict[str, str] | None = None   # {en, zh} (zh may be missing in a --rules-dir rule)
    aliases: tuple[str, ...] = ()
    lets: tuple[tuple[str, Expr], ...] = ()   # rule-local bindings, in order (``constants:`` then ``let:``)
    constants: tuple[str, ...] = ()           # the names of ``constants:`` (sourced numbers; lets too)
    band: dict[str, Any] | None = None        # ``band:`` (its bounds are conditions in ``when``)
    lines: dict[tuple, int] = field(default_factory=dict, repr=False)  # key path in the rule → line
    raw: dict[str, Any] = field(default_factory=dict, repr=False)      # the rule as written
    builtin: bool = False                                              # shipped in rules/
    order_by: Expr | None = None   # for-each rules: activations fire in ascending order of it

    def line_at(self, *path: Any) -> int:
        """The line of the deepest known prefix of ``path`` inside this rule."""
        for cut in range(len(path), -1, -1):
            if path[:cut] in self.lines:
                return self.lines[path[:cut]]
        return self.line

    @cached_property
    def let_map(self) -> dict[str, Expr]:
        return dict(self.lets)

    @cached_property
    def let_paths(self) -> dict[str, tuple[str, tuple[str, ...]] | None]:
        """Each name read so far split for engine/runtime/resolve.py's ``with_lets``: None when it
        is no binding, else (binding, fields); filled as names are read (names are the rule's own)."""
        return {}

    def expand(self, names: tuple[str, ...] | list[str]) -> list[str]:
        """Replace each rule-local binding (``let:``) by the fact paths its expression reads."""
        out: list[str] = []
        for n in names:
            root = n.split(".")[0]
            inner = self.expand(self.let_map[root].names) if root in self.let_map else [n]
            out.extend(x for x in inner if x not in out)
        return out

    @cached_property
    def produces(self) -> frozenset[str]:
        """Fact paths this rule's own actions set (later actions may read them)."""
        out: set[str] = set()
        for a in self.actions:
            if a.kind == "derive":
                out.update(a.spec)
            elif a.kind == "least" and self.for_each:
                out.update((f"{self.for_each}.{a.spec['as']}", f"{self.for_each}.{a.spec['as']}_id"))
            elif a.kind == "choose":
                comp = a.spec["component"]
                out.update(f"components.{comp}.{k}" for k in (a.spec.get("set") or {}))
                out.update(f"components.{comp}.{k}" for k in (a.spec.get("compute") or {}))
        return frozenset(out)

    @cached_property
    def names(self) -> tuple[str, ...]:
        """Every fact path the rule needs before it can fire (conditions and formulas)."""
        seen: list[str] = []
        local: set[str] = set()
        for a in self.actions:
            local.update(a.locals)
        exprs = list(self.when) + [e for a in self.actions for e in a.exprs.values()]
        for e in exprs:
            for n in self.expand(e.names):
                if n.split(".")[0] not in local and n not in seen and n not in self.produces:
                    seen.append(n)
        return tuple(seen)

    @cached_property
    def template_names(self) -> tuple[str, ...]:
        """Fact paths the explanation shows (they may be results of this rule)."""
        out: list[str] = []
        for t in self.because.values():
            out.extend(n for n in self.expand(t.names) if n not in out)
        return tuple(out)

    @cached_property
    def global_names(self) -> tuple[str, ...]:
        prefix = f"{self.for_each}." if self.for_each else None
        return tuple(n for n in self.names if not (prefix and n.startswith(prefix)))

    @cached_property
    def item_names(self) -> tuple[str, ...]:
        prefix = f"{self.for_each}." if self.for_each else None
        return tuple(n[len(prefix):] for n in self.names if prefix and n.startswith(prefix))


@lru_cache(maxsize=1)
def guidelines() -> dict[str, dict[str, Any]]:
    """The 243 guidelines of the seed articles (facts/guidelines.yaml), by id."""
    from servewise.engine.common import rulecache

    data = rulecache.cached_yaml(FACTS_DIR / "guidelines.yaml")
    return {g["id"]: g for g in data}


@lru_cache(maxsize=1)
def known_guidelines() -> dict[str, str]:
    """Guideline id → seed document."""
    return {gid: g["source"]["doc"] for gid, g in guidelines().items()}


@lru_cache(maxsize=1)
def rule_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


MAX_RULES = 20_000  # all folders together: the built-in ~200 rules plus ample room for extensions
MAX_RULE_FILES = 2_000


def _compile(src: Any, where: str) -> Expr:
    try:
        return compile_expr(src, FUNCTIONS)
    except ExprError as exc:
        raise ExprError(f"{where}: {exc}") from None


BAND_BOUNDS = {"from": ">=", "above": ">", "below": "<", "upto": "<="}


def _constants(raw: dict[str, Any]) -> tuple[tuple[str, Expr], ...]:
    """``constants:`` as bindings that come before ``let:`` (a name may not be both)."""
    consts = raw.get("constants") or {}
    both = sorted(set(consts) & set(raw.get("let") or {}))
    if both:
        raise ExprError(f"constants: '{both[0]}' is also a let binding")
    return tuple((name, _compile(repr(c["value"]), f"constants {name}")) for name, c in consts.items())


def band_conditions(band: dict[str, Any] | None) -> list[str]:
    """The conditions a ``band:`` adds to its rule: the quantity is known and within the bounds."""
    if not band:
        return []
    over = band["over"]
    return [f"{over} != None"] + [f"{over} {op} {band[key]}" for key, op in BAND_BOUNDS.items()
                                  if key in band]


def _compile_lets(raw: dict[str, Any],
                  before: tuple[tuple[str, Expr], ...] = ()) -> tuple[tuple[str, Expr], ...]:
    """Compile ``let:`` bindings in order; a binding may read only bindings defined before it."""
    out: list[tuple[str, Expr]] = list(before)
    for name, src in raw.items():
        e = _compile(src, f"let {name}")
        later = [n for n in e.names if n.split(".")[0] in raw and n.split(".")[0] not in dict(out)]
        if later:
            raise ExprError(f"let {name}: reads '{later[0]}', which is not bound before it")
        out.append((name, e))
    return tuple(out)


def _compile_action(raw: dict[str, Any], for_each: str | None) -> Action:
    kind, spec = next(iter(raw.items()))
    spec = dict(spec or {})  # compiled templates go on this copy, never into the rule file's data (cached, hashed)
    exprs: dict[str, Expr] = {}
    local: tuple[str, ...] = ()
    if kind == "derive":
        for key, src in spec.items():
            if "." in key and for_each is None and key.split(".")[0] in ("candidate",):
                raise ExprError(f"derive '{key}': per-item values need `for_each`")
            exprs[key] = _compile(src, f"derive {key}")
    elif kind == "choose":
        for key, src in (spec.get("compute") or {}).items():
            exprs[f"compute.{key}"] = _compile(src, f"choose {spec['component']}.{key}")
    elif kind == "propose":
        over = spec.get("over") or {}
        local = tuple(over)
        for key, src in over.items():
            exprs[f"over.{key}"] = _compile(src, f"propose over {key}")
        exprs["id"] = _compile(spec["id"], "propose id")
        if spec.get("skip") is not None:  # combinations that name no option (no item, no rejection)
            exprs["skip"] = _compile(spec["skip"], "propose skip")
        for key, src in spec["attrs"].items():
            exprs[f"attrs.{key}"] = _compile(src, f"propose attr {key}")
        for i, u in enumerate(spec.get("unless") or []):
            exprs[f"unless.{i}"] = _compile(u["when"], f"propose unless {i}")
            for lang, text in u["because"].items():
                spec.setdefault("_templates", {})[(i, lang)] = make_template(text)
        local = local + (spec["kind"],)
    elif kind == "reject":
        for key, src in (spec.get("figures") or {}).items():  # numbers the rejection records for the views
            exprs[f"figures.{key}"] = _compile(src, f"reject figure {key}")
    elif kind == "least" and for_each is None:
        raise ExprError("least: compares the items of a for_each rule; this rule has none")
    elif kind == "select":
        local = (spec["kind"],)
        for i, src in enumerate(spec["minimize"]):
            exprs[f"minimize.{i}"] = _compile(src, f"select minimize {i}")
        for lang, text in (spec.get("ranked_because") or {}).items():
            spec.setdefault("_templates", {})[("ranked", lang)] = make_template(text)
    return Action(kind, spec, exprs, local)


@lru_cache(maxsize=1)
def _fast_check() -> Check | None:
    return compiled(rule_schema())


def _schema_problems(data: Any, lines: Lines, file: str) -> list[Problem]:
    if valid(_fast_check(), data):
        return []
    validator = jsonschema_validator(rule_schema())  # describes what is wrong
    problems = []
    for err in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        path = tuple(err.absolute_path)
        rule_id = "-"
        if path and isinstance(data, list) and isinstance(path[0], int):
            item = data[path[0]]
            if isinstance(item, dict):
                rule_id = str(item.get("id", f"#{path[0] + 1}"))
        where = ".".join(map(str, path[1:])) or "rule"
        message = err.message
        line = line_of(lines, path)
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            allowed = sorted(err.schema.get("properties", {}))
            patterns = sorted(err.schema.get("patternProperties", {}))  # names a pattern admits
            extra = sorted(k for k in err.instance if k not in allowed
                           and not any(re.search(p, str(k)) for p in patterns))
            if extra:
                close = difflib.get_close_matches(extra[0], allowed, n=1, cutoff=0.5)
                hint = (f"; did you mean '{close[0]}'?" if close else
                        f"; allowed: {', '.join(allowed)}" if allowed else
                        f"; a name must match {' or '.join(patterns)}")
                message = f"unknown key '{extra[0]}'{hint}"
                line = line_of(lines, (*path, extra[0]))
        problems.append(Problem(file, line, rule_id, f"{where}: {message}"))
    return problems


def _read_rule_file(path: Path, file: str) -> tuple[Any, Lines, list[Problem]]:
    """Parse one rule file and check it against the schema (the part the rule cache stores)."""
    try:
        data, lines = load_file(path)
    except YamlError as exc:
        return None, {}, [Problem(file, exc.line, "-", exc.message)]
    if data is None:
        return None, lines, []
    return data, lines, _schema_problems(data, lines, file)


def load_rule_file(path: Path, start_order: int = 0,
                   display: str | None = None) -> tuple[list[RuleSpec], list[Problem]]:
    file = display or str(path)
    data, lines, problems = _read_rule_file(path, file)
    if problems or data is None:
        return [], problems
    return _rule_specs(path, data, lines, file, start_order)


def _rule_specs(path: Path, data: Any, lines: Lines, file: str,
                start_order: int) -> tuple[list[RuleSpec], list[Problem]]:
    """Compile the rules of one parsed, schema-valid file."""
    problems: list[Problem] = []
    specs: list[RuleSpec] = []
    by_rule: dict[int, dict[tuple, int]] = {}  # the lines of each rule, by key path inside it
    for p, n in lines.items():
        if p and isinstance(p[0], int):
            by_rule.setdefault(p[0], {})[p[1:]] = n
    builtin = _is_builtin(path)
    for i, raw in enumerate(data):
        rid = raw["id"]
        try:
            lets = _compile_lets(raw.get("let") or {}, _constants(raw))
            when = [_compile(c, f"when[{j}]") for j, c in enumerate(raw.get("when") or [])]
            when += [_compile(c, "band") for c in band_conditions(raw.get("band"))]
            actions = [_compile_action(a, raw.get("for_each")) for a in raw["then"]]
            because = {lang: make_template(text) for lang, text in raw["because"].items()}
            order_by = _compile(raw["order_by"], "order_by") if raw.get("order_by") is not None else None
            if order_by is not None and not raw.get("for_each"):
                raise ExprError("order_by: orders the activations of a for_each rule; this rule has none")
        except ExprError as exc:
            problems.append(Problem(file, line_of(lines, (i,)), rid, str(exc)))
            continue
        sources = raw["source"] if isinstance(raw["source"], list) else [raw["source"]]
        known = known_guidelines()
        for src in sources:
            ids = src.get("guideline") or []
            for gid in [ids] if isinstance(ids, str) else ids:
                if gid not in known:
                    problems.append(Problem(file, line_of(lines, (i, "source")), rid,
                                            f"source: unknown guideline id '{gid}'"))
                elif src.get("doc") and src["doc"] != known[gid]:
                    problems.append(Problem(file, line_of(lines, (i, "source")), rid,
                                            f"source: {gid} is from {known[gid]}, not {src['doc']}"))
        specs.append(RuleSpec(
            id=rid, title=raw["title"], sources=sources, stage=raw["stage"],
            salience=int(raw.get("salience", 0)), for_each=raw.get("for_each"), when=when,
            actions=actions, because=because, file=file, line=line_of(lines, (i,)),
            load_order=start_order + len(specs), tests=raw.get("tests") or [],
            corrects=_texts(raw.get("corrects")), aliases=tuple(raw.get("aliases") or ()), lets=lets,
            constants=tuple(raw.get("constants") or ()), band=raw.get("band"),
            lines=by_rule.get(i, {}), raw=raw, builtin=builtin, order_by=order_by,
        ))
    return specs, problems


def _is_builtin(path: Path) -> bool:
    try:
        Path(path).resolve().relative_to(RULES_DIR)
        return True
    except ValueError:
        return False


def rule_files(dirs: list[Path]) -> list[Path]:
    files: list[Path] = []
    for d in dirs:
        p = Path(d)
        if p.is_file():
            files.append(p)
        else:
            files.extend(sorted(x for x in p.rglob("*.yaml") if "tests" not in x.relative_to(p).parts[:-1]))
    return files


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


# ----- rule folders given by --rules-dir or recorded in a plan (`rules_dirs`) -------------------

# Folders that are never rule folders: walking them would take long and load whatever *.yaml they
# hold (system configuration). Exact paths; below the pseudo-file systems nothing is a rule folder.
SYSTEM_FOLDERS = frozenset({
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media",
    "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var",
    "/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libexec", "/usr/include",
    "/usr/local", "/usr/share", "/usr/src", "/var/lib", "/var/log", "/var/cache", "/var/tmp",
})
PSEUDO_FOLDERS = ("/proc", "/sys", "/dev")
MAX_FOLDER_ENTRIES = 20_000  # entries looked at to find a folder's rule files (2,000 files at most)


@dataclass(frozen=True)
class RuleFolderProblem(Problem):
    """A path that is not a rule folder; ``code`` and ``fields`` are its message in
    facts/messages/cli.yaml (``rules_dir.*``), ``message`` the English text. One line: the path
    and what was expected."""

    code: str = ""
    fields: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return self.message

    def text(self, lang: str = "en") -> str:
        from servewise.engine.common.messages import message

        fields = dict(self.fields)
        if "kind" in fields:
            fields["kind"] = message(fields["kind"], lang)
        return message(self.code, lang, **fields)


def _folder_problem(path: str, code: str, **fields: str) -> RuleFolderProblem:
    draft = RuleFolderProblem(path, 0, "-", "", code, tuple({"path": path, **fields}.items()))
    return RuleFolderProblem(path, 0, "-", draft.text("en"), draft.code, draft.fields)


def _is_system_folder(path: str) -> bool:
    home = os.path.expanduser("~")
    for p in {os.path.normpath(os.path.abspath(path)), os.path.realpath(path)}:
        if p in SYSTEM_FOLDERS or (home not in ("/", "") and p == os.path.normpath(home)):
            return True
        if any(p == d or p.startswith(d + "/") for d in PSEUDO_FOLDERS):
            return True
    return False


def _has_rule_files(folder: str) -> str | None:
    """None when ``folder`` holds a *.yaml rule file (outside ``tests`` sub-folders, as
    :func:`rule_files` finds them) within :data:`MAX_FOLDER_ENTRIES` entries; else the message code
    (``rules_dir.empty`` or ``rules_dir.too_large``). Links to folders are not followed (nor by
    :func:`rule_files`)."""
    seen = 0
    stack = [folder]
    while stack:
        current = stack.pop()
        try:
            with os.scandir(current) as entries:
                for entry in entries:
                    seen += 1
                    if seen > MAX_FOLDER_ENTRIES:
                        return "rules_dir.too_large"
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            if entry.name != "tests":
                                stack.append(entry.path)
                        elif entry.name.endswith(".yaml"):
                            return None
                    except OSError:
                        continue
        except OSError:
            if current == folder:
                raise
            continue
    return "rules_dir.empty"


def check_rule_folder(path: Path | str) -> RuleFolderProblem | None:
    """Why ``path`` is not a rule folder, or None when it is one: an existing folder (links
    followed) that is no system folder and holds *.yaml rule files, or one *.yaml rule file (as
    `rules lint FILE` takes). FIFOs, devices, sockets, other files, system folders (``/``,
    ``/etc``, ``/usr``, the home folder itself, anything below ``/proc``, ``/sys``, ``/dev``),
    folders without rule files and trees too large to be one are refused, quickly and without
    reading any file's content. One check for ``--rules-dir`` (every command, through
    :func:`load_rules`) and for the folders a plan file records (`audit`)."""
    name = str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return _folder_problem(name, "rules_dir.not_found")
    except (OSError, ValueError) as exc:
        return _folder_problem(name, "rules_dir.unreadable", reason=str(getattr(exc, "strerror", None) or exc))
    if stat.S_ISREG(st.st_mode):
        return None if name.endswith(".yaml") else _folder_problem(name, "rules_dir.not_rule_file")
    if not stat.S_ISDIR(st.st_mode):
        kind = ("fifo" if stat.S_ISFIFO(st.st_mode) else "char_device" if stat.S_ISCHR(st.st_mode)
                else "block_device" if stat.S_ISBLK(st.st_mode) else "socket" if stat.S_ISSOCK(st.st_mode)
                else "other")
        return _folder_problem(name, "rules_dir.not_folder", kind=f"rules_dir.kind.{kind}")
    if _is_system_folder(name):
        return _folder_problem(name, "rules_dir.system")
    try:
        code = _has_rule_files(name)
    except OSError as exc:
        return _folder_problem(name, "rules_dir.unreadable", reason=str(exc.strerror or exc))
    if code == "rules_dir.too_large":
        return _folder_problem(name, code, limit=f"{MAX_FOLDER_ENTRIES:,}")
    return _folder_problem(name, code) if code else None


def check_rule_folders(dirs: list[Path] | list[str] | None) -> None:
    """Raise :class:`RuleLoadError` with one :class:`RuleFolderProblem` for the first path of
    ``dirs`` that is not a rule folder (:func:`check_rule_folder`)."""
    for d in dirs or []:
        problem = check_rule_folder(d)
        if problem is not None:
            raise RuleLoadError([problem])


@dataclass
class RuleBase:
    rules: list[RuleSpec]
    files: list[Path]
    knowledge_hash: str
    # experta engines built for these rules whose run is over, reused by later runs in this
    # process (engine/runtime/compiler.py: acquire_engine); never part of the rule base's value
    engines: dict[tuple, list[Any]] = field(default_factory=dict, repr=False, compare=False)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "engines": {}}  # engines are this process's, never cached

    @cached_property
    def reporting(self) -> frozenset[str]:
        """Ids of the rules whose actions carry their rendered ``because`` (reject, warn, ask)."""
        return frozenset(r.id for r in self.rules if any(a.kind in REPORTING_ACTIONS for a in r.actions))

    def by_id(self, rule_id: str) -> RuleSpec:
        for r in self.rules:
            if r.id == rule_id or rule_id in r.aliases:
                return r
        raise KeyError(rule_id)


# texts only the command-line views read (the engine never does): not knowledge, not in its hash
DISPLAY_ONLY = frozenset(f"messages/{name}.yaml" for name in ("cli", "render", "values", "commands", "help", "fields"))


def knowledge_files(rule_paths: list[Path]) -> list[Path]:
    facts = sorted(p for p in FACTS_DIR.rglob("*") if p.suffix in (".yaml", ".json") and p.is_file()
                   and p.relative_to(FACTS_DIR).as_posix() not in DISPLAY_ONLY)
    return list(rule_paths) + facts


def compute_hash(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.name.encode())
        h.update(b"\0")
        h.update(p.read_bytes())
        h.update(b"\0")
    return "sha256:" + h.hexdigest()[:16]


def _read_rule_files(files: list[Path]) -> list[tuple[Any, Lines, list[Problem]]]:
    """Parsed, schema-checked rule files, from the rule cache (engine/common/rulecache.py) when it holds
    this exact set of file contents; stored there when every file is valid."""
    from servewise.engine.common import rulecache

    try:
        # only regular files of bounded size are read here: a FIFO or a link to /dev/zero would hang
        # (the ordinary path below reports them through yamlio.read_text)
        contents = [read_text(p).encode("utf-8") for p in files]
        key = rulecache.cache_key([("", False, c) for c in contents], SCHEMA_FILE.read_bytes())
    except (OSError, YamlError):
        key = None  # an unreadable or irregular file: report it the ordinary way
    if key is not None:
        cached = rulecache.read(key)
        if isinstance(cached, list) and len(cached) == len(files):
            return [(data, lines, []) for data, lines in cached]
    parsed = [_read_rule_file(p, _display(p)) for p in files]
    if key is not None and not any(probs for _, _, probs in parsed):
        rulecache.write(key, [(data, lines) for data, lines, _ in parsed])  # before compiling touches them
    return parsed


def load_rules(extra_dirs: list[Path] | None = None, builtin: bool = True,
               semantic: bool | None = None) -> RuleBase:
    """Load the built-in rules and any extra folders; raise :class:`RuleLoadError` on problems.

    ``semantic`` runs the semantic lint (engine/lang/rulelint.py) too; by default it runs whenever
    extra folders are loaded with the built-in rules (the built-in rules alone are linted by the
    tests; a rule set without them has no fact dictionary to check against)."""
    from servewise.engine.common import rulecache
    from servewise.engine.common.gctune import fewer_collections

    semantic = semantic if semantic is not None else (builtin and bool(extra_dirs))
    check_rule_folders(extra_dirs)  # before anything walks them (a FIFO, /dev/null, `/`, /etc)
    with fewer_collections():
        key = _compiled_key(extra_dirs, builtin, semantic)
        if key is not None:
            slot = (rulecache.cache_dir(), key)  # (a cache folder is a cache of its own)
            loaded = _LOADED.pop(slot, None)
            if loaded is not None:
                return _remember(slot, loaded)  # the most recently used last
            cached = rulecache.read(key, "compiled")
            if isinstance(cached, RuleBase):
                return _remember(slot, _relink(cached))
        rb = _load_rules(extra_dirs, builtin, semantic)
        if key is not None:
            _derive_properties(rb)
            rulecache.write(key, rb, "compiled")
            _remember(slot, rb)
        return rb


# The rule bases this process has loaded, by their key in the rule cache (the content of every
# file they were made from, so an edited file is a new key): a process that loads the same rules
# again (the interview's plans, `audit`, a library user, the tests) gets the same rule base, with
# the experta engines its earlier runs left to reuse, instead of reading the cache again. Only
# while caching is on (SERVEWISE_NO_CACHE loads afresh every time); the last few are kept.
_LOADED: dict[tuple[Path | None, str], RuleBase] = {}
_LOADED_KEEP = 3


def _remember(slot: tuple[Path | None, str], rb: RuleBase) -> RuleBase:
    _LOADED[slot] = rb
    while len(_LOADED) > _LOADED_KEEP:
        del _LOADED[next(iter(_LOADED))]
    return rb


def forget_loaded() -> None:
    """Forget the rule bases this process has loaded: the next load reads the rule cache."""
    _LOADED.clear()


def _builtin_rules() -> RuleBase | None:
    """The built-in rules alone, as :func:`load_rules` gives them (this process's memory or the
    rule cache), whose compiled rules a load with extra folders reuses instead of compiling the
    built-in files again; None while caching is off or when the built-in rules do not load (the
    ordinary load then reports their problems)."""
    from servewise.engine.common import rulecache

    if rulecache.cache_dir() is None:
        return None
    try:
        return load_rules(None, builtin=True, semantic=False)
    except RuleLoadError:
        return None


def _derive_properties(rb: RuleBase) -> None:
    """Compute the rules' derived properties that every run reads, so that the cached rule base
    carries them and a process does not derive them again."""
    rb.reporting  # noqa: B018 - cached_property: computed to be pickled with the rule base
    for spec in rb.rules:
        for name in ("let_map", "produces", "names", "template_names", "global_names", "item_names"):
            getattr(spec, name)


def _compiled_key(extra_dirs: list[Path] | None, builtin: bool, semantic: bool) -> str | None:
    """The key of the loaded rule base in the rule cache: every rule file (path, name shown, bytes),
    the folder names are shown relative to, every fact file, the rule schema, every engine
    module's source and the load options; None when a file cannot be read as a regular file (the
    ordinary load reports it)."""
    from servewise.engine.common import rulecache

    if rulecache.cache_dir() is None:
        return None
    dirs = ([RULES_DIR] if builtin else []) + [Path(d) for d in (extra_dirs or [])]
    try:
        if not all(Path(d).exists() for d in dirs):
            return None
        files = rule_files(dirs)
        if len(files) > MAX_RULE_FILES:
            return None
        parts = [f"cwd\0{Path.cwd()}\0{int(builtin)}\0{int(semantic)}".encode(), SCHEMA_FILE.read_bytes()]
        parts += rulecache.engine_sources()
        for p in files:
            parts.append(f"{p}\0{_display(p)}".encode())
            parts.append(read_text(p).encode("utf-8"))
        for p in knowledge_files([]):
            parts.append(p.relative_to(FACTS_DIR).as_posix().encode() + b"\0" + p.read_bytes())
    except (OSError, YamlError, ValueError):
        return None
    return rulecache.content_key("compiled", parts)


def iter_exprs(spec: RuleSpec):
    """Every compiled expression of a rule: lets, conditions, actions, explanation templates."""
    for _, e in spec.lets:
        yield e
    yield from spec.when
    for a in spec.actions:
        yield from a.exprs.values()
        for t in (a.spec.get("_templates") or {}).values():
            yield from (e for _, e in t.exprs)
    for t in spec.because.values():
        yield from (e for _, e in t.exprs)


def _relink(rb: RuleBase) -> RuleBase:
    """A rule base read from the cache: its expressions compile against the domain functions."""
    for spec in rb.rules:
        for e in iter_exprs(spec):
            e._registry = FUNCTIONS
    return rb


def _load_rules(extra_dirs: list[Path] | None, builtin: bool, semantic: bool) -> RuleBase:
    dirs = ([RULES_DIR] if builtin else []) + [Path(d) for d in (extra_dirs or [])]
    for d in dirs:
        if not Path(d).exists():
            raise RuleLoadError([Problem(str(d), 0, "-", "rules folder or file not found")])
    files = rule_files(dirs)
    if len(files) > MAX_RULE_FILES:
        raise RuleLoadError([Problem(str(dirs[-1]), 0, "-", f"too many rule files ({len(files)}, at most "
                                     f"{MAX_RULE_FILES} across all folders)")])
    rules: list[RuleSpec] = []
    problems: list[Problem] = []
    seen: dict[str, RuleSpec] = {}
    shipped = _builtin_rules() if builtin and extra_dirs else None
    if shipped is not None and files[:len(shipped.files)] == shipped.files:
        rules.extend(shipped.rules)  # the built-in files come first: compiled once, as loaded alone
        seen.update((r.id, r) for r in shipped.rules)
        files_read = files[len(shipped.files):]
    else:
        files_read = files
    for path, (data, lines, probs) in zip(files_read, _read_rule_files(files_read), strict=True):
        if not probs and data is not None:
            specs, probs = _rule_specs(path, data, lines, _display(path), len(rules))
        else:
            specs = []
        if len(rules) + len(specs) > MAX_RULES:
            raise RuleLoadError([Problem(_display(path), 0, "-", f"too many rules: more than {MAX_RULES} "
                                         "across all folders (split the knowledge or raise the limit)")])
        problems.extend(probs)
        for s in specs:
            if s.id in seen:
                other = seen[s.id]
                problems.append(Problem(s.file, s.line, s.id,
                                        f"duplicate rule id (first defined at {other.file}:{other.line})"))
                continue
            seen[s.id] = s
            rules.append(s)
    if problems:
        raise RuleLoadError(problems)
    for i, r in enumerate(rules):
        r.load_order = i
    rb = RuleBase(rules, files, compute_hash(knowledge_files(files)))
    if semantic:
        from servewise.engine.lang.rulelint import lint

        # the built-in rules' own checks are the tests' (`servewise rules lint`): rules added to
        # them only add facts, so they cannot make a built-in rule's name unknown or read too early
        added = {r.file for r in rules if not r.builtin} if builtin else None
        errors = [f.problem() for f in lint(rb, loading=True, files=added) if f.severity == "error"]
        if errors:
            raise RuleLoadError(errors)
    return rb
