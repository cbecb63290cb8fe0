"""The ``warpsmith`` command."""
