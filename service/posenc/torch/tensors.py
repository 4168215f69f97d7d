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
from ..encodings.rope import ARRANGEMENTS as ARRANGEMENTS_BY_NAME
from ..errors import PosencError

#: torch dtype -> posenc output dtype name (the dtypes posenc casts to exactly, once).
TORCH_DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
                torch.bfloat16: "bfloat16"}
#: How a rotary module hands cos/sin to attention: the arrangements of posenc.encodings.rope.ARRANGEMENTS
#: (shared with posenc.rope_cos_sin and POST /v1/rope/cos_sin) that fill head_dim, "cat" and "interleave",
#: and COMPLEX: one complex tensor [..., n, n_freq], cos + i*sin, in place of a (cos, sin) pair (Llama-4's
#: `freqs_cis`, which its attention multiplies with the query's interleaved pairs viewed as complex numbers).
COMPLEX = "complex"
ARRANGEMENTS = tuple(name for name, per_freq in ARRANGEMENTS_BY_NAME.items() if per_freq == 2) + (COMPLEX,)


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


def complex_parts(dtype) -> torch.dtype:
    """The real dtype of COMPLEX's parts for a module called with `x` of `dtype`: Llama-4 forms its
    angles in float32 whatever x is (complex64), and a float64 model gets complex128."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def cos_sin(positions, spec, *, device=None, dtype=torch.float32, arrangement="cat", seq_len=None):
    """(cos, sin) for `positions` of any shape [..., n]: tensors [..., n, 2*n_freq] on `device`.

    `arrangement` (posenc.encodings.rope.ARRANGEMENTS, as posenc.rope_cos_sin takes it): "cat" gives
    the duplicated halves transformers' rotary modules return (`torch.cat((freqs, freqs), -1)`),
    "interleave" gives `repeat_interleave(freqs, 2)` (Cohere), "freq" one column per frequency
    ([..., n, n_freq]). The attention factor is applied, as in the reference. Values are formed in
    float64 and cast once to `dtype`; on the CPU the tensors share memory with the arrays posenc computed.
    """
    name = posenc_dtype(dtype)
    pos = positions_array(positions)
    cos, sin = api.rope_cos_sin(pos.reshape(-1), spec, seq_len=seq_len, dtype=name, arrangement=arrangement)
    shape = pos.shape + cos.shape[-1:]
    return to_torch(cos.reshape(shape), device), to_torch(sin.reshape(shape), device)


def alibi_bias(n_heads, q_len, k_len=None, *, device=None, dtype=torch.float32, **kwargs) -> torch.Tensor:
    """`posenc.alibi_bias` as a tensor [n_heads, q_len, k_len] (an additive attention mask for
    BLOOM / MPT / Falcon-style models), cast once to `dtype`."""
    bias = api.alibi_bias(n_heads, q_len, k_len, dtype=posenc_dtype(dtype), **kwargs)
    return to_torch(bias, device)
