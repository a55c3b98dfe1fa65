// Apache Kafka 4.1's own log cleaner on a log directory, for bench/bench_cleaner.py.
//
// Run with Java's source launcher against a Kafka build's classpath (no separate compile step):
//
//   java -cp "$(cat $KAFKA_BUILD/classpath)" bench/bench_cleaner_kafka.java
//
// It reads one command per line on stdin and answers each with one JSON line on stdout, so the
// Python benchmark can interleave Kafka's cleans with kompakt's in one run and keep this JVM
// warm between them:
//
//   clean DIR   open DIR (a partition directory "topic-N" of Kafka-format segments, e.g. a copy of
//               the one kompakt wrote) as a UnifiedLog and clean every non-active segment once, as a
//               LogCleaner thread would with the broker's defaults (Cleaner, SkimpyOffsetMap with
//               MD5, a 128 MiB dedupe buffer, load factor 0.9, 256 KiB I/O buffers, no throttle);
//               the timed part is Cleaner.doClean alone (map pass, copy pass, fsync, swap)
//   quit
//
// The Cleaner is built the way LogCleaner.CleanerThread builds it (LogCleaner.java), one per JVM,
// so its offset map and buffers are reused from one clean to the next as in a broker.

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;

import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.log.Cleaner;
import org.apache.kafka.storage.internals.log.CleanerStats;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.LogToClean;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.SkimpyOffsetMap;
import org.apache.kafka.storage.internals.log.UnifiedLog;
import org.apache.kafka.storage.internals.utils.Throttler;
import org.apache.kafka.storage.log.metrics.BrokerTopicStats;

public class KafkaCleanerBench {
    static final int DEDUPE_BUFFER_BYTES = 128 * 1024 * 1024; // log.cleaner.dedupe.buffer.size
    static final int IO_BUFFER_BYTES = 512 * 1024; // log.cleaner.io.buffer.size (one thread: / 1 / 2)
    static final int MAX_MESSAGE_BYTES = 1048588; // message.max.bytes
    static final double LOAD_FACTOR = 0.9; // log.cleaner.io.buffer.load.factor

    public static void main(String[] args) throws Exception {
        Time time = Time.SYSTEM;
        KafkaScheduler scheduler = new KafkaScheduler(1);
        scheduler.startup();
        Throttler throttler = new Throttler(Double.MAX_VALUE, 300, "cleaner-io", "bytes", time);
        Cleaner cleaner = new Cleaner(0, new SkimpyOffsetMap(DEDUPE_BUFFER_BYTES, "MD5"), IO_BUFFER_BYTES / 2,
                MAX_MESSAGE_BYTES, LOAD_FACTOR, throttler, time, tp -> { });
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        System.out.println("{\"ready\": true}");
        System.out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.equals("quit")) {
                break;
            }
            if (!line.startsWith("clean ")) {
                System.out.println("{\"error\": \"unknown command\"}");
                System.out.flush();
                continue;
            }
            System.out.println(clean(cleaner, scheduler, time, new File(line.substring(6))));
            System.out.flush();
        }
        scheduler.shutdown();
    }

    static String clean(Cleaner cleaner, KafkaScheduler scheduler, Time time, File dir) throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put("cleanup.policy", "compact");
        props.put("segment.bytes", Integer.toString(128 * 1024 * 1024));
        props.put("segment.index.bytes", Integer.toString(10 * 1024 * 1024));
        props.put("file.delete.delay.ms", "0");
        LogConfig config = new LogConfig(props);
        long end;
        UnifiedLog log = UnifiedLog.create(dir, config, 0L, Long.MAX_VALUE, scheduler, new BrokerTopicStats(),
                time, 5 * 60 * 1000, new ProducerStateManagerConfig(86400000, false), 600000,
                new LogDirFailureChannel(10), true, Optional.empty());
        try {
            end = log.activeSegment().baseOffset();
            LogToClean cleanable = new LogToClean(log, 0L, end, false);
            long start = System.nanoTime();
            Map.Entry<Long, CleanerStats> result = cleaner.doClean(cleanable, time.milliseconds());
            double wall = (System.nanoTime() - start) / 1e9;
            CleanerStats stats = result.getValue();
            return String.format(
                    "{\"clean_seconds\": %.4f, \"map_pass_seconds\": %.4f, \"stats_elapsed_seconds\": %.4f, "
                            + "\"bytes_read\": %d, \"bytes_written\": %d, \"messages_read\": %d, "
                            + "\"messages_written\": %d, \"end_offset\": %d, \"first_uncleanable_offset\": %d, "
                            + "\"map_utilization\": %.4f}",
                    wall, stats.elapsedIndexSecs(), stats.elapsedSecs(), stats.bytesRead(), stats.bytesWritten(),
                    stats.messagesRead(), stats.messagesWritten(), result.getKey(), end,
                    stats.bufferUtilization());
        } finally {
            log.close();
            awaitDeletes(dir);
        }
    }

    /** Kafka deletes the segments a clean replaced on its scheduler (file.delete.delay.ms 0), after
     * the clean returns: wait for that, or the caller's removal of the directory races it. */
    static void awaitDeletes(File dir) throws InterruptedException {
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (System.nanoTime() < deadline) {
            String[] left = dir.list((d, name) -> name.endsWith(".deleted"));
            if (left == null || left.length == 0) {
                return;
            }
            Thread.sleep(5);
        }
    }
}
