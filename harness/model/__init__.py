"""The leaf of the harness: what every other part speaks (rules and findings, outcomes, results, verdicts).
Imports nothing of the harness; everything above imports it."""
