'use strict'
// Send `count` keyed records with headers to `topic`, `batch` per send(), with the given
// acks, compression and idempotence; one JSON line per acknowledged send().
const { CompressionTypes } = require('kafkajs')
const { args, emit, kafka, run } = require('./common')

const { topic, count, batch = 10, acks = -1, compression = 'none', idempotent = false, prefix = 'v' } = args
const codecs = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }

run(async () => {
  const producer = kafka('kafkajs-produce').producer({ idempotent, maxInFlightRequests: idempotent ? 1 : 5 })
  await producer.connect()
  for (let start = 0; start < count; start += batch) {
    const messages = []
    for (let i = start; i < Math.min(start + batch, count); i++) {
      messages.push({ key: `k${i % 7}`, value: `${prefix}${i}`, headers: { i: String(i), h: 'x' } })
    }
    const acked = await producer.send({ topic, acks, compression: codecs[compression], messages })
    // kafkajs answers per partition: where this send's records start there.
    emit({ values: messages.map((m) => m.value), acks: acked.map((r) => [r.partition, Number(r.baseOffset), r.errorCode]) })
  }
  await producer.disconnect()
})
