"""posenc for torch and transformers (install `posenc[torch]`; the core package never imports torch).

    import posenc.torch
    posenc.torch.patch_model(model)     # every rotary module of a loaded transformers model -> exact

`cos_sin` gives exact cos/sin tensors in the layout rotary modules return, `ExactRotaryEmbedding`
is the drop-in module, `alibi_bias` the exact ALiBi bias as a tensor for BLOOM/MPT/Falcon masks.
"""

try:
    import torch  # noqa: F401  (every module below needs it)
except ModuleNotFoundError as exc:
    raise ModuleNotFoundError("posenc.torch needs torch, which posenc does not install by itself: "
                              "pip install 'posenc[torch]' (or a torch build for your CUDA from pytorch.org)",
                              name=exc.name) from None

from .cache import CosSinCache
from .patch import PatchReport, patch_model
from .rotary import ExactRotaryEmbedding
from .tensors import alibi_bias, cos_sin

__all__ = ["CosSinCache", "ExactRotaryEmbedding", "PatchReport", "alibi_bias", "cos_sin", "patch_model"]
