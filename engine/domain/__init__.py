"""The domain: the sourced catalog, the pure functions rules call (fn_*), and the performance model
(perf/). Knows nothing of rules, plans, prompts or languages.
"""
