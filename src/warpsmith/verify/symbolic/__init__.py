"""Symbolic proofs for Triton kernels: trace with symbolic program ids, sizes and lanes; discharge
memory-safety, race-freedom, coverage and split-coverage obligations with z3."""
from .contract import LaunchContract, Split, Tensor, Witness, Writer, cdiv, sizes
from .prove import OBLIGATIONS, Obligation, ProofReport, prove

__all__ = ["LaunchContract", "Split", "Tensor", "Witness", "Writer", "cdiv", "sizes", "OBLIGATIONS", "Obligation",
           "ProofReport", "prove"]
