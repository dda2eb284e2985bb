/// The Kafka module. See README.md, "Architecture".
public enum KafkaModule {}
