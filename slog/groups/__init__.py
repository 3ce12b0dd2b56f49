"""Consumer groups: Kafka's group coordinator and the ``__consumer_offsets`` topic.

=================  ================================================================
module             job
=================  ================================================================
``placement``      which ``__consumer_offsets`` partition holds a group (Kafka's hash)
``member``         a member, the JoinGroup/SyncGroup results, the error names
``group``          a group's state machine and bookkeeping (pure)
``offsets``        a group's committed offsets (pure)
``records``        the ``__consumer_offsets`` key/value formats, byte-compatible with Kafka
``manager``        the group cache: load/unload partitions, append records
``coordinator``    the protocol rules: join, sync, heartbeat, leave, commit, admin
=================  ================================================================

Layering: this package uses ``slog.core`` only. The broker hands the manager an
:class:`~slog.groups.manager.OffsetsLog` over its ``__consumer_offsets`` replicas.
"""
