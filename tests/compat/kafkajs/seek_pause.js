'use strict'
// One group member on a 2-partition `topic` (10 records each, already there): it seeks
// partition 0 to offset `seekTo` as soon as it runs, and pauses partition 1 until it has
// read partition 0 up to its end, then resumes it. JSON lines: messages and the
// pause/resume events, in the order they happen.
const { args, emit, kafka, message, run } = require('./common')

const { topic, groupId, seekTo, total } = args

run(async () => {
  const consumer = kafka('kafkajs-seek-pause').consumer({ groupId, heartbeatInterval: 300, maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  let seen = 0
  let finish
  const finished = new Promise((resolve) => { finish = resolve })
  // Paused on joining, before the first fetch: nothing of partition 1 comes until resumed.
  consumer.on(consumer.events.GROUP_JOIN, () => {
    consumer.pause([{ topic, partitions: [1] }])
    emit({ event: 'paused', paused: consumer.paused() })
  })
  await consumer.run({
    eachMessage: async ({ topic, partition, message: m }) => {
      const line = message(topic, partition, m)
      emit(line)
      if (partition === 0 && line.offset === 9) {
        consumer.resume([{ topic, partitions: [1] }])
        emit({ event: 'resumed', paused: consumer.paused() })
      }
      if (++seen >= total) finish()
    }
  })
  consumer.seek({ topic, partition: 0, offset: String(seekTo) })
  await finished
  await consumer.disconnect()
})
