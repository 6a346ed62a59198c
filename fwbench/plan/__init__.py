"""Stage 1, plan: a validated config, its cells and trials, their paths and their run order."""
