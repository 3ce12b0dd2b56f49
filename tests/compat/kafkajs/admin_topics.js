'use strict'
// The admin calls a kafkajs user makes on a topic's life, each result one JSON line:
// create (partitions, replication factor, configs), metadata, list, add partitions,
// describe/alter configs, produce, offsets, delete records, delete.
const { ConfigResourceTypes } = require('kafkajs')
const { args, emit, kafka, run } = require('./common')

const { topic, replicationFactor } = args

run(async () => {
  const client = kafka('kafkajs-admin-topics')
  const admin = client.admin()
  await admin.connect()
  const created = await admin.createTopics({
    waitForLeaders: true,
    topics: [{
      topic,
      numPartitions: 2,
      replicationFactor,
      configEntries: [{ name: 'retention.ms', value: '86400000' },
        { name: 'max.message.bytes', value: '200000' }]
    }]
  })
  const again = await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] })
  emit({ step: 'create', created, again })

  const meta = await admin.fetchTopicMetadata({ topics: [topic] })
  emit({
    step: 'metadata',
    topics: meta.topics.map((t) => ({
      name: t.name,
      partitions: t.partitions.map((p) => ({
        partition: p.partitionId, leader: p.leader, replicas: p.replicas, isr: p.isr, error: p.partitionErrorCode
      })).sort((a, b) => a.partition - b.partition)
    }))
  })
  emit({ step: 'list', topics: (await admin.listTopics()).filter((t) => t === topic) })

  await admin.createPartitions({ topicPartitions: [{ topic, count: 3 }] })
  const grown = await admin.fetchTopicMetadata({ topics: [topic] })
  emit({ step: 'create_partitions', partitions: grown.topics[0].partitions.length })

  const resource = { type: ConfigResourceTypes.TOPIC, name: topic }
  const describe = async (configNames) => {
    const described = await admin.describeConfigs({ includeSynonyms: false, resources: [{ ...resource, configNames }] })
    const entries = {}
    for (const e of described.resources[0].configEntries) entries[e.configName] = { value: e.configValue, isDefault: e.isDefault, source: e.configSource }
    return { error: described.resources[0].errorCode, entries }
  }
  emit({ step: 'describe_configs', ...(await describe(['retention.ms', 'max.message.bytes', 'cleanup.policy'])) })
  const altered = await admin.alterConfigs({
    validateOnly: false,
    resources: [{ ...resource, configEntries: [{ name: 'retention.ms', value: '3600000' }] }]
  })
  emit({ step: 'alter_configs', errors: altered.resources.map((r) => r.errorCode), ...(await describe(['retention.ms', 'max.message.bytes'])) })

  const producer = client.producer()
  await producer.connect()
  for (const partition of [0, 1, 2]) {
    await producer.send({
      topic,
      messages: Array.from({ length: 5 }, (_, i) => ({ partition, value: `p${partition}-${i}` }))
    })
  }
  await producer.disconnect()
  const offsets = async () => (await admin.fetchTopicOffsets(topic))
    .map((o) => ({ partition: o.partition, low: Number(o.low), high: Number(o.high), offset: Number(o.offset) }))
    .sort((a, b) => a.partition - b.partition)
  emit({ step: 'offsets', offsets: await offsets() })
  const byTime = await admin.fetchTopicOffsetsByTimestamp(topic, Date.now() + 3600000)
  emit({ step: 'offsets_by_time', offsets: byTime.map((o) => Number(o.offset)).sort() })

  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '3' }, { partition: 1, offset: '-1' }] })
  emit({ step: 'delete_records', offsets: await offsets() })

  await admin.deleteTopics({ topics: [topic], timeout: 10000 })
  emit({ step: 'delete', topics: (await admin.listTopics()).filter((t) => t === topic) })
  await admin.disconnect()
})
