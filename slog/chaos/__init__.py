"""Fault injection for slog: a Jepsen-style harness (issue 10).

=================  ==============================================================
module             job
=================  ==============================================================
``history``        the events a run records (acks, reads, assignments, faults), JSON lines
``checker``        pure: a history in, anomalies and one verdict line out
``schedule``       pure: a seeded, reproducible list of fault operations
``cluster``        a local cluster of broker processes to hurt: kill, pause, restart, tmpfs
``nemesis``        carries out a schedule against a cluster, and heals it
``workload``       the verifiable producer and consumer (slog's own client)
``runner``         one run: warm-up, faults, heal, final reads, replica logs, verdict
=================  ==============================================================
"""
