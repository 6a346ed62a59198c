"""Stage 3, measure: one trial in a fresh process, its telemetry and its result file. Only
``measure.frameworks`` imports a framework."""
