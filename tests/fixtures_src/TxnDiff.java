// Development helper for tests/fixtures_src/capture_txn_v2.py (needs the JVM build of Kafka 4.1.2).
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.*;

/** The differential scenario: a Kafka 4.1 transactional producer, commits, an abort and
 * transactional offset commits; then a read_committed consumer prints what it sees. */
public class TxnDiff {
    public static void main(String[] args) throws Exception {
        String bs = args[0];
        String topic = args.length > 1 ? args[1] : "tv2";
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bs);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
        }
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bs);
        pp.put("transactional.id", "tv2-app");
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        pp.put("linger.ms", "0");
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            p.initTransactions();
            int n = 0;
            for (int t = 0; t < 6; t++) {
                p.beginTransaction();
                for (int i = 0; i < 3; i++) {
                    p.send(new ProducerRecord<>(topic, "k" + (n % 4), "t" + t + "-" + i)).get();
                    n++;
                }
                if (t == 3) {
                    Map<TopicPartition, OffsetAndMetadata> offs = new HashMap<>();
                    offs.put(new TopicPartition(topic, 0), new OffsetAndMetadata(n));
                    p.sendOffsetsToTransaction(offs, new ConsumerGroupMetadata("tv2-group"));
                }
                if (t == 2 || t == 4) p.abortTransaction(); else p.commitTransaction();
            }
            // an abort of a transaction with no data (allowed with version 2)
            p.beginTransaction();
            p.abortTransaction();
        }
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bs);
        cp.put("group.id", "tv2-reader");
        cp.put("isolation.level", "read_committed");
        cp.put("auto.offset.reset", "earliest");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        List<String> seen = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            c.assign(List.of(new TopicPartition(topic, 0)));
            long end = System.currentTimeMillis() + 20000;
            while (seen.size() < 12 && System.currentTimeMillis() < end) {
                for (ConsumerRecord<String, String> r : c.poll(java.time.Duration.ofMillis(500)))
                    seen.add(r.offset() + ":" + r.key() + "=" + r.value());
            }
            Map<TopicPartition, OffsetAndMetadata> committed;
            try (Admin admin = Admin.create(ap)) {
                committed = admin.listConsumerGroupOffsets("tv2-group").partitionsToOffsetAndMetadata().get();
            }
            System.out.println("READ_COMMITTED " + seen);
            System.out.println("GROUP_OFFSETS " + committed);
        }
    }
}
