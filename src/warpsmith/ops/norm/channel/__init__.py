"""Channel normalizations (``batch_norm``, ``group_norm`` and their backwards; ``instance_norm`` is a
group norm): spec.py, kernel.py, variant.py, launch contracts contract.py, the public functions and
autograd op.py."""
