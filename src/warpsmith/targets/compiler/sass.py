"""The machine code of a compiled NVIDIA kernel, counted: what the SM will execute, by class.

A cubin (Triton's ``asm["cubin"]``, from a real GPU or the compile-only driver) is disassembled with
the ``nvdisasm`` Triton ships (``triton/backends/nvidia/bin``, else one on ``PATH``) and each
function's instructions are counted by class (tensor-core MMA, FP32 FMA/ALU, integer, SFU,
conversions, global loads and stores with their widths, shared memory, local memory, barriers,
asynchronous copies, control), both over the whole program and inside loops. A loop is the address
range between a label and a backward branch to it (the one-instruction ``BRA`` to itself that
closes every function is padding, not a loop). Instructions guarded by ``@!PT`` never execute and
are counted apart (``predicated_off``); others under a predicate count as executed.

:func:`cubin_sass` is cached per cubin (its SHA-256) in memory; the per-config disk cache is
:class:`~.cache.CompilerFacts`'s (``sass=True``). AMD kernels have no SASS: ``None`` there.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

COUNTING_VERSION = 2  # part of the disk cache's key: raise it when the counting below changes

# instruction classes, by the mnemonic before its first '.' (the SASS of sm_80 .. sm_100)
TENSOR = {"HGMMA", "QGMMA", "IGMMA", "BGMMA", "HMMA", "IMMA", "DMMA", "BMMA", "QMMA", "OMMA",
          "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA"}
CLASSES: dict[str, frozenset[str]] = {
    "tensor": frozenset(TENSOR),
    "fp32": frozenset({"FFMA", "FMUL", "FADD", "FMNMX", "FSETP", "FSEL", "FSET", "FCHK", "FSWZADD", "FFMA2",
                       "FADD2", "FMUL2"}),
    "fp16x2": frozenset({"HFMA2", "HADD2", "HMUL2", "HMNMX2", "HSETP2", "HSET2"}),
    "fp64": frozenset({"DFMA", "DADD", "DMUL", "DSETP", "DMNMX"}),
    "int": frozenset({"IMAD", "IADD3", "IADD", "LOP3", "LOP", "SHF", "SHL", "SHR", "LEA", "ISETP", "IMNMX", "IABS",
                      "POPC", "FLO", "BREV", "PRMT", "BMSK", "SGXT", "IDP", "IDP4A", "VIADD", "VIMNMX", "IMUL",
                      "PLOP3", "P2R", "R2P", "SEL", "UIADD3", "UIMAD", "ULOP3", "USHF", "ULEA", "UISETP", "USEL",
                      "UPRMT", "UPLOP3", "USGXT", "UFLO", "UPOPC", "UBMSK", "UIMNMX"}),
    "sfu": frozenset({"MUFU"}),
    "move": frozenset({"MOV", "MOV32I", "S2R", "CS2R", "S2UR", "R2UR", "LDC", "ULDC", "UMOV", "SHFL"}),
    "convert": frozenset({"F2F", "F2I", "I2F", "F2FP", "I2FP", "F2IP", "FRND", "I2I", "I2IP"}),
    "global_load": frozenset({"LDG", "LD"}),
    "global_store": frozenset({"STG", "ST"}),
    "atomic": frozenset({"ATOMG", "ATOM", "RED", "REDG"}),
    "shared": frozenset({"LDS", "STS", "LDSM", "STSM", "ATOMS", "REDS"}),
    "local": frozenset({"LDL", "STL"}),
    "async_copy": frozenset({"LDGSTS", "LDGDEPBAR", "UTMALDG", "UTMASTG", "UTMAREDG", "UTMAPF", "UBLKCP", "UBLKRED",
                             "UBLKPF", "UTMACCTL", "UTMACMDFLUSH", "SYNCS", "UTCBAR", "UTCCP"}),
    "barrier": frozenset({"BAR", "MEMBAR", "DEPBAR", "WARPSYNC", "BSSY", "BSYNC", "ERRBAR", "CCTL", "FENCE",
                          "WARPGROUP", "ARRIVES", "NANOSLEEP", "YIELD"}),
    "control": frozenset({"BRA", "BRX", "JMP", "JMX", "EXIT", "CALL", "RET", "NOP", "BPT", "KILL", "ACQBULK",
                          "ELECT", "VOTE", "VOTEU", "MATCH", "REDUX"}),
}
_CLASS_OF = {op: name for name, ops in CLASSES.items() for op in ops}

_INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Za-z0-9_]+)*)\s*([^;]*);")
_LABEL = re.compile(r"^(\.L_x_\d+|[A-Za-z_$][\w$.]*):\s*$")
_TARGET = re.compile(r"`\(([^)]+)\)")
_SECTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
_MMA_SHAPE = re.compile(r"^\.(\d+x\d+x\d+|\d{4,5})")  # HGMMA.64x128x16, HMMA.16816, HMMA.1688


@dataclass
class Instruction:
    address: int
    opcode: str  # the mnemonic, e.g. "LDG"
    modifiers: str  # e.g. ".E.128"
    operands: str
    predicate: str  # "" | "@P0" | "@!PT" ...

    @property
    def full(self) -> str:
        return self.opcode + self.modifiers


def width_bits(insn: Instruction) -> int:
    """The access width of a memory instruction per thread, in bits (LDG.E.128 -> 128; LDG.E -> 32;
    LDG.E.U16 -> 16; LDSM.16.M88.4 -> 128 per thread, 4 8x8 matrices)."""
    mods = insn.modifiers.split(".")
    if insn.opcode in ("LDSM", "STSM"):
        n = next((int(m) for m in reversed(mods) if m in ("1", "2", "4")), 1)
        return 32 * n
    for m in mods:
        if m in ("64", "128", "256"):
            return int(m)
        if m in ("U8", "S8"):
            return 8
        if m in ("U16", "S16"):
            return 16
    return 32


@dataclass
class SassCounts:
    """One function's instructions, counted (warp-level instructions, as the program text has them).

    Attributes:
        name: the function (a Triton kernel's name).
        instructions: every instruction but padding NOPs after the last EXIT.
        classes: instructions per class (see ``CLASSES``; ``other`` for what no class names).
        loop_classes: the same, counting only instructions inside loops (one pass of every loop body).
        loops: loops found (backward branches).
        mma: tensor-core instructions by their full mnemonic (``HGMMA.64x128x16.F32.BF16``); in loops
            in ``loop_mma``.
        global_loads / global_stores: by width in bits (``{"128": 4}``); ``loop_global_loads`` likewise.
        async_loads: ``LDGSTS`` by width, and ``UTMALDG`` (TMA) under ``"tma"``.
        shared_bytes / loop_shared_bytes: shared-memory bytes one warp moves per pass (LDS/STS/LDSM and
            the shared side of LDGSTS), not counting tensor-core operand reads.
        global_bytes / loop_global_bytes: global bytes one warp moves per pass (LDG/STG/LDGSTS; TMA
            boxes are not in the instruction and are not counted).
        nested_loops: loops inside another loop (a persistent kernel's K loop inside its tile loop);
            ``nested_classes``, ``nested_mma``, ``nested_global_bytes`` and ``nested_shared_bytes`` count
            what lies inside those (``loop_*`` count everything inside any loop);
        loop_store_bytes: global bytes one warp stores per pass of an outer loop (inside a loop, not
            inside a nested one): a persistent kernel's tile epilogue.
        predicated_off: instructions under ``@!PT`` (never executed).
        predicated: instructions under any other predicate (executed where it holds).
        opcodes: the 12 most frequent full mnemonics.
    """

    name: str
    instructions: int = 0
    classes: dict[str, int] = field(default_factory=dict)
    loop_classes: dict[str, int] = field(default_factory=dict)
    loops: int = 0
    mma: dict[str, int] = field(default_factory=dict)
    loop_mma: dict[str, int] = field(default_factory=dict)
    global_loads: dict[str, int] = field(default_factory=dict)
    loop_global_loads: dict[str, int] = field(default_factory=dict)
    global_stores: dict[str, int] = field(default_factory=dict)
    async_loads: dict[str, int] = field(default_factory=dict)
    shared_bytes: int = 0
    loop_shared_bytes: int = 0
    global_bytes: int = 0
    loop_global_bytes: int = 0
    nested_loops: int = 0
    nested_classes: dict[str, int] = field(default_factory=dict)
    nested_mma: dict[str, int] = field(default_factory=dict)
    nested_global_bytes: int = 0
    nested_shared_bytes: int = 0
    loop_store_bytes: int = 0
    predicated_off: int = 0
    predicated: int = 0
    opcodes: dict[str, int] = field(default_factory=dict)

    def count(self, cls: str, loop: bool = False, nested: bool = False) -> int:
        return (self.nested_classes if nested else self.loop_classes if loop else self.classes).get(cls, 0)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> "SassCounts":
        return SassCounts(**d)


def parse_functions(sass: str) -> dict[str, tuple[list[Instruction], dict[str, int]]]:
    """Each function of an ``nvdisasm`` listing: its instructions and its labels' addresses."""
    out: dict[str, tuple[list[Instruction], dict[str, int]]] = {}
    insns: list[Instruction] = []
    labels: dict[str, int] = {}
    pending: list[str] = []
    for line in sass.splitlines():
        sec = _SECTION.match(line)
        if sec:
            insns, labels, pending = [], {}, []
            out[sec.group(1)] = (insns, labels)
            continue
        lab = _LABEL.match(line.strip())
        if lab:
            pending.append(lab.group(1))
            continue
        m = _INSN.search(line)
        if m and out:
            addr = int(m.group(1), 16)
            for name in pending:
                labels[name] = addr
            pending = []
            pred = (m.group(2) or "").strip()
            insns.append(Instruction(addr, m.group(3), m.group(4), m.group(5).strip(), pred))
    return out


def _loop_ranges(insns: list[Instruction], labels: dict[str, int]) -> list[tuple[int, int]]:
    ranges = []
    for i in insns:
        if i.opcode in ("BRA", "JMP") and not i.predicate.startswith("@!PT"):
            t = _TARGET.search(i.operands)
            start = labels.get(t.group(1)) if t else None
            if start is not None and start < i.address:  # a branch to itself is the end-of-function trap
                ranges.append((start, i.address))
    return ranges


def count_function(name: str, insns: list[Instruction], labels: dict[str, int]) -> SassCounts:
    """Count one function's instructions (see :class:`SassCounts`)."""
    loops = _loop_ranges(insns, labels)
    inner = [(a, b) for a, b in loops if any(x <= a and b <= y and (x, y) != (a, b) for x, y in loops)]
    last_exit = max((i.address for i in insns if i.opcode == "EXIT"), default=None)
    c = SassCounts(name, loops=len(loops), nested_loops=len(inner))
    classes: Counter[str] = Counter()
    loop_classes: Counter[str] = Counter()
    nested_classes: Counter[str] = Counter()
    opcodes: Counter[str] = Counter()
    for i in insns:
        if last_exit is not None and i.address > last_exit and i.opcode in ("NOP", "BRA"):
            continue  # padding and the trap after the last EXIT
        if i.predicate.startswith("@!PT"):
            c.predicated_off += 1
            continue
        c.predicated += bool(i.predicate)
        in_loop = any(a <= i.address <= b for a, b in loops)
        nested = any(a <= i.address <= b for a, b in inner)
        cls = _CLASS_OF.get(i.opcode, "other")
        c.instructions += 1
        classes[cls] += 1
        opcodes[i.full] += 1
        loop_classes[cls] += in_loop
        nested_classes[cls] += nested
        nbytes = width_bits(i) * 4  # 32 lanes x bits / 8
        if cls == "tensor":
            c.mma[i.full] = c.mma.get(i.full, 0) + 1
            if in_loop:
                c.loop_mma[i.full] = c.loop_mma.get(i.full, 0) + 1
            if nested:
                c.nested_mma[i.full] = c.nested_mma.get(i.full, 0) + 1
        elif i.opcode in ("LDG", "LD"):
            key = str(width_bits(i))
            c.global_loads[key] = c.global_loads.get(key, 0) + 1
            if in_loop:
                c.loop_global_loads[key] = c.loop_global_loads.get(key, 0) + 1
        elif i.opcode in ("STG", "ST"):
            key = str(width_bits(i))
            c.global_stores[key] = c.global_stores.get(key, 0) + 1
            c.loop_store_bytes += nbytes if in_loop and not nested else 0
        elif i.opcode == "LDGSTS":
            key = str(width_bits(i))
            c.async_loads[key] = c.async_loads.get(key, 0) + 1
        elif i.opcode == "UTMALDG":
            c.async_loads["tma"] = c.async_loads.get("tma", 0) + 1
        moved_global = i.opcode in ("LDG", "LD", "STG", "ST", "LDGSTS")
        moved_shared = cls == "shared" or i.opcode == "LDGSTS"
        for flag, g_attr, s_attr in ((True, "global_bytes", "shared_bytes"),
                                     (in_loop, "loop_global_bytes", "loop_shared_bytes"),
                                     (nested, "nested_global_bytes", "nested_shared_bytes")):
            if flag and moved_global:
                setattr(c, g_attr, getattr(c, g_attr) + nbytes)
            if flag and moved_shared:
                setattr(c, s_attr, getattr(c, s_attr) + nbytes)
    c.classes = dict(classes)
    c.loop_classes = {k: n for k, n in loop_classes.items() if n}
    c.nested_classes = {k: n for k, n in nested_classes.items() if n}
    c.opcodes = dict(opcodes.most_common(12))
    return c


def mma_flops(mnemonic: str, warps_per_group: int = 4) -> float:
    """FLOPs of one tensor-core instruction as one warp issues it: ``HGMMA.64x128x16`` is a warpgroup's
    (4 warps') 64x128x16 product, so a quarter per warp; ``HMMA.16816`` a warp's 16x8x16."""
    m = _MMA_SHAPE.match(mnemonic[mnemonic.index("."):]) if "." in mnemonic else None
    if m is None:
        return 0.0
    s = m.group(1)
    if "x" in s:
        mm, nn, kk = (int(x) for x in s.split("x"))
        per = 2.0 * mm * nn * kk
        return per / warps_per_group if "GMMA" in mnemonic else per
    mm, nn, kk = int(s[:2]), int(s[2]), int(s[3:])  # 16816 -> 16x8x16, 1688 -> 16x8x8
    return 2.0 * mm * nn * kk


@functools.lru_cache(maxsize=1)
def nvdisasm_path() -> str | None:
    """The ``nvdisasm`` Triton ships (``knobs.nvidia.nvdisasm``), else one on ``PATH``, else None."""
    try:
        from triton import knobs

        path = getattr(knobs.nvidia.nvdisasm, "path", None)
        if path and os.path.exists(path):
            return path
    except Exception:  # a Triton without the NVIDIA back end
        pass
    return shutil.which("nvdisasm")


def disassemble(cubin: bytes) -> str:
    """``nvdisasm -c`` of a cubin (raises RuntimeError where no nvdisasm is found)."""
    tool = nvdisasm_path()
    if tool is None:
        raise RuntimeError("nvdisasm was not found (Triton's backends/nvidia/bin, or PATH)")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "k.cubin"
        path.write_bytes(cubin)
        return subprocess.run([tool, "-c", str(path)], capture_output=True, text=True, timeout=120,
                              check=True).stdout


_cache: dict[str, tuple[SassCounts, ...]] = {}


def cubin_sass(cubin: bytes) -> tuple[SassCounts, ...]:
    """Every function of a cubin, counted (entry kernel first); cached per cubin in memory."""
    key = hashlib.sha256(cubin).hexdigest()
    if key not in _cache:
        funcs = parse_functions(disassemble(cubin))
        _cache[key] = tuple(count_function(n, ins, lab) for n, (ins, lab) in funcs.items())
    return _cache[key]


def kernel_sass(kernel: Any) -> SassCounts | None:
    """The entry function of a compiled Triton kernel, counted; None for a kernel with no cubin (AMD)."""
    cubin = getattr(kernel, "asm", {}).get("cubin")
    if not cubin:
        return None
    funcs = cubin_sass(cubin)
    name = getattr(kernel, "name", None) or getattr(getattr(kernel, "metadata", None), "name", None)
    return next((f for f in funcs if f.name == name), funcs[0] if funcs else None)
