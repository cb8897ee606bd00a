#!/usr/bin/env node
// What kafkajs and @kafkajs/confluent-schema-registry make of a gateway that
// encrypts fields of records in place.
//
// Usage: node fieldencryption.js SPEC.json
//
// SPEC.json (written by test/interop/fieldencryption_test.go) names the
// gateway, the broker behind it, the registry, and cases: a topic, a schema
// type and schema, and values. For each case the script registers the
// schema under the topic-name subject with the package's registry client,
// encodes the values with it and produces them through the gateway in one
// gzip batch (key "k<i>", one header app=interop-<i>). Then it reads every topic from the
// beginning twice, at the same time: straight from the broker and through
// the gateway, decoding each record with the package's decode (which looks
// the schema id up in the registry). It prints one JSON object on stdout:
//
//   {"client": ..., "errors": [...], "cases": [{"topic", "produced",
//    "broker", "gateway"}]}
//
// where each list holds records {"key", "value" (base64), "headers"
// ([{key, value (base64)}], in record order), "decoded", "error" (what
// decode threw)}. kafkajs logs go to stderr.
'use strict'

const fs = require('fs')
const path = require('path')
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')
const { SchemaRegistry } = require('@kafkajs/confluent-schema-registry')

const version = (pkg) => require(path.join(path.dirname(require.resolve(pkg)), '..', 'package.json')).version
const kafkajsVersion = require(path.join(path.dirname(require.resolve('kafkajs')), 'package.json')).version

function stderrLogger () {
  return ({ namespace, label, log }) => {
    const { message, ...extra } = log
    process.stderr.write(`${new Date().toISOString()} ${label} ${namespace}: ${message} ${JSON.stringify(extra)}\n`)
  }
}

function client (brokers) {
  return new Kafka({
    clientId: 'strait-interop-kafkajs',
    brokers,
    logLevel: process.env.STRAIT_INTEROP_DEBUG ? logLevel.DEBUG : logLevel.WARN,
    logCreator: stderrLogger,
    connectionTimeout: 10000,
    requestTimeout: 30000
  })
}

// headerList turns kafkajs's header object (in record order; a repeated
// key holds an array) into a list.
function headerList (headers) {
  const out = []
  for (const [key, v] of Object.entries(headers || {})) {
    for (const one of Array.isArray(v) ? v : [v]) {
      out.push({ key, value: one == null ? null : Buffer.from(one).toString('base64') })
    }
  }
  return out
}

// consume reads n records of topic from the beginning with a consumer of
// its own group, decoding each, into out (in offset order: one partition).
async function consume (kafka, registry, topic, n, out, deadline, errors, where) {
  if (n === 0) return
  const consumer = kafka.consumer({
    groupId: `${topic}-${where}-${Date.now()}`,
    allowAutoTopicCreation: false,
    maxWaitTimeInMs: 200
  })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  let finish
  const done = new Promise((resolve) => { finish = resolve })
  const timer = setTimeout(() => {
    errors.push(`${where}: read ${out.length} of ${n} records of ${topic} in time`)
    finish()
  }, Math.max(1000, deadline - Date.now()))
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ message }) => {
      const rec = {
        key: message.key == null ? null : message.key.toString('base64'),
        value: message.value == null ? null : message.value.toString('base64'),
        headers: headerList(message.headers),
        decoded: null,
        error: ''
      }
      try {
        rec.decoded = await registry.decode(message.value)
      } catch (e) {
        rec.error = `${e.name}: ${e.message}`
      }
      out.push(rec)
      if (out.length >= n) finish()
    }
  })
  await done
  clearTimeout(timer)
  await consumer.disconnect()
}

async function main () {
  const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
  const deadline = Date.now() + spec.timeout_s * 1000
  const result = {
    client: `kafkajs ${kafkajsVersion} with @kafkajs/confluent-schema-registry ${version('@kafkajs/confluent-schema-registry')}`,
    errors: [],
    cases: []
  }
  const registry = new SchemaRegistry({ host: spec.registry, clientId: 'strait-interop-kafkajs' })
  const gateway = client([spec.gateway])
  const broker = client(spec.broker)

  const producer = gateway.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  for (const c of spec.cases) {
    const rc = { topic: c.topic, produced: [], broker: [], gateway: [] }
    result.cases.push(rc)
    const { id } = await registry.register({ type: c.format, schema: c.schema }, { subject: `${c.topic}-value` })
    const messages = []
    for (const [i, v] of c.values.entries()) {
      const value = await registry.encode(id, v)
      const m = { key: Buffer.from(`k${i}`), value, headers: { app: Buffer.from(`interop-${i}`) } }
      messages.push(m)
      rc.produced.push({ key: m.key.toString('base64'), value: value.toString('base64'), headers: headerList(m.headers) })
    }
    await producer.send({ topic: c.topic, acks: -1, compression: CompressionTypes.GZIP, messages })
  }
  await producer.disconnect()

  const reads = []
  for (const [i, c] of spec.cases.entries()) {
    const rc = result.cases[i]
    reads.push(consume(broker, registry, c.topic, c.values.length, rc.broker, deadline, result.errors, 'broker'))
    reads.push(consume(gateway, registry, c.topic, c.values.length, rc.gateway, deadline, result.errors, 'gateway'))
  }
  await Promise.all(reads)
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().catch((e) => {
  process.stderr.write(`fieldencryption.js failed: ${e && e.stack ? e.stack : e}\n`)
  process.exit(1)
})
