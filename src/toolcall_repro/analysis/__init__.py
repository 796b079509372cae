"""Tables, figures and the speedup at matched accuracy, built from a run's result files.

speedup.py (the matched-accuracy definition), runstats.py and efficiency.py (training runs), tables.py
and tabular.py (evaluation tables), figures.py: pure. loaders.py and report.py: reading and writing.
Jobs: make_tables, make_figures, report_efficiency (jobs.py).
"""
