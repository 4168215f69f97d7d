"""`LearnedSpec`: a learned absolute position table (GPT-2 `wpe`, OPT, BERT), which only the
checkpoint holds. The spec names the tensor and how positions map to its rows; the values are
read from a `.safetensors` / `.npy` file (or an upload) and published like any other table.

Position p is row `p + offset` of the tensor (OPT stores two padding rows first: offset 2).
`sha256` pins the exact values (hex digest of the float data as stored) once they are known,
so two different checkpoints never share a table identity.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..args import as_dim, as_int
from ..errors import PosencError
from ..limits import LIMITS
from .canonical import Canonical


@dataclass(frozen=True, init=False)
class LearnedSpec(Canonical):
    KIND = "learned"
    POSITIONAL = "num_positions"
    KEYWORDS = ("dim", "tensor", "offset", "sha256")

    num_positions: int  # positions 0..num_positions-1 exist
    dim: int
    tensor: str | None  # its name in the checkpoint (None: a bare array, e.g. .npy or an upload)
    offset: int
    sha256: str | None

    def __init__(self, num_positions, *, dim, tensor=None, offset=0, sha256=None):
        num_positions = as_int(num_positions, "num_positions", minimum=1, maximum=LIMITS.max_abs_position)
        dim = as_dim(dim, "dim")
        if tensor is not None and (not isinstance(tensor, str) or not tensor or len(tensor) > 512):
            raise PosencError("tensor", f"must be a non-empty tensor name, got {tensor!r}")
        offset = as_int(offset, "offset", minimum=0, maximum=LIMITS.max_abs_position)
        if sha256 is not None and (not isinstance(sha256, str) or len(sha256) != 64
                                   or any(c not in "0123456789abcdef" for c in sha256)):
            raise PosencError("sha256", "must be 64 lowercase hex digits")
        for name, value in (("num_positions", num_positions), ("dim", dim), ("tensor", tensor),
                            ("offset", offset), ("sha256", sha256)):
            object.__setattr__(self, name, value)

    @property
    def rows(self) -> int:
        """Rows the tensor has: offset padding rows, then one per position."""
        return self.offset + self.num_positions

    def to_dict(self) -> dict:
        return {"kind": self.KIND, "num_positions": self.num_positions, "dim": self.dim, "tensor": self.tensor,
                "offset": self.offset, "sha256": self.sha256}
