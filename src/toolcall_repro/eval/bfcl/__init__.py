"""BFCL v4 on bfcl-eval: our Qwen handler (protocol prompt, backend, parser), bfcl's loaders and checkers.

Jobs: generate_bfcl, score_bfcl, summarise_bfcl (jobs.py; by hand `toolcall-repro stage`). Import order
matters: bfcl-eval reads BFCL_PROJECT_ROOT on first import, so set it before importing these modules.
"""
