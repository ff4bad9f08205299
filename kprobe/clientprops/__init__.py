"""The client configuration users already have: Java client properties, librdkafka and kcat files, JAAS, key stores."""
