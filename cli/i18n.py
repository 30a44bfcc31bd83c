"""Language selection and the few fixed strings of the command-line interface."""

from __future__ import annotations

import locale
import os
import unicodedata

STRINGS: dict[str, dict[str, str]] = {
    "configuration": {"en": "Configuration", "zh": "配置"},
    "packed_servers": {"en": "shared physical servers", "zh": "共用的物理服务器"},
    "layout": {"en": "Layout", "zh": "部署方式"},
    "performance": {"en": "Performance (estimated)", "zh": "性能（估算）"},
    "cost": {"en": "Cost", "zh": "成本"},
    "bom": {"en": "Bill of materials", "zh": "物料清单"},
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
