"""kserve-vllm-runbooks helper library.

Data flows one way: sources -> gather -> checks -> findings -> ranking -> render.
The public entry point is :func:`nbhelpers.triage.run`.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
