"""The gRPC services of Armada's public API."""
