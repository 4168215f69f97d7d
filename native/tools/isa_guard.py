"""Static guard: no code a CPU might lack runs outside the paths dispatch chooses.

libposenc and the native programs must load and run on any x86-64 CPU. Code compiled for
AVX, AVX2 or AVX-512 is safe only where it is reached after a CPU check: the kernel tables
dispatch.c hands out, the JSON writer json_f32.c picks, the checksum kernels posenc_shm.h picks.
This guard disassembles each binary (binutils' objdump and readelf) and fails when

- a function outside those places holds an AVX-class instruction: any VEX or EVEX vector
  instruction (`v...` mnemonics on xmm/ymm/zmm), a register only AVX-512 has (zmm, xmm16-31,
  the k masks), or a VEX-encoded BMI instruction (andn, shlx, ...);
- a function run at load (an .init_array entry) or any function it calls holds one, wherever
  it lives (a constructor in an ISA file runs before dispatch: the bug this guard was made for).

"Those places" are the ISA translation units (ISA_UNITS: every function the linker lists under
their FILE symbol) and functions whose name ends in an ISA suffix (ISA_SUFFIXES: the hidden
entry points of those units, which the linker lists apart, and the target-attributed helpers
of posenc_shm.h). A new ISA-specific function must live in one of them or take such a name.

    python native/tools/isa_guard.py BINARY...   (exit 1 with the offending functions named)
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ISA_UNITS = frozenset({"kernels_avx2.c", "kernels_avx512.c", "json_f32_avx2.c", "json_f32_avx512.c"})
ISA_SUFFIXES = ("_avx2", "_avx512", "_vpclmul")
# VEX-encoded general-purpose instructions (BMI1/BMI2): they fault on CPUs without AVX-era VEX decoding.
VEX_GPR = frozenset({"andn", "bextr", "blsi", "blsmsk", "blsr", "bzhi", "mulx", "pdep", "pext", "rorx", "sarx",
                     "shlx", "shrx"})
# Mnemonics starting with 'v' that are not vector instructions (virtualisation, segment checks).
NOT_VECTOR = frozenset({"verr", "verw", "vmcall", "vmlaunch", "vmresume", "vmxoff", "vmxon", "vmread", "vmwrite",
                        "vmptrld", "vmptrst", "vmclear", "vmfunc", "vmrun", "vmload", "vmsave", "vmmcall"})
AVX_REGISTER = re.compile(r"%(?:[yz]mm\d+|xmm(?:1[6-9]|2\d|3[01])|k[0-7])\b")
FUNCTION = re.compile(r"^([0-9a-f]+) <(.+)>:$")
INSTRUCTION = re.compile(r"^\s+[0-9a-f]+:\s+(\S+)\s*(.*)$")
CALL = re.compile(r"\b(?:call|jmp)\s+[0-9a-f]+ <([^>+]+)>")


@dataclass
class Function:
    name: str
    address: int
    unit: str | None = None        # the FILE symbol it is listed under, None when the linker lists it apart
    avx: list[str] = field(default_factory=list)   # its AVX-class instructions (first few)
    calls: set[str] = field(default_factory=set)

    @property
    def isa_specific(self) -> bool:
        base = self.name.split(".")[0]  # GCC clones: foo.constprop.0, foo.part.0
        return self.unit in ISA_UNITS or base.endswith(ISA_SUFFIXES)


def is_avx(mnemonic: str, operands: str) -> bool:
    """Whether one AT&T-syntax instruction needs AVX, AVX-512 or VEX-encoded BMI."""
    mnemonic = mnemonic.split(".")[0].split("{")[0]
    if mnemonic.startswith("v") and mnemonic not in NOT_VECTOR:
        return True
    return mnemonic in VEX_GPR or bool(AVX_REGISTER.search(operands))


def run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def units_of(binary: Path) -> dict[int, str | None]:
    """Function address -> the FILE symbol the static symbol table lists it under."""
    units: dict[int, str | None] = {}
    current: str | None = None
    in_symtab = False
    for line in run("readelf", "-sW", str(binary)).splitlines():
        if line.startswith("Symbol table"):
            in_symtab = "'.symtab'" in line
            current = None
            continue
        parts = line.split()
        if not in_symtab or len(parts) < 8 or not parts[0].rstrip(":").isdigit():
            continue
        kind, bind = parts[3], parts[4]
        if kind == "FILE":
            current = parts[7] if len(parts) > 7 else None
        elif kind == "FUNC" and parts[6] != "UND":
            units.setdefault(int(parts[1], 16), current if bind == "LOCAL" else None)
    return units


def init_array(binary: Path) -> list[int]:
    """The addresses in .init_array (run at load, before any of the library's own code)."""
    words = []
    for line in run("readelf", "-x", ".init_array", str(binary)).splitlines():
        match = re.match(r"\s+0x[0-9a-f]+ ((?:[0-9a-f]{8} ?){1,4})", line)
        if match:
            words += match.group(1).split()
    data = bytes.fromhex("".join(words))
    return [int.from_bytes(data[i:i + 8], "little") for i in range(0, len(data) - 7, 8)]


def functions_of(binary: Path) -> dict[str, Function]:
    """Every function objdump shows, with its AVX-class instructions and direct callees."""
    units = units_of(binary)
    functions: dict[str, Function] = {}
    current: Function | None = None
    for line in run("objdump", "-d", "--no-show-raw-insn", "-w", str(binary)).splitlines():
        header = FUNCTION.match(line)
        if header:
            address = int(header.group(1), 16)
            name = header.group(2)
            current = functions.setdefault(f"{name}@{address:x}", Function(name, address, units.get(address)))
            continue
        instruction = INSTRUCTION.match(line)
        if current is None or not instruction:
            continue
        mnemonic, operands = instruction.group(1), instruction.group(2)
        if is_avx(mnemonic, operands) and len(current.avx) < 3:
            current.avx.append(f"{mnemonic} {operands}".strip())
        callee = CALL.search(line)
        if callee:
            current.calls.add(callee.group(1))
    return functions


def violations(binary: Path) -> list[str]:
    """What in `binary` breaks the rule, one line each (empty when it holds)."""
    functions = functions_of(binary)
    by_name: dict[str, list[Function]] = {}
    by_address = {f.address: f for f in functions.values()}
    for f in functions.values():
        by_name.setdefault(f.name, []).append(f)
    found = [f"{binary.name}: {f.name} (in {f.unit or 'no listed file'}) is not an ISA-specific kernel but holds "
             f"AVX-class instructions: {'; '.join(f.avx)}"
             for f in functions.values() if f.avx and not f.isa_specific]
    # everything reachable by direct calls from the load-time constructors
    seen: set[int] = set()
    todo = [(by_address[a], by_address[a].name) for a in init_array(binary) if a in by_address]
    while todo:
        f, chain = todo.pop()
        if f.address in seen:
            continue
        seen.add(f.address)
        if f.avx:
            found.append(f"{binary.name}: {chain} runs at load (.init_array) and holds AVX-class instructions: "
                         f"{'; '.join(f.avx)}")
        for callee in f.calls:
            for g in by_name.get(callee.split("@")[0], []):
                todo.append((g, f"{chain} -> {g.name}"))
    return found


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    problems = [line for path in argv for line in violations(Path(path))]
    for line in problems:
        print(line)
    if not problems:
        print(f"isa_guard: {len(argv)} binaries clean")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
