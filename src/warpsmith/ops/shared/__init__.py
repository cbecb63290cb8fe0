"""What the families share: Triton helpers (:mod:`.kernel`, only ``@triton.jit`` code) and the
argument checks of the public ops (:mod:`.validate`)."""
