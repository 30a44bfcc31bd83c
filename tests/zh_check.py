"""English left in Chinese output: a line holding a run of three or more plain English words
(lower-case letters only, so that names such as "Dell PowerEdge R760", rule ids such as
``cooling.air-as-shipped``, flags and numbers do not count), outside command lines and URLs."""

from __future__ import annotations

import re

RUN = 3
_WORD = re.compile(r"^[(\[“\"']?[a-z]{2,}(?:'s)?[)\]”\"',;:.!?]*$")
# tokens that are identifiers even though they look like words (tools, units, settings)
ALLOWED_WORDS = {"vllm", "bench", "serve", "openai", "sglang", "trtllm", "lmdeploy", "kv", "fp8", "int8",
                 "tp", "ep", "dp", "pp", "gb", "tb", "ms", "none", "true", "false"}
_COMMAND = re.compile(r"(^|\s)(--[a-z]|python3? -m|servewise \S+ .*--|vllm serve|sglang|https?://|docker |"
                      r"trtllm-serve|mindieservice)")


def english_runs(text: str, allowed: tuple[str, ...] = ()) -> list[str]:
    """The lines of ``text`` with ``RUN`` or more consecutive plain English words."""
    bad = []
    for line in text.splitlines():
        if _COMMAND.search(line) or any(a in line for a in allowed):
            continue
        run = 0
        for token in line.split():
            run = run + 1 if _WORD.match(token) and token.strip("()[]“”\"',;:.!?") not in ALLOWED_WORDS else 0
            if run >= RUN:
                bad.append(line.strip())
                break
    return bad
