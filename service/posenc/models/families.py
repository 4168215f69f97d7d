"""Imports every family module so each registers its reader (placeholder list, filled per family)."""

from . import generic  # noqa: F401
