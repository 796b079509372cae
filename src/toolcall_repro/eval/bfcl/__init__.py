"""BFCL v4 on bfcl-eval: our Qwen handler (protocol prompt, backend, parser), bfcl's loaders and checkers.

CLI: `python -m toolcall_repro.eval.bfcl {generate,score,run,summarise}` (see __main__.py). Import order
matters: bfcl-eval reads BFCL_PROJECT_ROOT on first import, so set it before importing these modules.
"""
