'use strict'
// What the admin client says about consumer groups: listGroups, describeGroups, and each
// group's committed offsets (fetchOffsets) for `topics`; one JSON line per call.
const { args, emit, kafka, run } = require('./common')

const { groupIds, topics } = args

run(async () => {
  const admin = kafka('kafkajs-admin-groups').admin()
  await admin.connect()
  const listed = await admin.listGroups()
  emit({ step: 'list', groups: listed.groups.filter((g) => groupIds.includes(g.groupId)) })
  const described = await admin.describeGroups(groupIds)
  emit({
    step: 'describe',
    groups: described.groups.map((g) => ({
      groupId: g.groupId, state: g.state, protocolType: g.protocolType, protocol: g.protocol, errorCode: g.errorCode, members: g.members.length
    }))
  })
  for (const groupId of groupIds) {
    const fetched = await admin.fetchOffsets({ groupId, topics })
    emit({
      step: 'offsets',
      groupId,
      topics: fetched.map((t) => ({ topic: t.topic, partitions: t.partitions.map((p) => [p.partition, Number(p.offset)]).sort((a, b) => a[0] - b[0]) }))
    })
  }
  await admin.disconnect()
})
