"""Consumer groups: Kafka's group coordinator and the ``__consumer_offsets`` topic.

========================  ================================================================
module                    job
========================  ================================================================
``placement``             which ``__consumer_offsets`` partition holds a group (Kafka's hash)
``member``                a member, the JoinGroup/SyncGroup results, the error names
``group``                 a group's state machine and bookkeeping (pure)
``offsets``               a group's committed offsets (pure)
``records``               the ``__consumer_offsets`` key/value formats, byte-compatible with Kafka
``manager``               the group cache: load/unload partitions, append records
``coordinator``           the protocol rules: join, sync, heartbeat, leave, commit, admin
``consumer_group``        a KIP-848 consumer-protocol group's state machine (pure)
``server_assignors``      KIP-848's broker-side assignors, uniform and range (pure)
``consumer_records``      the consumer groups' ``__consumer_offsets`` records (Kafka's)
``consumer_coordinator``  KIP-848 heartbeats, persistence, expiry on the same manager
``consumer_view``         a consumer group in DescribeGroups' classic shape
========================  ================================================================

Layering: this package uses ``slog.core`` only. The broker hands the manager an
:class:`~slog.groups.manager.OffsetsLog` over its ``__consumer_offsets`` replicas.
"""
