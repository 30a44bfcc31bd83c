"""Performance-model development tools, not shipped in the wheel: the fit of facts/calibration.yaml
(`python -m tools.perf.fit`) and the accuracy report docs/accuracy.md (`python -m tools.perf.report`)."""
