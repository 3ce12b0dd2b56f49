"""Fault injection for slog: a Jepsen-style harness (issue 10).

=================  ==============================================================
module             job
=================  ==============================================================
``history``        the events a run records (acks, reads, assignments, faults), JSON lines
``checker``        pure: a history in, anomalies and one verdict line out
``schedule``       pure: a seeded, reproducible list of fault operations
``cluster``        a local cluster of broker processes to hurt: kill, pause, restart, tmpfs
``nemesis``        carries out a schedule against a cluster, and heals it
``worker``         the workloads' shared client thread and polling reader
``workload``       the verifiable producer and consumer (slog's own client)
``txn_workload``   the read-process-write pipeline and its read_committed verifier
``runner``         one run: warm-up, faults, heal, final reads, replica logs, verdict
=================  ==============================================================
"""
