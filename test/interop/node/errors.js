#!/usr/bin/env node
// What kafkajs reports when Strait fails a partition.
//
// Usage: node errors.js SPEC.json
//
// SPEC.json (written by test/interop/errors_test.go) names the bootstrap
// address, a topic to produce to that the gateway refuses (its KEK does not
// exist), a topic to consume that the gateway cannot decrypt (its KEK was
// deleted), a consumer group, how many consume errors to wait for, and a time
// budget. The script sends three records, then runs a consumer group until
// the consumer has crashed want_errors times (kafkajs tells the application
// of a failed fetch only through its crash event, after its own retries) or
// the time runs out, and prints one JSON object on stdout:
//
//   {"client": ..., "produced": N, "produce_errors": [...],
//    "consumed": N, "consume_errors": [...]}
//
// Each error is "Name: message (TYPE of the original cause)". kafkajs logs
// go to stderr.
'use strict'

const fs = require('fs')
const path = require('path')
const { Kafka, logLevel } = require('kafkajs')
const kafkajsVersion = require(path.join(path.dirname(require.resolve('kafkajs')), 'package.json')).version

function describe (e) {
  let cause = e
  while (cause.cause) cause = cause.cause
  return `${e.name}: ${e.message}` + (cause.type ? ` (${cause.type})` : '')
}

function stderrLogger () {
  return ({ namespace, label, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`${new Date().toISOString()} ${label} ${namespace}: ${message} ${JSON.stringify(extra)}\n`)
  }
}

async function main () {
  const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
  const deadline = Date.now() + spec.timeout_s * 1000
  const result = { client: `kafkajs ${kafkajsVersion}`, produced: 0, produce_errors: [], consumed: 0, consume_errors: [] }
  const kafka = new Kafka({
    clientId: 'strait-interop-kafkajs',
    brokers: [spec.bootstrap],
    logLevel: process.env.STRAIT_INTEROP_DEBUG ? logLevel.DEBUG : logLevel.WARN,
    logCreator: stderrLogger,
    connectionTimeout: 10000,
    requestTimeout: 30000
  })

  const producer = kafka.producer()
  await producer.connect()
  try {
    const messages = [0, 1, 2].map((i) => ({ key: `k${i}`, value: `v${i}` }))
    await producer.send({ topic: spec.produce_topic, acks: -1, messages })
    result.produced += messages.length
  } catch (e) {
    result.produce_errors.push(describe(e))
  }
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: spec.group, allowAutoTopicCreation: false, maxWaitTimeInMs: 500 })
  let finish
  const done = new Promise((resolve) => { finish = resolve })
  const timer = setTimeout(() => finish(), Math.max(1000, deadline - Date.now()))
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    result.consume_errors.push(describe(payload.error))
    if (result.consume_errors.length >= spec.want_errors) finish()
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [spec.consume_topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async () => { result.consumed++ }
  })
  await done
  clearTimeout(timer)
  await consumer.disconnect()
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().catch((e) => {
  process.stderr.write(`errors.js failed: ${e && e.stack ? e.stack : e}\n`)
  process.exit(1)
})
