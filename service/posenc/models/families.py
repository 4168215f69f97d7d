"""Imports every family module so each registers its reader."""

from . import cohere, deepseek, falcon, gemma, generic, glm, llama, modernbert, neox, olmo, phi, qwen  # noqa: F401
