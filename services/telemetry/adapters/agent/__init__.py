"""The node agent's IO: its checkpoint file, the gzip level of its producer, its Kafka reads and writes."""
