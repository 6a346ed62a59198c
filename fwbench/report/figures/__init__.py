"""The report's figures: matplotlib (Agg, no pyplot) to deterministic SVG. Framework-free.

Each builder takes tidy tables, writes at most one SVG into a folder and returns a
``style.Figure``: either the file it wrote, or the sentence saying why the figure is left out.
The same tables give byte-identical SVG. One module per topic of the report:

- ``style``: what every figure shares (the SVG setup, colours, ``Figure``, ``missing``,
  ``outcome``, the pair axes);
- ``speed``: relative time, PyTorch's speed-up heatmap, throughput, time per sample against
  batch size;
- ``telemetry``: energy per sample and one trial's telemetry over time;
- ``flops``: achieved FLOP/s and the fraction of the device's peak;
- ``why``: the ablation's waterfall and where the time of a step goes;
- ``convergence``: the real-data experiments' epoch times, accuracy curves, confusion matrices;
- ``scaling``: throughput and scaling efficiency against the number of devices;
- ``usage``: peak memory against batch size and the latency distribution;
- ``papers``: the figures only the reproductions of the source papers show.
"""
