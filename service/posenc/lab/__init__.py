"""posenc's lab: the extrapolation experiments the literature argues about (train short, test long),
run reproducibly on a CPU with every positional signal taken from posenc itself.

    posenc lab --budget smoke --out results.json      # or: posenc.lab.run.run_lab("smoke")

Tiny decoder-only Transformers learn two synthetic tasks (a Markov source: perplexity; a copy
task: token accuracy) at one length and are evaluated at up to 8 times it, for sinusoidal,
learned, RoPE (plain, and linear / NTK / dynamic / YaRN scaling at test time), ALiBi, RoPE+ALiBi
and no positional encoding; attention entropy is measured at every length. The modules: tasks
(data), schemes and signals (what each scheme is, and its posenc tensors), models, metrics, run
(training and evaluation), results (the JSON file), budgets (sizes), progress.

torch is an optional dependency (`posenc[torch]`): this package's modules import it, so only
`budgets` and `schemes` (plain data) are imported before `require_torch()` has checked it.
"""

from __future__ import annotations

from ..errors import PosencError

#: The extra that brings torch.
EXTRA = "posenc[torch]"


def require_torch() -> None:
    """PosencError naming the extra to install when torch cannot be imported."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise PosencError("torch", f"posenc lab trains models with torch, an optional dependency that is not "
                          f"installed ({exc}); install it with: pip install '{EXTRA}'") from None
