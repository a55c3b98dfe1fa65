// Development helper for tests/fixtures_src/capture_txn_v2.py (needs the JVM build of Kafka 4.1.2).
import java.util.*;
import org.apache.kafka.clients.admin.*;

/** kafka-features for transaction.version through the Java Admin: describe, or set a level. */
public class Features {
    public static void main(String[] args) throws Exception {
        Properties ap = new Properties();
        ap.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(ap)) {
            if (args.length > 1) {
                short level = Short.parseShort(args[1]);
                FeatureUpdate.UpgradeType type = FeatureUpdate.UpgradeType.valueOf(args.length > 2 ? args[2] : "UPGRADE");
                boolean validateOnly = args.length > 3 && args[3].equals("validate");
                try {
                    admin.updateFeatures(Map.of("transaction.version", new FeatureUpdate(level, type)),
                        new UpdateFeaturesOptions().validateOnly(validateOnly)).all().get();
                    System.out.println("UPDATE ok");
                } catch (Exception e) {
                    System.out.println("UPDATE " + e.getCause());
                }
            }
            FeatureMetadata md = admin.describeFeatures().featureMetadata().get();
            System.out.println("FINALIZED " + md.finalizedFeatures().get("transaction.version"));
            System.out.println("SUPPORTED " + md.supportedFeatures().get("transaction.version"));
        }
    }
}
