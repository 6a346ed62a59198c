"""The paper's sections, one module each, in document order; each sits beside its template block
report/templates/sections/<module>.html.j2 and builds that block's context (``context``: its
tables, numbered in document order, and sentences) and, where it shows figures, chooses and draws
them (``figures``).

    warnings           "Read this first", in the paper's head
    abstract           the abstract
    (introduction)     Section 1: text only, a template block without a module
    method             Section 2: what was measured, settings, the two environments, statistics
    results            Sections 3.1-3.6: pair by pair, every cell, batch size, tests, energy
    why                Section 3.7: the ablation, where the time goes, patel2023's explanation
    accuracy           Section 3.8: the real-data experiments' accuracy
    distributed        Section 3.9: beyond one device
    memory             Section 3.10: peak memory
    latency            Section 3.11: latency percentiles
    reproduction       Section 4: every published claim's verdict, each paper's figures
    threats            Section 5: threats to validity
    audit              Appendix A: the version audit
    failures           Appendix B: every trial that did not end ok
    hypothesis_tests   Appendix C: every hypothesis test
"""
