'use strict'
// Consume-transform-produce, exactly once: a group member reads `input` (read_committed),
// and for each batch writes the upper-cased values to `output` and commits the input
// offsets with sendOffsets, in one transaction, until it has moved `max` messages.
const { args, emit, kafka, run } = require('./common')

const { input, output, groupId, transactionalId, max, abortFirst = false } = args

run(async () => {
  const client = kafka('kafkajs-transform')
  const producer = client.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
  const consumer = client.consumer({ groupId, heartbeatInterval: 300, maxWaitTimeInMs: 200 })
  await producer.connect()
  await consumer.connect()
  await consumer.subscribe({ topic: input, fromBeginning: true })
  let moved = 0
  let aborts = abortFirst ? 1 : 0
  let finish
  const finished = new Promise((resolve) => { finish = resolve })
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch, isRunning, isStale }) => {
      if (!isRunning() || isStale() || batch.messages.length === 0) return
      const transaction = await producer.transaction()
      await transaction.send({
        topic: output,
        messages: batch.messages.map((m) => ({ key: m.key, value: m.value.toString().toUpperCase() }))
      })
      const next = (BigInt(batch.lastOffset()) + 1n).toString()
      await transaction.sendOffsets({ consumerGroupId: groupId, topics: [{ topic: input, partitions: [{ partition: batch.partition, offset: next }] }] })
      if (aborts > 0) {
        // An aborted transaction: its output is never read, its offsets never committed,
        // so the batch comes again after a seek back.
        aborts--
        await transaction.abort()
        emit({ event: 'aborted', partition: batch.partition, next: Number(next) })
        consumer.seek({ topic: input, partition: batch.partition, offset: batch.firstOffset() })
        return
      }
      await transaction.commit()
      moved += batch.messages.length
      emit({ event: 'committed', partition: batch.partition, count: batch.messages.length, next: Number(next) })
      if (moved >= max) finish()
    }
  })
  await finished
  await consumer.disconnect()
  await producer.disconnect()
  emit({ event: 'done', moved })
})
