"""Language selection and the few fixed strings of the command-line interface."""

from __future__ import annotations

import locale
import os
import re
import string
import unicodedata
from functools import lru_cache

STRINGS: dict[str, dict[str, str]] = {
    "configuration": {"en": "Configuration", "zh": "配置"},
    "packed_servers": {"en": "shared physical servers", "zh": "共用的物理服务器"},
    "layout": {"en": "Layout", "zh": "部署方式"},
    "launch": {"en": "Launch", "zh": "启动命令"},
    "power_mode_command": {"en": "Power mode", "zh": "功耗模式"},
    "launch_prefill": {"en": "Prefill", "zh": "预填充启动"},
    "launch_decode": {"en": "Decode", "zh": "解码启动"},
    "launch_router": {"en": "Router", "zh": "路由启动"},
    "performance": {"en": "Performance (estimated)", "zh": "性能（估算）"},
    "cost": {"en": "Cost", "zh": "成本"},
    "bom": {"en": "Bill of materials", "zh": "物料清单"},
    "charts": {"en": "Charts", "zh": "图表"},
    "warnings": {"en": "Warnings", "zh": "警告"},
    "reasons": {"en": "Key reasons", "zh": "主要理由"},
    "rejected": {"en": "Rejected alternatives", "zh": "被排除的方案"},
    "infeasible": {"en": "INFEASIBLE: no configuration meets this workload", "zh": "不可行：没有配置能满足该工作负载"},
    "defaults": {"en": "Defaults used", "zh": "使用的默认值"},
    "questions": {"en": "Open questions", "zh": "待确认的问题"},
    "more": {"en": "more: servewise plan … --format md, servewise explain PLAN.json COMPONENT",
             "zh": "更多：servewise plan … --format md，servewise explain PLAN.json 组件"},
    "not_applicable": {"en": "none", "zh": "无"},
    "notes": {"en": "Notes and corrections of the sources (--format md shows them)",
              "zh": "说明与原文更正（--format md 显示全文）"},
    "operations": {"en": "Operations and procurement", "zh": "运维与采购"},
    "inputs": {"en": "Inputs", "zh": "输入"},
    "chain": {"en": "Explanation chain", "zh": "解释链"},
    "ttft_line": {"en": "TTFT {stats}; target {target}", "zh": "TTFT {stats}；目标 {target}"},
    "tpot_line": {"en": "TPOT mean {mean} ms{band}; target {target}",
                  "zh": "TPOT 平均 {mean} 毫秒{band}；目标 {target}"},
    "p99_stat": {"en": "P99 {value} ms{band}", "zh": "P99 {value} 毫秒{band}"},
    "mean_stat": {"en": "mean {value} ms{band}", "zh": "平均 {value} 毫秒{band}"},
    "band_le": {"en": " (≤ {hi})", "zh": "（≤ {hi}）"},
    "ttft_target": {"en": "{stat} ≤ {target} ms, checked {checked} ms ({how}), margin {margin} %",
                    "zh": "{stat} ≤ {target} 毫秒，校验值 {checked} 毫秒（{how}），余量 {margin}%"},
    "ttft_how_p99": {"en": "the central P99, or the mean at its {edge} if larger",
                     "zh": "P99 中位估算，或平均值的{edge}（取较大者）"},
    "ttft_how_mean": {"en": "the mean at its {edge}", "zh": "平均值的{edge}"},
    "edge_p80": {"en": "p80 edge", "zh": "p80 上沿"},
    "edge_median": {"en": "central estimate", "zh": "中位估算"},
    "tpot_target": {"en": "≤ {target} ms, checked {checked} ms (the mean at its {edge}), margin {margin} %",
                    "zh": "≤ {target} 毫秒，校验值 {checked} 毫秒（平均值的{edge}），余量 {margin}%"},
    "no_target": {"en": "none", "zh": "无"},
    "mean_word": {"en": "mean", "zh": "平均"},
    "brief_models": {"en": "{n} models", "zh": "{n} 个模型"},
    "brief_sla": {"en": "TTFT {ttft}, TPOT {tpot}{targets}; meets SLA: {meets}",
                  "zh": "TTFT {ttft}，TPOT {tpot}{targets}；满足 SLA：{meets}"},
    "brief_targets": {"en": " (targets {ttft} / {tpot} ms)", "zh": "（目标 {ttft} / {tpot} 毫秒）"},
    "brief_sla_other": {"en": "meets SLA: {meets} (--full: the numbers)",
                        "zh": "满足 SLA：{meets}（--full 显示数值）"},
    "brief_warnings": {"en": "Warnings to decide on ({shown} of {total}; --full: all)",
                       "zh": "需要决定的警告（{total} 条中的 {shown} 条；--full 显示全部）"},
    "brief_defaults": {"en": "Defaults the choices rest on (give them in the workload, or servewise ask)",
                       "zh": "方案所依赖的默认值（可在工作负载文件中给出，或运行 servewise ask）"},
    "brief_alternatives": {"en": "Nearest alternatives ({total} rejected; servewise why-not PLAN.json OPTION)",
                           "zh": "最接近的备选（共排除 {total} 个；servewise why-not PLAN.json 选项）"},
    "brief_more": {"en": "--full: reasons, operations, bill of materials, every warning and alternative; "
                         "--format md|html: the report",
                   "zh": "--full：理由、运维、物料清单、全部警告与备选；--format md|html：报告"},
    "throughput_line": {"en": "{tokens} output tokens/s, {inflight} requests in flight; meets SLA: {meets}",
                        "zh": "每秒输出 {tokens} 个 Token，同时处理 {inflight} 个请求；满足 SLA：{meets}"},
    "yes": {"en": "yes", "zh": "是"},
    "no": {"en": "no", "zh": "否"},
    "sized_with": {"en": "with the measured profile of {profile}, the framework this plan serves with",
                   "zh": "按本方案所用服务框架 {profile} 的实测性能参数估算"},
    "sized_for": {"en": "with the measured profile of {profile}, standing in for {framework} "
                        "(no measured runs of its own)",
                  "zh": "按 {profile} 的实测性能参数估算，代替没有实测数据的 {framework}"},
}

COMPONENT_NAMES: dict[str, dict[str, str]] = {
    "gpu": {"en": "GPU", "zh": "GPU"}, "servers": {"en": "Servers", "zh": "服务器"},
    "cpu": {"en": "CPU", "zh": "CPU"}, "memory": {"en": "Memory", "zh": "内存"},
    "interconnect": {"en": "Interconnect", "zh": "卡间互联"},
    "network": {"en": "Network", "zh": "网络"}, "storage": {"en": "Storage", "zh": "存储"},
    "power": {"en": "Power", "zh": "电源"}, "cooling": {"en": "Cooling", "zh": "散热"},
    "rack": {"en": "Rack", "zh": "机柜"}, "software": {"en": "Software", "zh": "软件"},
    "isolation": {"en": "Isolation", "zh": "隔离"}, "monitoring": {"en": "Monitoring", "zh": "监控"},
    "loadtest": {"en": "Load test", "zh": "压测"}, "procurement": {"en": "Procurement", "zh": "采购"},
    "availability": {"en": "Availability", "zh": "可用性"}, "edge": {"en": "Edge", "zh": "边缘"},
}


def default_lang() -> str:
    """zh for a zh_* locale, else en."""
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(var)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    try:
        loc = locale.getlocale()[0] or ""
    except ValueError:
        loc = ""
    return "zh" if loc.lower().startswith("zh") else "en"


def t(key: str, lang: str) -> str:
    return STRINGS[key].get(lang, STRINGS[key]["en"])


def pick(texts: dict[str, str] | str | None, lang: str) -> str:
    if texts is None:
        return ""
    if isinstance(texts, str):
        return texts
    return texts.get(lang) or texts.get("en") or ""


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal: wide and full-width characters (CJK) count two."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in text)


def pad(text: str, width: int) -> str:
    """``text`` left-aligned in ``width`` display columns (``f"{text:<13}"`` counts characters)."""
    return text + " " * max(0, width - display_width(text))


def unit_text(unit: str, lang: str) -> str:
    """A unit of facts/inputs.yaml or the fact dictionary as the reader reads it (``unit.*`` of
    facts/messages/commands.yaml; the unit itself when it has no entry: ms, GB, kW …)."""
    from servewise.engine.common.messages import catalog, message

    return message(f"unit.{unit}", lang) if f"unit.{unit}" in catalog() else unit


def msg(code: str, lang: str, **args: object) -> str:
    """A sentence of the plan views from the message catalog (facts/messages/render.yaml)."""
    from servewise.engine.common.messages import message

    return message(code, lang, **args)


@lru_cache(maxsize=1)
def _glossary() -> list[tuple[re.Pattern[str], str, bool, str]]:
    """The ``value.*`` messages (facts/messages/values.yaml) as (pattern, Chinese, is a phrase),
    longest first; a ``{x}`` placeholder matches a number or an id, ``{x_name}`` a name (up to a
    separator), ``{x_num}`` a number with thousands separators, ``{x_text}`` any text up to the
    literal that follows it; ``value.phrase.*`` entries count as phrases however short. Each entry
    carries its longest literal part: a text without it cannot match (checked before the regex)."""
    from servewise.engine.common.messages import catalog

    entries = sorted(((t["en"], t["zh"], code.startswith("value.phrase.")) for code, t in catalog().items()
                      if code.startswith("value.")), key=lambda e: -len(e[0]))
    out = []
    for en, zh, always in entries:
        pattern = "".join(re.escape(lit) + ("" if not field else rf"(?P<{field}>.+?)" if field.endswith("_text")
                                            else rf"(?P<{field}>[^;,，；()]+)" if field.endswith("_name")
                                            else rf"(?P<{field}>[\d,.]+)" if field.endswith("_num")
                                            else rf"(?P<{field}>[\w.+\-/]+)")
                          for lit, field, _, _ in string.Formatter().parse(en))
        lead = r"(?<![\w\-])" if en[:1].isalnum() else ""
        tail = r"(?![\w\-])" if en[-1:].isalnum() or en.endswith("}") else ""
        needle = max((lit for lit, _, _, _ in string.Formatter().parse(en)), key=len, default="")
        out.append((re.compile(lead + pattern + tail), zh, always or len(en.split()) >= 3, needle))
    return out


def value_text(text: object, lang: str, phrases_only: bool = False) -> str:
    """A catalog or rule value as shown in ``lang``: in Chinese every phrase of the value glossary
    replaced (names, numbers and ids stay as they are); ``phrases_only`` (for explanations, where
    a short word may be an identifier) replaces only phrases of three words or more."""
    text = str(text)
    if lang != "zh":
        return text
    for pattern, zh, phrase, needle in _glossary():
        if (phrases_only and not phrase) or needle not in text:
            continue
        if pattern.search(text):
            text = pattern.sub(lambda m, zh=zh: zh.format(**m.groupdict()), text)
    return text
