// Produce keyed records, a tombstone and an empty value with kafkajs, then consume them back
// from the beginning and print them as JSON lines: {"offset", "key", "value"} (value null for a
// tombstone). Usage: node roundtrip.js <bootstrap> <topic>
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kompakt-test", brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    topics: [{ topic, numPartitions: 1, configEntries: [{ name: "cleanup.policy", value: "compact" }] }],
  });
  await admin.disconnect();
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({
    topic,
    messages: [
      { key: "a", value: "1" },
      { key: "b", value: null },
      { key: "c", value: "" },
      { key: "a", value: "2" },
    ],
  });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: `kjs-${Date.now()}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timeout, saw ${seen.length}`)), 20000);
    consumer.run({
      eachMessage: async ({ message }) => {
        seen.push({
          offset: Number(message.offset),
          key: message.key === null ? null : message.key.toString(),
          value: message.value === null ? null : message.value.toString(),
        });
        if (seen.length === 4) {
          clearTimeout(timer);
          resolve();
        }
      },
    });
  });
  await consumer.disconnect();
  for (const record of seen) console.log(JSON.stringify(record));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
