"""``slog dashboard``: a live Textual view of a cluster.

Data collection (``collect``), the cluster snapshot (``model``), rates
(``history``) and events (``events``) are plain modules without Textual, so
they are unit-tested alone; ``app``, ``screens`` and ``widgets`` only render.
"""
