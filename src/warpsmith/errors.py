"""The exceptions warpsmith raises (public name; defined in :mod:`warpsmith.core.errors`)."""
from .core.errors import (DatabaseError, GuardError, InvalidInputError, UnknownNameError, VerificationError,
                          WarpsmithError)

__all__ = ["WarpsmithError", "InvalidInputError", "UnknownNameError", "GuardError", "DatabaseError",
           "VerificationError"]
