'use strict'
// Requests slog must refuse or only validate, as Kafka does, and what kafkajs makes of
// them: one JSON line per call, `ok` (its result) or `error` types.
const { ConfigResourceTypes } = require('kafkajs')
const { args, emit, kafka, run } = require('./common')

const { topic } = args
const resource = { type: ConfigResourceTypes.TOPIC, name: topic }

run(async () => {
  const client = kafka('kafkajs-admin-refusals')
  const admin = client.admin()
  await admin.connect()
  const attempt = async (step, call) => {
    try {
      emit({ step, ok: await call() })
    } catch (e) {
      emit({ step, errors: e.errors ? e.errors.map((x) => x.type) : [e.type] })
    }
  }
  // kafkajs waits for a validated topic's leaders unless told not to (a topic that never
  // comes): waitForLeaders false, as against Kafka.
  const validate = (spec) => admin.createTopics({ validateOnly: true, waitForLeaders: false, topics: [spec] })
  await attempt('validate', () => validate({ topic, numPartitions: 2 }))
  await attempt('validate_bad_rf', () => validate({ topic, replicationFactor: 5 }))
  await attempt('listed', async () => (await admin.listTopics()).filter((t) => t === topic))
  const create = (spec) => admin.createTopics({ topics: [{ topic, ...spec }] })
  await attempt('bad_config', () => create({ configEntries: [{ name: 'cleanup.policy', value: 'bogus' }] }))
  await attempt('unknown_config', () => create({ configEntries: [{ name: 'no.such.config', value: '1' }] }))
  await attempt('bad_rf', () => create({ replicationFactor: 5 }))
  await attempt('bad_name', () => admin.createTopics({ topics: [{ topic: 'bad name!' }] }))
  await attempt('create', () => create({ numPartitions: 1 }))
  await attempt('fewer_partitions', () => admin.createPartitions({ topicPartitions: [{ topic, count: 1 }] }))
  await attempt('validate_partitions', () => admin.createPartitions({ validateOnly: true, topicPartitions: [{ topic, count: 4 }] }))
  await attempt('alter_bad_value', () => admin.alterConfigs({ resources: [{ ...resource, configEntries: [{ name: 'retention.ms', value: 'abc' }] }] }))
  await attempt('alter_validate', () => admin.alterConfigs({ validateOnly: true, resources: [{ ...resource, configEntries: [{ name: 'retention.ms', value: '1000' }] }] }))
  await attempt('after', async () => {
    const meta = await admin.fetchTopicMetadata({ topics: [topic] })
    const configs = await admin.describeConfigs({ includeSynonyms: false, resources: [{ ...resource, configNames: ['retention.ms'] }] })
    return { partitions: meta.topics[0].partitions.length, retention: configs.resources[0].configEntries[0].configValue }
  })
  const producer = client.producer()
  await producer.connect()
  await attempt('too_large', () => producer.send({ topic, messages: [{ value: 'x'.repeat(1100000) }] }))
  await producer.disconnect()
  await admin.disconnect()
})
