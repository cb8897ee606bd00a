#!/usr/bin/env node
// SASL through Strait with kafkajs.
//
// Usage: node sasl.js SPEC.json
//
// SPEC.json (written by test/interop/sasl_test.go) names the bootstrap
// address, the SASL mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or
// OAUTHBEARER) with a user name and password or a bearer token (handed out
// by an oauthBearerProvider), a topic, a consumer group, a time budget, what
// to do ("roundtrip" or "refused") and, for a round trip, the records to
// produce (base64 keys and values).
//
// A round trip produces every record with acks=all, then consumes the topic
// from the beginning in the group until it has as many records as it
// produced or the time runs out. "refused" connects a producer, sends one
// record and reports what kafkajs threw. Either way the script prints one
// JSON object on stdout:
//
//   {"client": ..., "produced": N, "errors": [...], "consumed": [records]}
//
// Each error is "Name: message (TYPE of the original cause, if any)".
// kafkajs logs go to stderr.
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

// saslOptions are kafkajs's sasl settings for the spec's credentials.
function saslOptions (spec) {
  const mechanism = spec.mechanism.toLowerCase()
  if (mechanism === 'oauthbearer') {
    return { mechanism, oauthBearerProvider: async () => ({ value: spec.token }) }
  }
  return { mechanism, username: spec.username, password: spec.password }
}

async function roundTrip (kafka, spec, deadline, result) {
  const producer = kafka.producer()
  await producer.connect()
  const messages = spec.records.map((r) => ({ key: Buffer.from(r.key, 'base64'), value: Buffer.from(r.value, 'base64') }))
  try {
    await producer.send({ topic: spec.topic, acks: -1, messages })
    result.produced += messages.length
  } catch (e) {
    result.errors.push(`produce: ${describe(e)}`)
  }
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: spec.group, allowAutoTopicCreation: false, maxWaitTimeInMs: 500 })
  await consumer.connect()
  await consumer.subscribe({ topics: [spec.topic], fromBeginning: true })
  let finish
  const done = new Promise((resolve) => { finish = resolve })
  const timer = setTimeout(() => finish(), Math.max(1000, deadline - Date.now()))
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      result.consumed.push({
        key: message.key == null ? null : message.key.toString('base64'),
        value: message.value == null ? null : message.value.toString('base64'),
        partition,
        offset: Number(message.offset)
      })
      if (result.consumed.length >= messages.length) finish()
    }
  })
  await done
  clearTimeout(timer)
  await consumer.disconnect()
}

async function refused (kafka, spec, result) {
  const producer = kafka.producer()
  try {
    await producer.connect()
    await producer.send({ topic: spec.topic, acks: -1, messages: [{ key: 'k', value: 'v' }] })
    result.produced++
  } catch (e) {
    result.errors.push(describe(e))
  }
  await producer.disconnect()
}

async function main () {
  const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
  const deadline = Date.now() + spec.timeout_s * 1000
  const result = { client: `kafkajs ${kafkajsVersion}`, produced: 0, errors: [], consumed: [] }
  const kafka = new Kafka({
    clientId: 'strait-interop-kafkajs',
    brokers: [spec.bootstrap],
    sasl: saslOptions(spec),
    logLevel: process.env.STRAIT_INTEROP_DEBUG ? logLevel.DEBUG : logLevel.WARN,
    logCreator: stderrLogger,
    connectionTimeout: 10000,
    requestTimeout: 30000
  })
  if (spec.mode === 'roundtrip') {
    await roundTrip(kafka, spec, deadline, result)
  } else {
    await refused(kafka, spec, result)
  }
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().catch((e) => {
  process.stderr.write(`sasl.js failed: ${e && e.stack ? e.stack : e}\n`)
  process.exit(1)
})
