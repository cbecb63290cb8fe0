"""warpsmith: search-based GPU kernel compiler with verified results."""
__version__ = "0.1.0"


def patch(model, **options):
    """Run a Llama-family Hugging Face model's memory-bound layers on warpsmith's kernels
    (see :func:`warpsmith.patching.patch`)."""
    from .patching import patch as _patch

    return _patch(model, **options)
