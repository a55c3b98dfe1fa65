// Produce and consume back a few records with kafkajs over SASL (SCRAM or PLAIN), optionally on
// TLS, and print them as JSON lines {"offset", "key", "value"}; a failed login prints the error
// as {"error": name, "message": text} and exits 2.
// Usage: node sasl_roundtrip.js <bootstrap> <topic> <mechanism> <username> <password> [ca.pem]
const fs = require("fs");
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, mechanism, username, password, ca] = process.argv.slice(2);
  const kafka = new Kafka({
    clientId: "kompakt-sasl-test",
    brokers: [bootstrap],
    logLevel: logLevel.NOTHING,
    ssl: ca ? { ca: [fs.readFileSync(ca, "utf-8")] } : false,
    sasl: { mechanism, username, password },
    retry: { retries: 1 },
  });
  const producer = kafka.producer();
  try {
    await producer.connect();
  } catch (err) {
    console.log(JSON.stringify({ error: err.name, type: err.type || null, message: err.message }));
    process.exit(2);
  }
  await producer.send({ topic, messages: [{ key: "a", value: "1" }, { key: "b", value: "2" }] });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: `kjs-sasl-${Date.now()}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timeout, saw ${seen.length}`)), 20000);
    consumer.run({
      eachMessage: async ({ message }) => {
        seen.push({ offset: Number(message.offset), key: message.key.toString(), value: message.value.toString() });
        if (seen.length === 2) {
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
