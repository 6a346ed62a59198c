"""Stage 5, report: the paper, its sections, tables and figures, rendered to HTML and PDF. It
renders verdicts; it does not reach them."""
