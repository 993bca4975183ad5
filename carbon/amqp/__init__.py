"""AMQP 0-9-1 through txAMQP: our protocol spec table, field encoding and client connection."""
