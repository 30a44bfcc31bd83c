"""Speculative decoding in the step model: a draft proposes ``k`` tokens per step, the target
verifies ``k + 1`` positions of each sequence in one step (its weights and KV cache read once, its
compute and expert routing for ``k + 1`` tokens), and each step emits ``1 + accepted`` tokens.

With each draft token accepted with probability ``a`` given the ones before it, a step emits
``(1 - a^(k+1)) / (1 - a)`` tokens on average (Leviathan et al. 2023, "Fast Inference from
Transformers via Speculative Decoding", eq. 1). A multi-token-prediction (MTP) draft is one extra
layer of the model's own shape, run once per draft token (DeepSeek-V3 technical report §2.2).
The acceptance of a model family on a kind of traffic is a measured constant
(facts/calibration.yaml ``speculative``, with the runs it was fitted on); a model without one gets
no speculation unless its rate is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Speculation:
    tokens: int                # draft tokens proposed per step (k)
    acceptance: float          # probability a draft token is accepted, given the ones before it
    draft_layers: float = 1.0  # layers of the target's size the draft runs per draft token
    source: str = ""           # where the acceptance comes from

    def __post_init__(self) -> None:
        if not 1 <= int(self.tokens) <= 16:
            raise ValueError(f"speculative tokens {self.tokens}: expected 1 to 16")
        if not 0.0 <= float(self.acceptance) <= 1.0:
            raise ValueError(f"speculative acceptance {self.acceptance}: expected 0 to 1")

    @property
    def tokens_per_step(self) -> float:
        """Tokens a step emits on average: 1 + the expected accepted prefix of the draft."""
        k, a = int(self.tokens), float(self.acceptance)
        return float(k + 1) if a >= 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)


def acceptance_for(model: dict[str, Any], calibration: dict[str, Any]) -> tuple[float, str] | None:
    """The fitted acceptance of the model's family (facts/calibration.yaml ``speculative``) and
    what it was fitted on; None for a family without one."""
    fam = ((calibration.get("speculative") or {}).get("families") or {}).get(str(model.get("family")))
    if not fam or fam.get("acceptance") is None:
        return None
    return float(fam["acceptance"]), str(fam.get("fitted_on") or "facts/calibration.yaml")


def speculation(model: dict[str, Any], tokens: int, acceptance: float | None,
                calibration: dict[str, Any]) -> Speculation:
    """Speculation of ``tokens`` draft tokens with the given acceptance, or the family's fitted one;
    a model without a draft head and no acceptance given, or no acceptance known, is an error."""
    source = "given"
    if acceptance is None:
        fitted = acceptance_for(model, calibration)
        if fitted is None:
            raise ValueError(f"{model.get('id', 'model')}: no measured speculative acceptance for "
                             f"family {model.get('family')!r}; give one (e.g. --acceptance 0.7)")
        acceptance, source = fitted
    return Speculation(int(tokens), float(acceptance), float(model.get("mtp_layers") or 1), source)
