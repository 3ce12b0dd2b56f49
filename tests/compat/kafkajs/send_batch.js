'use strict'
// One producer.sendBatch() carrying `count` records to each of `topics` (acks -1, gzip),
// then the per-partition answers as one JSON line.
const { CompressionTypes } = require('kafkajs')
const { args, emit, kafka, run } = require('./common')

const { topics, count } = args

run(async () => {
  const producer = kafka('kafkajs-send-batch').producer()
  await producer.connect()
  const acked = await producer.sendBatch({
    acks: -1,
    compression: CompressionTypes.GZIP,
    topicMessages: topics.map((topic) => ({
      topic,
      messages: Array.from({ length: count }, (_, i) => ({ partition: 0, key: `${topic}-k${i}`, value: `${topic}-v${i}` }))
    }))
  })
  emit({ acks: acked.map((r) => [r.topicName, r.partition, Number(r.baseOffset), r.errorCode]) })
  await producer.disconnect()
})
