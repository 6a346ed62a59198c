"""Stage 4, analysis: the tidy tables, the statistics, and the verdicts on the papers' claims.
Framework-free; reads result files and tables, never the report."""
