"""posenc values as torch tensors: formed in float64 by posenc, cast once, then handed to torch.

The cast happens in numpy (posenc's own single rounding from float64, bfloat16 included) and
torch receives the finished bytes with `torch.from_numpy` (a bfloat16 array travels as its
uint16 bit pattern and is reinterpreted), so torch never rounds anything a second time.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import api
from ..dtypes import output_dtype
from ..errors import PosencError

#: torch dtype -> posenc output dtype name (the dtypes posenc casts to exactly, once).
TORCH_DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
                torch.bfloat16: "bfloat16"}
#: How a rotary module hands cos/sin to attention: "cat" = [c_0..c_{n-1}, c_0..c_{n-1}] (Llama and
#: most models), "interleave" = [c_0, c_0, c_1, c_1, ...] (Cohere). Not the same as the apply layout:
#: GLM's module returns "cat" and its apply_rotary_pos_emb interleaves.
ARRANGEMENTS = ("cat", "interleave")


def posenc_dtype(dtype) -> str:
    """The posenc dtype name for a torch (or numpy, or named) dtype; PosencError otherwise."""
    if isinstance(dtype, torch.dtype):
        if dtype not in TORCH_DTYPES:
            raise PosencError("dtype", f"unsupported torch dtype {dtype}; choose one of "
                              f"{[str(d) for d in TORCH_DTYPES]}")
        return TORCH_DTYPES[dtype]
    return output_dtype(dtype).name


def to_torch(array: np.ndarray, device=None) -> torch.Tensor:
    """A tensor over the numpy array's memory (no copy on the CPU); bfloat16 by bit pattern."""
    array = np.ascontiguousarray(array)
    if array.dtype.name == "bfloat16":
        tensor = torch.from_numpy(array.view(np.uint16)).view(torch.bfloat16)
    else:
        tensor = torch.from_numpy(array)
    return tensor if device is None else tensor.to(device)


def positions_array(positions) -> np.ndarray:
    """Positions (a tensor of any shape, a list, an array) as a float64 numpy array."""
    if isinstance(positions, torch.Tensor):
        if positions.is_complex() or positions.dtype == torch.bool:
            raise PosencError("positions", f"must be real numbers, got a {positions.dtype} tensor")
        positions = positions.detach().to("cpu", torch.float64).numpy()
    return np.asarray(positions, dtype=np.float64) if not isinstance(positions, np.ndarray) else positions


def arrange(half: np.ndarray, arrangement: str) -> np.ndarray:
    """[..., n_freq] -> [..., 2*n_freq] the way a rotary module lays out its cache."""
    if arrangement == "cat":
        return np.concatenate([half, half], axis=-1)
    if arrangement == "interleave":
        return np.repeat(half, 2, axis=-1)
    raise PosencError("arrangement", f"must be one of {list(ARRANGEMENTS)}, got {arrangement!r}")


def cos_sin(positions, spec, *, device=None, dtype=torch.float32, arrangement="cat", seq_len=None):
    """(cos, sin) for `positions` of any shape [..., n]: tensors [..., n, 2*n_freq] on `device`.

    `arrangement` "cat" gives the duplicated halves transformers' rotary modules return
    (`torch.cat((freqs, freqs), -1)`), "interleave" gives `repeat_interleave(freqs, 2)` (Cohere).
    The attention factor is applied, as in the reference. Values are formed in float64 and cast
    once to `dtype`; on the CPU the tensors share memory with the arrays posenc computed.
    """
    name = posenc_dtype(dtype)
    pos = positions_array(positions)
    flat = pos.reshape(-1)
    cos, sin = api.rope_cos_sin(flat, spec, seq_len=seq_len, dtype=name)
    shape = pos.shape + (2 * cos.shape[-1],)
    return (to_torch(arrange(cos, arrangement).reshape(shape), device),
            to_torch(arrange(sin, arrangement).reshape(shape), device))


def alibi_bias(n_heads, q_len, k_len=None, *, device=None, dtype=torch.float32, **kwargs) -> torch.Tensor:
    """`posenc.alibi_bias` as a tensor [n_heads, q_len, k_len] (an additive attention mask for
    BLOOM / MPT / Falcon-style models), cast once to `dtype`."""
    bias = api.alibi_bias(n_heads, q_len, k_len, dtype=posenc_dtype(dtype), **kwargs)
    return to_torch(bias, device)
